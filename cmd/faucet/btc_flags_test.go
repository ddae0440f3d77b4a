package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// `faucet keys generate --btc` prints lines the key file accepts, and the
// key file refuses a key of another network or a mismatched address
// without ever quoting the key.
func TestBTCKeyFileRoundTrip(t *testing.T) {
	var out bytes.Buffer
	if err := runKeys(context.Background(), clock.RealClock{}, []string{"generate", "--btc", "--btc-network", "regtest", "-n", "2"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("keys generate printed %q", out.String())
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key, err := readBTCKeyFile(write("generated", "# the BTC faucet\n\n"+out.String()), bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	if got := key.WIF() + " " + key.Address().String(); got != lines[0] {
		t.Fatalf("read %q, want the first line %q", got, lines[0])
	}
	wif := strings.Fields(lines[0])[0]
	other := strings.Fields(lines[1])[1]
	for name, tc := range map[string]struct {
		body string
		net  bitcoin.Network
		want string
	}{
		"key only":      {body: wif + "\n", net: bitcoin.Regtest},
		"wrong address": {body: wif + " " + other + "\n", net: bitcoin.Regtest, want: "the address after the key is"},
		// Test networks share WIF's version byte; the address tells them apart.
		"another network": {body: lines[0] + "\n", net: bitcoin.Signet, want: "the address after the key is"},
		"empty":           {body: "# nothing\n", net: bitcoin.Regtest, want: "no key in it"},
		"garbage":         {body: "not-a-key\n", net: bitcoin.Regtest, want: "--btc-key-file"},
	} {
		_, err := readBTCKeyFile(write(name, tc.body), tc.net)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		case err != nil && strings.Contains(err.Error(), wif):
			t.Errorf("%s: the error quotes the key: %v", name, err)
		}
	}
}

// The BTC flags: on only with both the URL and the key file, never beside
// the devnet's own node, fee rates ordered, and mainnet refused by name.
func TestBTCFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		devnet bool
		want   string // "" = valid
	}{
		{name: "off"},
		{name: "on", args: []string{"--btc-rpc-url", "http://127.0.0.1:18443", "--btc-key-file", "k"}},
		{name: "url without key", args: []string{"--btc-rpc-url", "http://127.0.0.1:18443"}, want: "needs --btc-key-file"},
		{name: "key without url", args: []string{"--btc-key-file", "k"}, want: "needs --btc-rpc-url"},
		{name: "devnet with a node", args: []string{"--btc-rpc-url", "http://x:1", "--btc-key-file", "k"}, devnet: true, want: "--devnet runs its own btcd"},
		{name: "min above max", args: []string{"--btc-min-fee-rate", "10", "--btc-max-fee-rate", "5"}, want: "want 1 ≤ min ≤ max"},
		{name: "batch too big", args: []string{"--btc-batch-max", "501"}, want: "--btc-batch-max must be 1..500"},
		{name: "zero block time", args: []string{"--btc-block-time", "0s"}, devnet: true, want: "--btc-block-time must be positive"},
		{name: "zero block time without the devnet's btcd", args: []string{"--btc-block-time", "0s", "--devnet-btc=false"}, devnet: true},
	} {
		args := realNode(tc.args...)
		if tc.devnet {
			args = append([]string{"--devnet"}, tc.args...)
		}
		o, err := checkServe(t, args...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		case tc.want == "" && !tc.devnet && o.BTC.On() != (len(tc.args) > 0):
			t.Errorf("%s: BTC on = %v", tc.name, o.BTC.On())
		}
	}
	if _, err := checkServe(t, realNode("--btc-network", "mainnet")...); err == nil || !strings.Contains(err.Error(), "mainnet is not supported") ||
		!strings.Contains(err.Error(), "--btc-network") {
		t.Errorf("--btc-network mainnet: %v", err)
	}
	o, err := checkServe(t, realNode("--btc-network", "signet", "--btc-limit-address", "2/1h", "--btc-limit-ip", "0")...)
	if err != nil || o.BTC.Network != bitcoin.Signet {
		t.Fatalf("--btc-network signet: %v, %v", o.BTC.Network, err)
	}
	if got, want := o.RateLimits().Of("btc"), (guard.AssetLimits{PerAddress: guard.Limit{Requests: 2, Window: time.Hour}}); got != want {
		t.Errorf("BTC limits %+v, want %+v", got, want)
	}
}

// A BTC faucet whose node is on another network than its key does not
// start: the process exits with the reason instead of serving a faucet
// that can never pay.
func TestBTCServeRefusesAnotherNetwork(t *testing.T) {
	e := newBTCFaultEnv(t)
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Signet)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(e.dir, "signet-key")
	if err := os.WriteFile(keyFile, []byte(key.WIF()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"--store", "memory"}, e.args...), "--btc-key-file", keyFile, "--btc-network", "signet")
	p := e.serve("signet-on-regtest", args...)
	<-p.done
	if p.err == nil || !strings.Contains(p.logs.tail(1<<20), "the node runs regtest, the key is for signet") {
		t.Fatalf("exit %v; logs:\n%s", p.err, p.logs.tail(10))
	}
}
