package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func writeKeys(t *testing.T, keys ...*stacks.PrivateKey) string {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k.Hex() + "\n")
	}
	p := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServeTreasuryFlagErrors(t *testing.T) {
	k1, _ := stacks.GeneratePrivateKey()
	k2, _ := stacks.GeneratePrivateKey()
	distributors := writeKeys(t, k1)
	sameAsDistributor := writeKeys(t, k1)
	two := writeKeys(t, k1, k2)
	real := []string{"--node-url", "http://127.0.0.1:1", "--key-file", distributors, "--store", "memory"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--devnet", "--devnet-treasury", "--refill-below", "1000", "--refill-amount", "999"}, "--refill-amount"},
		{[]string{"--devnet", "--refill-below", "1000"}, "need a treasury"},
		{[]string{"--devnet", "--treasury-key-file", two}, "--treasury-key-file"},
		{append(real, "--devnet-treasury"), "--devnet-treasury needs --devnet"},
		{append(real, "--treasury-key-file", two), "exactly one key"},
		{append(real, "--treasury-key-file", filepath.Join(t.TempDir(), "missing")), "--treasury-key-file"},
		{append(real, "--treasury-key-file", sameAsDistributor), "also a distributor key"},
	} {
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--log-level", "error", "--log-format", "text"}, c.args...)
		err := run(context.Background(), clock.RealClock{}, args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// `serve --devnet --devnet-treasury`: the faucet keys start near the refill
// threshold, and after a few drips the treasury refills them.
func TestServeDevnetTreasuryRefills(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, clock.RealClock{}, []string{"serve", "--devnet", "--devnet-treasury", "--devnet-keys", "1", "--listen", "127.0.0.1:0",
			"--block-time", "50ms", "--amount", "1000000", "--refill-below", "3000000", "--refill-amount", "5000000",
			"--limit-ip", "0", "--log-level", "error", "--log-format", "text"}, pw, io.Discard)
		pw.Close()
	}()
	dripRE := regexp.MustCompile(`curl -sX POST '(http://127\.0\.0\.1:\d+/extended/v1/faucets/stx)\?address=`)
	nodeRE := regexp.MustCompile(`node RPC:\s+(http://127\.0\.0\.1:\d+)`)
	treasuryRE := regexp.MustCompile(`treasury:\s+(ST[0-9A-Z]+) \(refills a faucet key below 3000000 µSTX with 5000000 µSTX\)`)
	var dripURL, nodeURL, treasury string
	sc := bufio.NewScanner(pr)
	for sc.Scan() && treasury == "" {
		line := sc.Text()
		if m := dripRE.FindStringSubmatch(line); m != nil {
			dripURL = m[1]
		}
		if m := nodeRE.FindStringSubmatch(line); m != nil {
			nodeURL = m[1]
		}
		if m := treasuryRE.FindStringSubmatch(line); m != nil {
			treasury = m[1]
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if dripURL == "" || nodeURL == "" || treasury == "" {
		t.Fatalf("banner incomplete: drip %q node %q treasury %q", dripURL, nodeURL, treasury)
	}
	treasuryNonce := func() uint64 {
		resp, err := http.Get(nodeURL + "/v2/accounts/" + treasury + "?proof=0")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var acct struct {
			Nonce uint64 `json:"nonce"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&acct); err != nil {
			t.Fatal(err)
		}
		return acct.Nonce
	}
	if n := treasuryNonce(); n != 0 {
		t.Fatalf("treasury nonce %d before any drip", n)
	}
	// The key holds the threshold plus ten drips: eleven drips take it below.
	for i := range 11 {
		k, _ := stacks.GeneratePrivateKey()
		resp, err := http.Post(dripURL+"?address="+k.TestnetAddress().String(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("drip %d: %d %s", i, resp.StatusCode, body)
		}
	}
	eventually.True(t, 10*time.Second, "the treasury sends a refill", func() bool { return treasuryNonce() != 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
}
