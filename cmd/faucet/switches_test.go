package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
)

// `faucet serve --switches-file`, as the operator runs it: the faucet
// starts with a file naming an asset it does not drip (a warning, not a
// refusal to start), then follows the file as it is replaced: STX off,
// then on, without a restart.
func TestServeFollowsTheSwitchesFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "switches.json")
	write := func(s string) {
		t.Helper()
		tmp := file + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"suspendedAssets":["doge"]}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	logs := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--devnet", "--devnet-btc=false", "--listen", "127.0.0.1:0", "--block-time", "100ms",
			"--log-format", "text", "--switches-file", file}, pw, io.Discard)
		pw.Close()
	}()
	curlRE := regexp.MustCompile(`curl -sX POST '(http://127\.0\.0\.1:\d+/extended/v1/faucets/stx\?address=ST[0-9A-Z]+)'`)
	var dripURL string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		logs.add(sc.Text())
		if m := curlRE.FindStringSubmatch(sc.Text()); m != nil {
			dripURL = m[1]
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if dripURL == "" {
		t.Fatalf("no drip URL in the banner:\n%s", logs.String())
	}
	status := func() int {
		resp, err := http.Post(dripURL, "", nil)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// One address, a limit of 5 per 5 min: a refused drip is not charged.
	write(`{"disabledAssets":["stx"]}`)
	if err := eventually.Wait(t, 10*time.Second, func() bool { return status() == http.StatusForbidden }); err != nil {
		t.Fatalf("STX still on after the file turned it off: %v", err)
	}
	write(`{}`)
	if err := eventually.Wait(t, 10*time.Second, func() bool { return status() == http.StatusOK }); err != nil {
		t.Fatalf("STX still off after the file turned it on: %v", err)
	}
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
