package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Issue #11's "done when", as the commands run it: `faucet devnet
// --block-time 10s` and `faucet serve --batch-max 200` with ONE key answer
// 500 concurrent drips with 200, and the devnet mines all of them within
// two blocks.
func TestDevnetServeBatchOf500(t *testing.T) {
	t.Parallel() // waits on blocks and nodes more than it computes: overlaps the package's other waits
	if testing.Short() {
		t.Skip("runs two 10 s blocks")
	}
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key.Hex()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	pr, pw := io.Pipe()
	wg.Go(func() {
		if err := runDevnet(ctx, clock.RealClock{}, []string{"--listen", "127.0.0.1:0", "--block-time", "10s", "--log-level", "error",
			"--fund-key-file", keyFile}, pw); err != nil {
			t.Errorf("devnet: %v", err)
		}
		pw.Close()
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("devnet did not start: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	_, rest, _ := strings.Cut(line, "RPC at ")
	nodeURL, _, _ := strings.Cut(rest, " ")
	client, err := node.New(nodeURL)
	if err != nil {
		t.Fatal(err)
	}

	listen := freeAddr(t)
	wg.Go(func() {
		if err := run(ctx, clock.RealClock{}, []string{"serve", "--node-url", nodeURL, "--key-file", keyFile, "--batch-max", "200",
			"--store", "memory", "--listen", listen, "--log-level", "error",
			// All 500 drips come from this machine: exempt it from the per-IP limit.
			"--ip-allow", "127.0.0.1"}, io.Discard, io.Discard); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	faucetURL := "http://" + listen
	waitReady(t, faucetURL)

	info, err := client.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	startHeight := info.StacksTipHeight
	const drips = 500
	txids := make([]string, drips)
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: drips}}
	var load sync.WaitGroup
	for i := range drips {
		to, err := stacks.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		load.Go(func() {
			resp, err := hc.Post(faucetURL+"/extended/v1/faucets/stx?address="+to.TestnetAddress().String(), "", nil)
			if err != nil {
				t.Errorf("drip %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			var body struct {
				Success bool   `json:"success"`
				TxID    string `json:"txId"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK || !body.Success {
				t.Errorf("drip %d: %d %+v %v", i, resp.StatusCode, body, err)
				return
			}
			txids[i] = body.TxID
		})
	}
	load.Wait()
	if t.Failed() {
		t.FailNow()
	}
	unique := map[string]bool{}
	for _, id := range txids {
		unique[id] = true
	}
	t.Logf("500 drips answered 200 by %d send-many transactions", len(unique))

	// Every transaction mined, successfully, within two blocks of the start.
	for id := range unique {
		var mined *node.MinedTx
		var err error
		if werr := eventually.WaitEvery(t, 45*time.Second, 200*time.Millisecond, func() bool {
			mined, err = client.Transaction(ctx, id)
			return err == nil
		}); werr != nil {
			t.Fatalf("tx %s not mined (%v): %v", id, werr, err)
		}
		if !mined.IsOK() || mined.BlockHeight == nil || *mined.BlockHeight > startHeight+2 {
			t.Fatalf("tx %s: %s at height %v (start %d)", id, mined.Result, mined.BlockHeight, startHeight)
		}
	}
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// waitReady polls /readyz (the faucet's readiness) until it answers 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	eventually.True(t, 20*time.Second, "the faucet at "+base+" becomes ready", func() bool { return ready(base) })
}

// ready reports whether base's /readyz answers 200.
func ready(base string) bool {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
