package bitcoin

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
)

// ErrBadPrivateKey is wrapped by every private-key parse error. Messages never
// include the key material itself.
var ErrBadPrivateKey = errors.New("bad bitcoin private key")

// PrivateKey is the faucet's secp256k1 key on one test network. Its public key
// is always compressed and its address is P2WPKH (bcrt1q… on regtest,
// tb1q… on signet and testnet): the cheapest output to spend.
//
// Its String, GoString, Format, LogValue and MarshalJSON methods redact the
// secret, so a key that reaches a log line, an error or a JSON document by
// accident shows at most its address.
type PrivateKey struct {
	key  *btcec.PrivateKey
	net  Network
	addr Address
}

// ParsePrivateKey reads a key for net in either form a key file may hold:
// compressed WIF of a test network (c…, as bitcoin-cli dumps and descriptors
// take; regtest, signet and testnet share its version byte) or 64 hex
// characters. Mainnet and uncompressed WIF keys are refused.
func ParsePrivateKey(s string, net Network) (*PrivateKey, error) {
	params, err := net.params()
	if err != nil {
		return nil, err
	}
	s = strings.TrimSpace(s)
	if len(s) == 64 {
		return parseHexKey(s, net)
	}
	w, err := btcutil.DecodeWIF(s)
	switch {
	case errors.Is(err, btcutil.ErrChecksumMismatch):
		return nil, fmt.Errorf("%w: WIF checksum does not match", ErrBadPrivateKey)
	case err != nil:
		// Deliberately not wrapping err: keep library text away from secrets.
		return nil, fmt.Errorf("%w: neither WIF nor 64 hex characters (%d characters)", ErrBadPrivateKey, len(s))
	case w.IsForNet(&chaincfg.MainNetParams):
		return nil, fmt.Errorf("%w: a mainnet WIF key: %w", ErrBadPrivateKey, ErrMainnet)
	case !w.IsForNet(params):
		return nil, fmt.Errorf("%w: WIF key is not for a bitcoin test network", ErrBadPrivateKey)
	case !w.CompressPubKey:
		return nil, fmt.Errorf("%w: uncompressed WIF key: P2WPKH needs a compressed public key", ErrBadPrivateKey)
	case w.PrivKey.Key.IsZero() || w.String() != s:
		// DecodeWIF reduces the scalar mod n; a different re-encoding means
		// the encoded number was out of range.
		return nil, fmt.Errorf("%w: not in the range 1..n-1 of secp256k1", ErrBadPrivateKey)
	}
	return newPrivateKey(w.PrivKey, net)
}

func parseHexKey(s string, net Network) (*PrivateKey, error) {
	raw, err := hex.DecodeString(s)
	if err != nil {
		// Deliberately not wrapping err: hex errors quote the offending byte.
		return nil, fmt.Errorf("%w: 64 characters but not hexadecimal", ErrBadPrivateKey)
	}
	var scalar btcec.ModNScalar
	if overflow := scalar.SetByteSlice(raw); overflow || scalar.IsZero() {
		return nil, fmt.Errorf("%w: not in the range 1..n-1 of secp256k1", ErrBadPrivateKey)
	}
	return newPrivateKey(btcec.PrivKeyFromScalar(&scalar), net)
}

// GeneratePrivateKey returns a fresh random key for net (crypto/rand, through
// btcec).
func GeneratePrivateKey(net Network) (*PrivateKey, error) {
	if _, err := net.params(); err != nil {
		return nil, err
	}
	k, err := btcec.NewPrivateKey()
	if err != nil {
		return nil, fmt.Errorf("generate bitcoin private key: %w", err)
	}
	return newPrivateKey(k, net)
}

func newPrivateKey(k *btcec.PrivateKey, net Network) (*PrivateKey, error) {
	params := net.ChainParams()
	pkh, err := btcutil.NewAddressWitnessPubKeyHash(btcutil.Hash160(k.PubKey().SerializeCompressed()), params)
	if err != nil {
		return nil, fmt.Errorf("p2wpkh address: %w", err)
	}
	script, err := txscript.PayToAddrScript(pkh)
	if err != nil {
		return nil, fmt.Errorf("p2wpkh script: %w", err)
	}
	addr := Address{s: pkh.EncodeAddress(), script: string(script), typ: P2WPKH, net: net}
	return &PrivateKey{key: k, net: net, addr: addr}, nil
}

// WIF returns the secret as compressed test-network WIF, the form the faucet's
// key file holds and ParsePrivateKey reads. Like Hex it is the only way out
// for the secret: call it only to hand a key to its owner.
func (k *PrivateKey) WIF() string {
	w, err := btcutil.NewWIF(k.key, k.net.ChainParams(), true)
	if err != nil {
		// NewWIF fails only for nil parameters, which a PrivateKey never has.
		return ""
	}
	return w.String()
}

// Hex returns the 32-byte secret as 64 hex characters (also accepted by
// ParsePrivateKey).
func (k *PrivateKey) Hex() string { return hex.EncodeToString(k.key.Serialize()) }

// Network is the network the key was parsed or generated for.
func (k *PrivateKey) Network() Network { return k.net }

// PublicKey returns the 33-byte compressed public key.
func (k *PrivateKey) PublicKey() []byte { return k.key.PubKey().SerializeCompressed() }

// Address is the key's P2WPKH address: where the faucet is funded and where
// its change goes.
func (k *PrivateKey) Address() Address { return k.addr }

const redacted = "[redacted bitcoin private key]"

// String redacts the key.
func (k PrivateKey) String() string { return redacted }

// GoString redacts the key for %#v.
func (k PrivateKey) GoString() string { return redacted }

// Format redacts the key for every fmt verb.
func (k PrivateKey) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue shows only the address in structured logs.
func (k PrivateKey) LogValue() slog.Value { return slog.StringValue("key:" + k.addr.String()) }

// MarshalJSON redacts the key: a struct holding one can be logged as JSON
// without leaking it.
func (k PrivateKey) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
