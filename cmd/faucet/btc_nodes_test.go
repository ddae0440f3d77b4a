package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Two btcd nodes of one regtest chain, the second a peer of the first, and
// `faucet serve --btc-rpc-url <first>,<second>`: the first is stopped in
// the middle of a burst of BTC drips and a block is mined on the second.
// Every drip is answered 200, every recipient is paid exactly once, and the
// first node rejoins the rotation once it is back and caught up.
func TestServeBTCBurstAcrossANodeStop(t *testing.T) {
	t.Parallel() // waits on blocks and nodes more than it computes: overlaps the package's other waits
	if testing.Short() {
		t.Skip("runs two btcd nodes")
	}
	ctx := context.Background()
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	first := btcdtest.Start(t, key.Address().String())
	second := btcdtest.Start(t, key.Address().String(), btcdtest.WithArgs("--connect="+first.P2PAddr()))
	c1, c2 := first.Client(), second.Client()
	if _, err := c1.Generate(ctx, btcfaucet.CoinbaseMaturity+10); err != nil {
		t.Fatal(err)
	}
	start := int64(btcfaucet.CoinbaseMaturity + 10)
	eventually.True(t, 30*time.Second, "the second btcd syncs the first's chain", func() bool {
		h, err := c2.BlockCount(ctx)
		return err == nil && h == start
	})

	stx, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{stx.TestnetAddress(): faultKeyFunding}})
	_, urls := serveFrontEnds(t, dn, 1)
	keyFile := filepath.Join(t.TempDir(), "btc-key")
	if err := os.WriteFile(keyFile, []byte(key.WIF()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rpcURL := func(n *btcdtest.Node) string { return "http://" + n.User() + ":" + n.Password() + "@" + n.RPCAddr() }
	base, _ := serveInProcess(t, io.Discard, "--node-url", urls[0], "--key-file", writeKeys(t, stx),
		"--btc-rpc-url", rpcURL(first)+","+rpcURL(second), "--btc-key-file", keyFile, "--btc-network", "regtest",
		"--btc-limit-ip", "0", "--ip-allow", "127.0.0.1", "--log-level", "error")
	eventually.True(t, 30*time.Second, "the BTC faucet is ready", func() bool {
		return strings.Contains(get(t, base+"/metrics"), "\nfaucet_btc_ready 1\n")
	})

	const drips, parallel, stopAfter, mineAfter = 240, 16, 80, 160
	to := make([]string, drips)
	for i := range to {
		k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
		if err != nil {
			t.Fatal(err)
		}
		to[i] = k.Address().String()
	}
	answers := make([]timedAnswer, drips)
	var answered atomic.Int64
	var stoppedAt atomic.Pointer[time.Time]
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: parallel}}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range drips {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a := timedAnswer{start: time.Now()}
			defer func() {
				a.finish = time.Now()
				answers[i] = a
				switch answered.Add(1) {
				case stopAfter:
					now := time.Now()
					stoppedAt.Store(&now)
					if err := first.Stop(); err != nil {
						t.Errorf("stopping the first btcd: %v", err)
					}
				case mineAfter:
					if _, err := c2.Generate(ctx, 1); err != nil {
						t.Errorf("mining on the second btcd: %v", err)
					}
				}
			}()
			resp, err := hc.Post(base+"/extended/v3/faucets/btc", "application/json", strings.NewReader(`{"address":"`+to[i]+`"}`))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			a.code = resp.StatusCode
		})
	}
	wg.Wait()
	all, around := burstLatencies(t, answers, *stoppedAt.Load())
	t.Logf("%d BTC drips, the first of two btcd nodes stopped after %d answers: p50 %s, p99 %s; the %d in flight from 1 s before to 2 s after: p99 %s, max %s",
		drips, stopAfter, quantile(all, 0.5), quantile(all, 0.99), len(around), quantile(around, 0.99), quantile(around, 1))

	// Mine on the second node until nothing is in flight: every recipient's
	// script then holds exactly one output of the drip amount.
	eventually.True(t, 60*time.Second, "every payout is mined", func() bool {
		if _, err := c2.Generate(ctx, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		return inFlightZero.MatchString(get(t, base+"/metrics"))
	})
	received := receivedByScript(t, c2, start)
	for i, addr := range to {
		a, err := bitcoin.ParseAddress(addr, bitcoin.Regtest)
		if err != nil {
			t.Fatal(err)
		}
		if got := received[hex.EncodeToString(a.PkScript())]; len(got) != 1 || got[0] != btcfaucet.DefaultAmount {
			t.Errorf("recipient %d: outputs %v, want one of %d sats", i, got, btcfaucet.DefaultAmount)
		}
	}

	// Back up, the first node syncs from its peer and rejoins.
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 90*time.Second, "the first btcd rejoins the rotation", func() bool {
		nodes := btcNodes(t, base)
		return len(nodes) == 2 && nodes[0].State == "ready" && nodes[1].State == "ready"
	})
	nodes := btcNodes(t, base)
	if nodes[0].Broadcasts.Accepted == 0 || nodes[1].Broadcasts.Accepted == 0 || strings.Contains(nodes[0].URL, first.Password()) {
		t.Errorf("btc_nodes in /faucet/v1/info: %+v", nodes)
	}
}

var inFlightZero = regexp.MustCompile(`(?m)^faucet_btc_payouts_in_flight\{[^}]*\} 0$`)

type btcNodeInfo struct {
	URL        string `json:"url"`
	State      string `json:"state"`
	Broadcasts struct {
		Accepted uint64 `json:"accepted"`
	} `json:"broadcasts"`
}

// btcNodes reads btc_nodes from /faucet/v1/info.
func btcNodes(t *testing.T, base string) []btcNodeInfo {
	t.Helper()
	var info struct {
		BTCNodes []btcNodeInfo `json:"btc_nodes"`
	}
	if err := json.Unmarshal([]byte(get(t, base+"/faucet/v1/info")), &info); err != nil {
		t.Fatal(err)
	}
	return info.BTCNodes
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test against a local server
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
