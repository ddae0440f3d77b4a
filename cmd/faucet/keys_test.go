package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
)

func TestKeysGenerateBTC(t *testing.T) {
	for _, c := range []struct {
		args   []string
		net    bitcoin.Network
		prefix string
	}{
		{[]string{"--btc"}, bitcoin.Regtest, "bcrt1q"},
		{[]string{"--btc", "--btc-network", "regtest", "-n", "3"}, bitcoin.Regtest, "bcrt1q"},
		{[]string{"-btc", "-btc-network=signet", "-n", "2"}, bitcoin.Signet, "tb1q"},
		{[]string{"--btc", "--btc-network", "testnet"}, bitcoin.Testnet, "tb1q"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), clock.RealClock{}, append([]string{"keys", "generate"}, c.args...), &out, &out); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		want := 1
		if i := indexOf(c.args, "-n"); i >= 0 {
			want = int(c.args[i+1][0] - '0')
		}
		if len(lines) != want {
			t.Fatalf("%v: %d lines", c.args, len(lines))
		}
		seen := map[string]bool{}
		for _, l := range lines {
			wif, addr, ok := strings.Cut(l, " ")
			if !ok || !strings.HasPrefix(addr, c.prefix) || !strings.HasPrefix(wif, "c") || seen[wif] {
				t.Fatalf("%v: line %q", c.args, l)
			}
			seen[wif] = true
			// What the future --btc-key-file holds: ParsePrivateKey reads it
			// back to the same address, and the address parses for the network.
			k, err := bitcoin.ParsePrivateKey(wif, c.net)
			if err != nil || k.Address().String() != addr {
				t.Fatalf("%v: line %q: %v", c.args, l, err)
			}
			if a, err := bitcoin.ParseAddress(addr, c.net); err != nil || a.Type() != bitcoin.P2WPKH {
				t.Fatalf("%v: address %q: %v", c.args, addr, err)
			}
		}
	}
}

func TestKeysGenerateBTCJSON(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), clock.RealClock{}, []string{"keys", "generate", "--btc", "--btc-network", "signet", "-n", "2", "-json"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		PrivateKey string `json:"privateKey"`
		Address    string `json:"address"`
	}
	if err := json.Unmarshal(out.Bytes(), &entries); err != nil || len(entries) != 2 {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, e := range entries {
		k, err := bitcoin.ParsePrivateKey(e.PrivateKey, bitcoin.Signet)
		if err != nil || k.Address().String() != e.Address || !strings.HasPrefix(e.Address, "tb1q") {
			t.Fatalf("%+v: %v", e.Address, err)
		}
	}
}

func TestKeysGenerateBTCRefusals(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--btc", "--btc-network", "mainnet"}, "mainnet"},
		{[]string{"--btc", "--btc-network", "testnet4"}, "testnet4"},
		{[]string{"--btc-network", "signet"}, "add --btc"},
		{[]string{"--btc", "-n", "0"}, "between 1 and 1000"},
		{[]string{"--btc", "extra"}, "unexpected argument"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), clock.RealClock{}, append([]string{"keys", "generate"}, c.args...), &out, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) || out.Len() != 0 {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
