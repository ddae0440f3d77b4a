package bitcoin

import (
	"errors"
	"flag"
	"testing"
)

func TestParseNetwork(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Network
	}{{"regtest", Regtest}, {"Regtest", Regtest}, {" signet\n", Signet}, {"testnet", Testnet}, {"testnet3", Testnet}} {
		in, want := c.in, c.want
		got, err := ParseNetwork(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
		if back, err := ParseNetwork(got.String()); err != nil || back != got {
			t.Errorf("%v does not round-trip: %v", got, err)
		}
	}
	for _, in := range []string{"mainnet", "main", "MAINNET", "bitcoin"} {
		if _, err := ParseNetwork(in); !errors.Is(err, ErrMainnet) {
			t.Errorf("%q: %v, want ErrMainnet", in, err)
		}
	}
	for _, in := range []string{"", "testnet4", "simnet", "regtest2"} {
		if _, err := ParseNetwork(in); !errors.Is(err, ErrUnknownNetwork) {
			t.Errorf("%q: %v, want ErrUnknownNetwork", in, err)
		}
	}
}

func TestNetworkParams(t *testing.T) {
	for n, name := range map[Network]string{Regtest: "regtest", Signet: "signet", Testnet: "testnet3"} {
		if p := n.ChainParams(); p == nil || p.Name != name {
			t.Errorf("%v: params %v", n, p)
		}
	}
	var zero Network
	if zero.Valid() || zero.ChainParams() != nil || Network(9).Valid() {
		t.Error("invalid networks must have no params")
	}
	if _, err := zero.MarshalText(); !errors.Is(err, ErrUnknownNetwork) {
		t.Errorf("zero MarshalText: %v", err)
	}
}

func TestNetworkAsFlag(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var n Network
	fs.TextVar(&n, "net", Regtest, "")
	if err := fs.Parse([]string{"-net", "signet"}); err != nil || n != Signet {
		t.Fatalf("%v %v", n, err)
	}
	fs.SetOutput(discard{})
	if err := fs.Parse([]string{"-net", "mainnet"}); err == nil {
		t.Fatal("mainnet accepted as a flag")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
