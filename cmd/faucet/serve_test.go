package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// `serve --devnet` prints the faucet and node addresses and a working curl
// command, serves a drip end to end, and shuts down with its context.
func TestServeDevnet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, clock.RealClock{}, []string{"serve", "--devnet", "--listen", "127.0.0.1:0", "--block-time", "100ms",
			"--log-level", "error", "--log-format", "text"}, pw, io.Discard)
		pw.Close()
	}()

	curlRE := regexp.MustCompile(`curl -sX POST '(http://127\.0\.0\.1:\d+/extended/v1/faucets/stx\?address=ST[0-9A-Z]+)'`)
	var dripURL, banner string
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		banner += line + "\n"
		if m := curlRE.FindStringSubmatch(line); m != nil {
			dripURL = m[1]
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if dripURL == "" {
		t.Fatalf("no curl command in the banner:\n%s", banner)
	}
	for _, want := range []string{"faucet addresses: ST", "node RPC:         http://127.0.0.1:"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}

	resp, err := http.Post(dripURL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Success bool   `json:"success"`
		TxID    string `json:"txId"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !body.Success || len(body.TxID) != 66 {
		t.Fatalf("drip: %d %+v %v", resp.StatusCode, body, err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop with its context")
	}
}

func TestServeRejectsNonPositiveTimeoutAndAmount(t *testing.T) {
	for _, args := range [][]string{
		{"--node-timeout", "0s"},
		{"--amount", "0"},
	} {
		args = append([]string{"serve", "--devnet", "--listen", "127.0.0.1:0", "--log-format", "text"}, args...)
		err := run(context.Background(), clock.RealClock{}, args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[len(args)-2]) {
			t.Errorf("%v: err = %v, want one naming %s", args, err, args[len(args)-2])
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stdout, stderr strings.Builder
	err := run(context.Background(), clock.RealClock{}, []string{"serve", "-h"}, &stdout, &stderr)
	if err != nil || report(io.Discard, err) != 0 {
		t.Fatalf("serve -h: %v, exit %d", err, report(io.Discard, err))
	}
	if !strings.Contains(stdout.String(), "--node-url") || stderr.Len() != 0 {
		t.Fatalf("serve -h: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if report(io.Discard, errors.New("boom")) != 1 {
		t.Fatal("a failure must exit 1")
	}
}
