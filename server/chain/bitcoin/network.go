package bitcoin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/chaincfg"
)

// Network is a Bitcoin test network the faucet can pay on. The zero value is
// no network and is refused by everything that takes one.
type Network uint8

// The networks the faucet serves. btcd v0.24's chaincfg has no testnet4
// parameters, so testnet4 is not offered.
const (
	Regtest Network = iota + 1
	Signet
	Testnet // testnet3
)

var (
	// ErrMainnet is wrapped by every refusal of mainnet: as a network name,
	// an address or a private key.
	ErrMainnet = errors.New("mainnet is not supported: this faucet pays test-network BTC only")
	// ErrUnknownNetwork is wrapped when a network name is not one we serve.
	ErrUnknownNetwork = errors.New("unknown bitcoin network")
)

// ParseNetwork reads a network name: regtest, signet, or testnet (also
// testnet3). Mainnet names are refused with ErrMainnet.
func ParseNetwork(s string) (Network, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "regtest":
		return Regtest, nil
	case "signet":
		return Signet, nil
	case "testnet", "testnet3":
		return Testnet, nil
	case "mainnet", "main", "bitcoin":
		return 0, fmt.Errorf("network %q: %w", s, ErrMainnet)
	case "testnet4":
		return 0, fmt.Errorf("%w %q: testnet4 is not supported (btcd's chain parameters lack it); use regtest, signet or testnet", ErrUnknownNetwork, s)
	default:
		return 0, fmt.Errorf("%w %q: want regtest, signet or testnet", ErrUnknownNetwork, s)
	}
}

// String is the name ParseNetwork reads back.
func (n Network) String() string {
	switch n {
	case Regtest:
		return "regtest"
	case Signet:
		return "signet"
	case Testnet:
		return "testnet"
	default:
		return fmt.Sprintf("Network(%d)", uint8(n))
	}
}

// Valid reports whether n is one of the networks above.
func (n Network) Valid() bool { return n >= Regtest && n <= Testnet }

// MarshalText writes the network's name.
func (n Network) MarshalText() ([]byte, error) {
	if !n.Valid() {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNetwork, n)
	}
	return []byte(n.String()), nil
}

// UnmarshalText reads a name as ParseNetwork does, so a Network can be a
// flag (flag.TextVar) or a config field.
func (n *Network) UnmarshalText(b []byte) error {
	v, err := ParseNetwork(string(b))
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// ChainParams returns btcd's parameters for the network, or nil for an
// invalid one. They are shared globals: read them, never modify them.
func (n Network) ChainParams() *chaincfg.Params {
	switch n {
	case Regtest:
		return &chaincfg.RegressionNetParams
	case Signet:
		return &chaincfg.SigNetParams
	case Testnet:
		return &chaincfg.TestNet3Params
	default:
		return nil
	}
}

// params is ChainParams with an error for an invalid network.
func (n Network) params() (*chaincfg.Params, error) {
	if p := n.ChainParams(); p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownNetwork, n)
}

// addressHint names the address forms a user of this network should paste.
func (n Network) addressHint() string {
	if n == Regtest {
		return "bcrt1…, tb1…, m…, n… or 2…"
	}
	return "tb1…, m…, n… or 2…"
}
