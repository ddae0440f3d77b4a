package bitcoin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/base58"
	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
)

// The kinds of address refusal; every ParseAddress error is an
// *AddressError wrapping exactly one of these (or ErrMainnet, or
// ErrUnknownNetwork for a bad network argument).
var (
	ErrNotAddress         = errors.New("not a bitcoin address")
	ErrBadChecksum        = errors.New("bitcoin address checksum does not match")
	ErrWrongNetwork       = errors.New("address of another bitcoin test network")
	ErrUnsupportedAddress = errors.New("unsupported bitcoin address type")
)

// AddressError is a refusal of an address, with a message meant for the
// person who typed it. Kind is one of the sentinels above or ErrMainnet.
type AddressError struct {
	Kind error
	msg  string
}

func (e *AddressError) Error() string { return e.msg }
func (e *AddressError) Unwrap() error { return e.Kind }

func addrErr(kind error, format string, args ...any) error {
	return &AddressError{Kind: kind, msg: fmt.Sprintf(format, args...)}
}

// AddressType is the kind of output an address pays to.
type AddressType uint8

// The address types the faucet pays to.
const (
	P2PKH AddressType = iota + 1
	P2SH
	P2WPKH
	P2WSH
	P2TR
)

func (t AddressType) String() string {
	switch t {
	case P2PKH:
		return "p2pkh"
	case P2SH:
		return "p2sh"
	case P2WPKH:
		return "p2wpkh"
	case P2WSH:
		return "p2wsh"
	case P2TR:
		return "p2tr"
	default:
		return fmt.Sprintf("AddressType(%d)", uint8(t))
	}
}

// Address is a parsed, network-checked address. It is comparable (usable as
// a map key); the zero value is no address.
type Address struct {
	s      string // canonical form: bech32 lower-cased
	script string // the output script, kept as a string so Address stays comparable
	typ    AddressType
	net    Network
}

// String is the canonical encoding (bech32 addresses in lower case).
func (a Address) String() string { return a.s }

// PkScript is the output script paying to the address (a fresh copy).
func (a Address) PkScript() []byte { return []byte(a.script) }

// Type is the address's output type.
func (a Address) Type() AddressType { return a.typ }

// Network is the network the address was parsed for. Base58 addresses are
// valid on every test network; this is the one the caller asked about.
func (a Address) Network() Network { return a.net }

// IsZero reports whether a is the zero Address.
func (a Address) IsZero() bool { return a.s == "" }

// MarshalText writes the canonical string, so an Address prints as itself
// in JSON.
func (a Address) MarshalText() ([]byte, error) { return []byte(a.s), nil }

// maxAddressLen is BIP-173's limit for a bech32 string; base58 addresses are
// at most 35 characters. Longer input is refused before any decoding.
const maxAddressLen = 90

var mainnetHRP = chaincfg.MainNetParams.Bech32HRPSegwit

// ParseAddress reads a P2PKH, P2SH, P2WPKH, P2WSH or P2TR address for net.
// Surrounding whitespace is ignored. On regtest the testnet/signet bech32
// form (tb1…) is accepted too: wallets on the Stacks testnet show that form,
// and it pays the same script; the address is returned in net's own form
// (bcrt1…), so both spellings are one recipient. Errors are *AddressError
// values that say why: not an address, which checksum failed, mainnet, a
// regtest address on signet or testnet, or an unsupported type.
func ParseAddress(s string, net Network) (Address, error) {
	params, err := net.params()
	if err != nil {
		return Address{}, err
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Address{}, addrErr(ErrNotAddress, "not a bitcoin address: empty")
	case len(s) > maxAddressLen:
		return Address{}, addrErr(ErrNotAddress, "not a bitcoin address: %d characters is longer than any address", len(s))
	}
	var typ AddressType
	if hrp, ok := segwitHRP(s); ok {
		typ, err = checkSegwit(s, hrp, net)
		s = strings.ToLower(s)
		if err == nil && hrp != params.Bech32HRPSegwit {
			// A tb1… address on regtest (checkSegwit allows no other
			// crossing): decode it as written, re-encode it for net.
			s, err = reencodeSegwit(s, params.Bech32HRPSegwit)
		}
	} else {
		typ, err = checkBase58(s, net)
	}
	if err != nil {
		return Address{}, err
	}
	// The checks above only classify; btcutil builds the address, so
	// nothing is accepted that btcd's own decoder would refuse.
	a, err := btcutil.DecodeAddress(s, params)
	if err != nil {
		return Address{}, &AddressError{Kind: ErrNotAddress, msg: "not a bitcoin address: " + err.Error()}
	}
	if !a.IsForNet(params) {
		return Address{}, addrErr(ErrWrongNetwork, "address is not for %s", net)
	}
	script, err := txscript.PayToAddrScript(a)
	if err != nil {
		return Address{}, &AddressError{Kind: ErrUnsupportedAddress, msg: "unsupported bitcoin address type: " + err.Error()}
	}
	return Address{s: a.EncodeAddress(), script: string(script), typ: typ, net: net}, nil
}

// segwitHRP returns the lower-cased human-readable part if s starts like a
// segwit address of a Bitcoin network we know (mainnet included, so that
// it can be refused by name).
func segwitHRP(s string) (string, bool) {
	i := strings.LastIndexByte(s, '1')
	if i < 1 {
		return "", false
	}
	hrp := strings.ToLower(s[:i])
	switch hrp {
	case mainnetHRP, chaincfg.TestNet3Params.Bech32HRPSegwit, chaincfg.RegressionNetParams.Bech32HRPSegwit:
		return hrp, true
	}
	return "", false
}

// checkSegwit classifies a bech32/bech32m string under a known prefix by
// BIP-173/BIP-350's rules, decoding with btcutil's bech32 package.
func checkSegwit(s, hrp string, net Network) (AddressType, error) {
	_, data, variant, err := bech32.DecodeGeneric(s)
	if err != nil {
		var cksum bech32.ErrInvalidChecksum
		var mixed bech32.ErrMixedCase
		switch {
		case errors.As(err, &cksum):
			return 0, addrErr(ErrBadChecksum, "bitcoin address checksum does not match: the bech32 checksum is wrong (a typo?)")
		case errors.As(err, &mixed):
			return 0, addrErr(ErrNotAddress, "not a bitcoin address: bech32 mixes upper and lower case")
		default:
			return 0, addrErr(ErrNotAddress, "not a bitcoin address: bech32: %v", err)
		}
	}
	if len(data) == 0 {
		return 0, addrErr(ErrNotAddress, "not a bitcoin address: no witness version")
	}
	version := data[0]
	if version > 16 {
		return 0, addrErr(ErrNotAddress, "not a bitcoin address: witness version %d is above 16", version)
	}
	program, err := bech32.ConvertBits(data[1:], 5, 8, false)
	if err != nil {
		return 0, addrErr(ErrNotAddress, "not a bitcoin address: witness program: %v", err)
	}
	if len(program) < 2 || len(program) > 40 {
		return 0, addrErr(ErrNotAddress, "not a bitcoin address: witness program of %d bytes (2 to 40 allowed)", len(program))
	}
	if version == 0 && len(program) != 20 && len(program) != 32 {
		return 0, addrErr(ErrNotAddress, "not a bitcoin address: witness v0 program of %d bytes (20 or 32 allowed)", len(program))
	}
	// BIP-350: v0 keeps BIP-173's bech32 checksum, v1 and later use bech32m.
	if version == 0 && variant != bech32.Version0 {
		return 0, addrErr(ErrBadChecksum, "bitcoin address checksum does not match: a witness v0 address needs a bech32 checksum, this one is bech32m")
	}
	if version != 0 && variant != bech32.VersionM {
		return 0, addrErr(ErrBadChecksum, "bitcoin address checksum does not match: a witness v%d address needs a bech32m checksum, this one is bech32", version)
	}
	if err := checkSegwitNetwork(hrp, net); err != nil {
		return 0, err
	}
	switch {
	case version == 0 && len(program) == 20:
		return P2WPKH, nil
	case version == 0:
		return P2WSH, nil
	case version == 1 && len(program) == 32:
		return P2TR, nil
	default:
		return 0, addrErr(ErrUnsupportedAddress, "unsupported bitcoin address type: witness v%d with a %d-byte program; use a P2WPKH, P2WSH, P2TR, P2PKH or P2SH address", version, len(program))
	}
}

// reencodeSegwit writes a checked segwit address under another
// human-readable part, keeping its witness version, program and checksum
// variant.
func reencodeSegwit(s, hrp string) (string, error) {
	_, data, variant, err := bech32.DecodeGeneric(s)
	if err != nil {
		return "", addrErr(ErrNotAddress, "not a bitcoin address: bech32: %v", err)
	}
	var out string
	if variant == bech32.VersionM {
		out, err = bech32.EncodeM(hrp, data)
	} else {
		out, err = bech32.Encode(hrp, data)
	}
	if err != nil {
		return "", addrErr(ErrNotAddress, "not a bitcoin address: bech32: %v", err)
	}
	return out, nil
}

func checkSegwitNetwork(hrp string, net Network) error {
	want := net.ChainParams().Bech32HRPSegwit
	switch {
	case hrp == want:
		return nil
	case net == Regtest && hrp == chaincfg.TestNet3Params.Bech32HRPSegwit:
		// Regtest pays the same scripts; only the spelling differs.
		return nil
	case hrp == mainnetHRP:
		return &AddressError{Kind: ErrMainnet, msg: fmt.Sprintf(
			"bc1… is a mainnet address; this faucet sends %s BTC: use a %s address", net, net.addressHint())}
	default:
		other := "testnet or signet"
		if hrp == chaincfg.RegressionNetParams.Bech32HRPSegwit {
			other = "regtest"
		}
		return addrErr(ErrWrongNetwork, "%s1… is a %s address; this faucet sends %s BTC: use a %s address", hrp, other, net, net.addressHint())
	}
}

// checkBase58 classifies a base58check string by its version byte. Regtest,
// signet and testnet share the test versions, so any test network's P2PKH or
// P2SH address is accepted on all three.
func checkBase58(s string, net Network) (AddressType, error) {
	payload, version, err := base58.CheckDecode(s)
	switch {
	case errors.Is(err, base58.ErrChecksum):
		return 0, addrErr(ErrBadChecksum, "bitcoin address checksum does not match: the base58check checksum is wrong (a typo?)")
	case err != nil:
		if _, _, _, bechErr := bech32.DecodeGeneric(s); bechErr == nil {
			return 0, addrErr(ErrNotAddress, "not a bitcoin address: bech32 prefix %q is no Bitcoin network's", s[:strings.LastIndexByte(s, '1')])
		}
		return 0, addrErr(ErrNotAddress, "not a bitcoin address: neither base58check nor bech32")
	case len(payload) != 20:
		return 0, addrErr(ErrNotAddress, "not a bitcoin address: base58check payload of %d bytes, want 20", len(payload))
	}
	main, test := &chaincfg.MainNetParams, net.ChainParams()
	switch version {
	case test.PubKeyHashAddrID:
		return P2PKH, nil
	case test.ScriptHashAddrID:
		return P2SH, nil
	case main.PubKeyHashAddrID, main.ScriptHashAddrID:
		first := "1"
		if version == main.ScriptHashAddrID {
			first = "3"
		}
		return 0, &AddressError{Kind: ErrMainnet, msg: fmt.Sprintf(
			"%s… is a mainnet address; this faucet sends %s BTC: use a %s address", first, net, net.addressHint())}
	default:
		return 0, addrErr(ErrNotAddress, "not a bitcoin address: base58check version byte 0x%02x", version)
	}
}
