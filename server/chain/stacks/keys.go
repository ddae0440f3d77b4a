package stacks

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
)

// ErrBadPrivateKey is wrapped by every private-key parse error. Messages never
// include the key material itself.
var ErrBadPrivateKey = errors.New("bad private key")

// PrivateKey is a secp256k1 key plus the public-key encoding stacks.js infers
// from its hex form: 64 hex characters mean an uncompressed public key, 66
// ending in "01" a compressed one. The encoding changes the address.
//
// Its String, GoString, Format and LogValue methods redact the secret, so a key
// that reaches a log line or an error by accident prints nothing sensitive.
type PrivateKey struct {
	key        *secp256k1.PrivateKey
	compressed bool
	// pub is the serialised public key, derived once: deriving it is a
	// scalar multiplication, and every transaction built needs it.
	pub []byte
}

func newPrivateKey(k *secp256k1.PrivateKey, compressed bool) *PrivateKey {
	pub := k.PubKey().SerializeUncompressed()
	if compressed {
		pub = k.PubKey().SerializeCompressed()
	}
	return &PrivateKey{key: k, compressed: compressed, pub: pub}
}

// ParsePrivateKey reads a hex private key the way stacks.js does.
func ParsePrivateKey(s string) (*PrivateKey, error) {
	var compressed bool
	switch len(s) {
	case 64:
	case 66:
		if !strings.EqualFold(s[64:], "01") {
			return nil, fmt.Errorf("%w: 33-byte key must end in 01 (compressed marker)", ErrBadPrivateKey)
		}
		compressed = true
		s = s[:64]
	default:
		return nil, fmt.Errorf("%w: %d hex characters, want 64, or 66 ending in 01", ErrBadPrivateKey, len(s))
	}
	raw, err := hex.DecodeString(s)
	if err != nil {
		// Deliberately not wrapping err: hex errors quote the offending byte.
		return nil, fmt.Errorf("%w: not hexadecimal", ErrBadPrivateKey)
	}
	var scalar secp256k1.ModNScalar
	if overflow := scalar.SetByteSlice(raw); overflow || scalar.IsZero() {
		return nil, fmt.Errorf("%w: not in the range 1..n-1 of secp256k1", ErrBadPrivateKey)
	}
	return newPrivateKey(secp256k1.NewPrivateKey(&scalar), compressed), nil
}

// GeneratePrivateKey returns a fresh random key with a compressed public key,
// the form new Stacks wallets use.
func GeneratePrivateKey() (*PrivateKey, error) {
	k, err := secp256k1.GeneratePrivateKeyFromRand(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate private key: %w", err)
	}
	return newPrivateKey(k, true), nil
}

// Hex returns the secret in the same form ParsePrivateKey accepts. It is the
// only way the secret leaves this type: call it only to hand a key to its owner.
func (k *PrivateKey) Hex() string {
	b := k.key.Key.Bytes()
	s := hex.EncodeToString(b[:])
	if k.compressed {
		s += "01"
	}
	return s
}

// Compressed reports whether the public key is used in compressed form.
func (k *PrivateKey) Compressed() bool { return k.compressed }

// PublicKey returns the serialised public key (33 or 65 bytes).
func (k *PrivateKey) PublicKey() []byte { return slices.Clone(k.pub) }

// KeyEncoding is the transaction's key-encoding byte for this key.
func (k *PrivateKey) KeyEncoding() KeyEncoding {
	if k.compressed {
		return KeyEncodingCompressed
	}
	return KeyEncodingUncompressed
}

// Address returns the single-sig address of this key for the given version.
func (k *PrivateKey) Address(version byte) Address {
	return Address{Version: version, Hash160: Hash160(k.pub)}
}

// TestnetAddress is the ST… address of this key.
func (k *PrivateKey) TestnetAddress() Address { return k.Address(AddressVersionTestnetSingleSig) }

const redacted = "[redacted private key]"

// String redacts the key.
func (k *PrivateKey) String() string { return redacted }

// GoString redacts the key for %#v.
func (k *PrivateKey) GoString() string { return redacted }

// Format redacts the key for every fmt verb.
func (k *PrivateKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue shows only the testnet address in structured logs.
func (k *PrivateKey) LogValue() slog.Value {
	return slog.StringValue("key:" + k.TestnetAddress().String())
}

// ParsePrivateKeys reads one or more keys separated by newlines, commas or
// spaces; blank entries and '#' comments (to the end of the line) are
// ignored. Errors name the entry's position, never its content.
func ParsePrivateKeys(text string) ([]*PrivateKey, error) {
	var keys []*PrivateKey
	seen := map[Address]int{}
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for field := range strings.FieldsFuncSeq(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			n++
			k, err := ParsePrivateKey(field)
			if err != nil {
				return nil, fmt.Errorf("key #%d: %w", n, err)
			}
			a := k.TestnetAddress()
			if prev, dup := seen[a]; dup {
				return nil, fmt.Errorf("key #%d: %w: same address as key #%d", n, ErrBadPrivateKey, prev)
			}
			seen[a] = n
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys found", ErrBadPrivateKey)
	}
	return keys, nil
}
