package main

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/options"
)

func TestParseWithEnv(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	url := fs.String("node-url", "", "")
	amount := fs.Uint64("amount", 1, "")
	hops := fs.Int("trusted-proxy-hops", 0, "")
	t.Setenv("FAUCET_NODE_URL", "http://env:20443")
	t.Setenv("FAUCET_AMOUNT", "42")
	t.Setenv("FAUCET_TRUSTED_PROXY_HOPS", "2")
	if err := parseWithEnv(fs, []string{"--amount", "7"}); err != nil {
		t.Fatal(err)
	}
	if *url != "http://env:20443" || *amount != 7 || *hops != 2 {
		t.Fatalf("url=%q amount=%d hops=%d: env must fill unset flags and flags must win", *url, *amount, *hops)
	}
	t.Setenv("FAUCET_AMOUNT", "lots")
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.Uint64("amount", 1, "")
	if err := parseWithEnv(fs2, nil); err == nil || !strings.Contains(err.Error(), "FAUCET_AMOUNT") {
		t.Fatalf("bad env value: %v", err)
	}
	fs3 := flag.NewFlagSet("t", flag.ContinueOnError)
	if err := parseWithEnv(fs3, []string{"stray"}); err == nil {
		t.Fatal("stray argument accepted")
	}
}

// The N/window flags: every limit flag of serve takes a count and a
// window, or 0 to disable.
func TestLimitValue(t *testing.T) {
	o := options.Defaults()
	fs := newServeFlags(&o)
	for in, want := range map[string]guard.Limit{
		"5/5m":  {Requests: 5, Window: 5 * time.Minute},
		"1/48h": {Requests: 1, Window: 48 * time.Hour},
		"0":     {},
	} {
		if err := fs.Set("limit-address", in); err != nil || o.Limits.Address != want {
			t.Errorf("%q → %+v %v", in, o.Limits.Address, err)
		}
		if got := fs.Lookup("limit-address").Value.String(); got != options.LimitString(want) {
			t.Errorf("%q reads back as %q", in, got)
		}
	}
	for _, bad := range []string{"5", "x/5m", "0/5m", "-1/5m", "5/0s", "5/soon"} {
		if err := fs.Set("limit-address", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if n := fs.Lookup("limit-ip").Value.(interface{ ArgName() string }).ArgName(); n != "N/window" {
		t.Errorf("-h shows --limit-ip %s", n)
	}
}

func TestFundList(t *testing.T) {
	f := fundList{}
	k, _ := stacks.GeneratePrivateKey()
	if err := f.Set(k.TestnetAddress().String() + "=1000"); err != nil || f[k.TestnetAddress()] != 1000 {
		t.Fatalf("%v %v", f, err)
	}
	for _, bad := range []string{"nope", "SP2J6ZY48GV1EZ5V2V5RB9MP66SW86PYKKNRV9EJ7=1", k.TestnetAddress().String() + "=-1"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestKeysGenerate(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), clock.RealClock{}, []string{"keys", "generate", "-n", "3"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("got %d lines", len(lines))
	}
	for _, l := range lines {
		hexKey, addr, _ := strings.Cut(l, " ")
		k, err := stacks.ParsePrivateKey(hexKey)
		if err != nil || !k.Compressed() || k.TestnetAddress().String() != addr {
			t.Fatalf("line %q: %v", l, err)
		}
	}
}

func TestServeRequiresNodeAndKeys(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), clock.RealClock{}, []string{"serve", "--log-format", "text"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--node-url and --key-file are required") {
		t.Fatalf("err = %v", err)
	}
}
