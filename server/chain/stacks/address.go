package stacks

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ripemd160" //nolint:staticcheck // hash160 is defined with RIPEMD-160.
)

// Address version bytes (stacks-common address/mod.rs).
const (
	AddressVersionMainnetSingleSig byte = 22 // SP…
	AddressVersionMainnetMultiSig  byte = 20 // SM…
	AddressVersionTestnetSingleSig byte = 26 // ST…
	AddressVersionTestnetMultiSig  byte = 21 // SN…
)

// Sentinel errors, wrapped with detail; test with errors.Is.
var (
	ErrBadCharacter    = errors.New("bad character")
	ErrBadChecksum     = errors.New("bad checksum")
	ErrBadLength       = errors.New("bad length")
	ErrMainnetAddress  = errors.New("mainnet address")
	ErrBadVersion      = errors.New("unknown address version")
	ErrBadContractName = errors.New("bad contract name")
)

// CharError reports a character outside the c32 alphabet.
type CharError struct {
	Char rune
	Pos  int
}

func (e *CharError) Error() string {
	return fmt.Sprintf("bad character %q at position %d (c32 uses 0-9 and A-Z without I, L, O, U)", e.Char, e.Pos)
}

// Unwrap lets errors.Is(err, ErrBadCharacter) match.
func (e *CharError) Unwrap() error { return ErrBadCharacter }

// Address is a standard Stacks address: a version byte and a 20-byte hash160.
type Address struct {
	Version byte
	Hash160 [20]byte
}

// Hash160 is RIPEMD-160(SHA-256(b)).
func Hash160(b []byte) [20]byte {
	s := sha256.Sum256(b)
	r := ripemd160.New()
	r.Write(s[:])
	return [20]byte(r.Sum(nil))
}

// String renders the address as "S" + c32check(version, hash160).
func (a Address) String() string {
	s, err := C32CheckEncode(a.Version, a.Hash160[:])
	if err != nil {
		// Only reachable for a version ≥ 32, which no parser produces.
		return fmt.Sprintf("<invalid address version %d>", a.Version)
	}
	return "S" + s
}

// IsMainnet reports whether the version is one of the two mainnet versions.
func (a Address) IsMainnet() bool {
	return a.Version == AddressVersionMainnetSingleSig || a.Version == AddressVersionMainnetMultiSig
}

// IsTestnet reports whether the version is one of the two testnet versions.
func (a Address) IsTestnet() bool {
	return a.Version == AddressVersionTestnetSingleSig || a.Version == AddressVersionTestnetMultiSig
}

// ParseAddress parses a standard address of any known network version. Like the
// c32check package, it requires a leading upper-case 'S' and normalises the rest.
func ParseAddress(s string) (Address, error) {
	if len(s) <= 5 {
		return Address{}, fmt.Errorf("address %q: %w: too short", truncate(s), ErrBadLength)
	}
	if s[0] != 'S' {
		return Address{}, fmt.Errorf("address %q: must start with \"S\"", truncate(s))
	}
	version, data, err := C32CheckDecode(s[1:])
	if err != nil {
		var ce *CharError
		if errors.As(err, &ce) {
			ce.Pos++ // count from the start of the address
		}
		return Address{}, fmt.Errorf("address %q: %w", truncate(s), err)
	}
	if len(data) != 20 {
		return Address{}, fmt.Errorf("address %q: %w: hash is %d bytes, want 20", truncate(s), ErrBadLength, len(data))
	}
	a := Address{Version: version, Hash160: [20]byte(data)}
	if !a.IsMainnet() && !a.IsTestnet() {
		return Address{}, fmt.Errorf("address %q: %w %d", truncate(s), ErrBadVersion, version)
	}
	return a, nil
}

// Principal is a transfer recipient: a standard address, or a contract
// identified by its deployer address and name.
type Principal struct {
	Address      Address
	ContractName string // empty for a standard principal
}

// IsContract reports whether p names a contract.
func (p Principal) IsContract() bool { return p.ContractName != "" }

// String renders "ADDR" or "ADDR.name".
func (p Principal) String() string {
	if p.IsContract() {
		return p.Address.String() + "." + p.ContractName
	}
	return p.Address.String()
}

// Contract name limits from Clarity (CONTRACT_MIN/MAX_NAME_LENGTH).
const (
	minContractNameLen = 1
	maxContractNameLen = 40
)

// ValidateContractName applies Clarity's rule: a letter, then letters, digits,
// '-' or '_', 1 to 40 characters in all.
func ValidateContractName(name string) error {
	if len(name) < minContractNameLen || len(name) > maxContractNameLen {
		return fmt.Errorf("%w %q: length %d, must be %d to %d characters", ErrBadContractName, truncate(name), len(name), minContractNameLen, maxContractNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if i == 0 && !letter {
			return fmt.Errorf("%w %q: must start with a letter", ErrBadContractName, name)
		}
		if !letter && !(c >= '0' && c <= '9') && c != '-' && c != '_' {
			return fmt.Errorf("%w %q: character %q not allowed (letters, digits, '-' and '_' only)", ErrBadContractName, name, rune(c))
		}
	}
	return nil
}

// ParsePrincipal parses "ADDR" or "ADDR.contract-name" on any known network.
func ParsePrincipal(s string) (Principal, error) {
	addr, name, isContract := strings.Cut(s, ".")
	a, err := ParseAddress(addr)
	if err != nil {
		return Principal{}, err
	}
	if isContract {
		if err := ValidateContractName(name); err != nil {
			return Principal{}, err
		}
	}
	return Principal{Address: a, ContractName: name}, nil
}

// ParseTestnetPrincipal is ParsePrincipal restricted to testnet versions; a
// mainnet address yields an error wrapping ErrMainnetAddress.
func ParseTestnetPrincipal(s string) (Principal, error) {
	p, err := ParsePrincipal(s)
	if err != nil {
		return Principal{}, err
	}
	if p.Address.IsMainnet() {
		return Principal{}, fmt.Errorf("address %q: %w: use a testnet address (ST…)", truncate(s), ErrMainnetAddress)
	}
	return p, nil
}

// truncate keeps error messages bounded when echoing untrusted input.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
