package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// `serve` given a node that is down and one that answers, as two flags or
// as one comma-separated value, is ready and drips through the live one;
// /faucet/v1/info shows each node's state.
func TestServeSeveralNodes(t *testing.T) {
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{key.TestnetAddress(): 10_000_000_000}})
	live := serveTestNode(t, dn)
	closed := "http://" + freeAddr(t)
	keyFile := writeKeys(t, key)
	for _, c := range []struct {
		name  string
		nodes []string
	}{
		{"repeated", []string{"--node-url", closed, "--node-url", live}},
		{"comma-separated", []string{"--node-url", closed + "," + live}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, _ := serveInProcess(t, io.Discard, append([]string{"--key-file", keyFile, "--log-level", "error"}, c.nodes...)...)
			dripConfirmed(t, base, dn)
			var info struct {
				Nodes []struct {
					URL, State, Reason string
				} `json:"nodes"`
			}
			getJSON(t, base+"/faucet/v1/info", &info)
			if len(info.Nodes) != 2 || info.Nodes[0].URL != closed || info.Nodes[0].State != "out" || info.Nodes[0].Reason != "unreachable" ||
				info.Nodes[1].URL != live || info.Nodes[1].State != "ready" {
				t.Errorf("info nodes: %+v", info.Nodes)
			}
		})
	}
}

// Two front ends of one chain; the first stops, or hangs, after 300 of
// 1,000 concurrent drips have been answered. Every drip is answered 200
// and paid exactly once; the latencies around the fault are logged.
func TestServeBurstAcrossANodeStop(t *testing.T) {
	t.Parallel() // waits on blocks and nodes more than it computes: overlaps the package's other waits
	if testing.Short() {
		t.Skip("1,000 drips over blocks of 300 ms")
	}
	for _, fault := range []string{"stop", "hang"} {
		t.Run(fault, func(t *testing.T) { burstAcrossAFault(t, fault) })
	}
}

func burstAcrossAFault(t *testing.T, fault string) {
	keys := make([]*stacks.PrivateKey, 2)
	genesis := map[stacks.Address]uint64{}
	for i := range keys {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i], genesis[k.TestnetAddress()] = k, faultKeyFunding
	}
	dn := devnode.New(devnode.Config{Genesis: genesis, SendManyContract: stacks.SendManyMemoTestnet, BlockTime: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = dn.Run(ctx) }()
	fes, urls := serveFrontEnds(t, dn, 2)
	base, stop := serveInProcess(t, io.Discard, "--node-url", strings.Join(urls, ","), "--key-file", writeKeys(t, keys...),
		"--log-level", "error", "--ip-allow", "127.0.0.1", "--busy-wait", "20s")

	const drips, parallel, stopAfter = 1000, 64, 300
	to := newRecipients(t, drips)
	answers, txids := make([]timedAnswer, drips), make([]string, drips)
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
				if answered.Add(1) == stopAfter {
					now := time.Now()
					if fault == "stop" {
						fes[0].Stop()
					} else {
						fes[0].Hang(true)
					}
					stoppedAt.Store(&now)
				}
			}()
			resp, err := hc.Post(base+"/extended/v1/faucets/stx?address="+to[i].String(), "", nil)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			var body struct {
				TxID string `json:"txId"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			a.code, txids[i] = resp.StatusCode, body.TxID
		})
	}
	wg.Wait()

	all, around := burstLatencies(t, answers, *stoppedAt.Load())
	t.Logf("1,000 drips, one of two nodes made to %s after %d answers: p50 %s, p99 %s; the %d drips in flight from 1 s before to 2 s after: p99 %s, max %s",
		fault, stopAfter, quantile(all, 0.5), quantile(all, 0.99), len(around), quantile(around, 0.99), quantile(around, 1))

	// Every answered drip is mined, and each recipient was paid once.
	for i, id := range txids {
		txid, err := stacks.ParseTxID(id)
		if err != nil {
			t.Fatalf("drip %d: txid %q: %v", i, id, err)
		}
		if werr := eventually.Wait(t, 30*time.Second, func() bool { return dn.TxStatus(txid).State == devnode.TxConfirmed }); werr != nil {
			t.Fatalf("drip %d: %s not mined: %s", i, id, dn.TxStatus(txid).State)
		}
		if bal, _ := dn.Account(to[i].Address); bal != faucet.DefaultAmount {
			t.Errorf("recipient %d holds %d µSTX, want one drip of %d", i, bal, faucet.DefaultAmount)
		}
	}
	// A probe sees the fault within its interval and timeout.
	eventually.True(t, 10*time.Second, "info shows the faulty node out and the other ready", func() bool {
		var info struct {
			Nodes []struct{ State string } `json:"nodes"`
		}
		getJSON(t, base+"/faucet/v1/info", &info)
		return len(info.Nodes) == 2 && info.Nodes[0].State == "out" && info.Nodes[1].State == "ready"
	})
	fes[0].Hang(false) // let the server's shutdown end its requests
	stop()
}

// quantile is the q-quantile of ds (nearest rank).
// timedAnswer is one drip of a burst: its status, and when it was asked
// and answered.
type timedAnswer struct {
	code          int
	start, finish time.Time
}

// burstLatencies fails t, and stops it, on any answer but 200; it returns
// the latencies of every answer and of those in flight from 1 s before
// faultAt to 2 s after.
func burstLatencies(t *testing.T, answers []timedAnswer, faultAt time.Time) (all, around []time.Duration) {
	t.Helper()
	for i, a := range answers {
		if a.code != http.StatusOK {
			t.Errorf("drip %d: answered %d", i, a.code)
			continue
		}
		d := a.finish.Sub(a.start)
		all = append(all, d)
		if a.finish.After(faultAt.Add(-time.Second)) && a.start.Before(faultAt.Add(2*time.Second)) {
			around = append(around, d)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return all, around
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// The preferred node accepts every broadcast and relays none: the drips
// are mined within two blocks anyway, and the engine never repairs a
// stuck nonce.
func TestServeWithANodeThatDropsBroadcasts(t *testing.T) {
	t.Parallel() // waits on blocks and nodes more than it computes: overlaps the package's other waits
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{key.TestnetAddress(): faultKeyFunding},
		SendManyContract: stacks.SendManyMemoTestnet})
	fes, urls := serveFrontEnds(t, dn, 2)
	fes[0].DropBroadcasts(true)
	logs := &lockedBuffer{}
	base, stop := serveInProcess(t, logs, "--key-file", writeKeys(t, key), "--log-level", "warn", "--log-format", "text",
		"--ip-allow", "127.0.0.1", "--node-url", urls[0], "--node-url", urls[1])
	for round := range 3 {
		to := newRecipients(t, 20)
		txids := make([]string, len(to))
		var wg sync.WaitGroup
		for i := range to {
			wg.Go(func() {
				code, body := post(t, base+"/extended/v1/faucets/stx?address="+to[i].String(), "", "")
				var drip struct {
					TxID string `json:"txId"`
				}
				if json.Unmarshal([]byte(body), &drip) != nil || code != http.StatusOK {
					t.Errorf("round %d drip %d: %d %s", round, i, code, body)
				}
				txids[i] = drip.TxID
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		for range 2 {
			dn.Mine()
			time.Sleep(1200 * time.Millisecond) // the faucet polls the tip every second
		}
		for i, id := range txids {
			txid, err := stacks.ParseTxID(id)
			if err != nil {
				t.Fatal(err)
			}
			if st := dn.TxStatus(txid); st.State != devnode.TxConfirmed {
				t.Errorf("round %d drip %d: %s after two blocks", round, i, st.State)
			}
		}
	}
	if fes[0].Served(node.CallBroadcast) == 0 {
		t.Error("the dropping node was never sent a broadcast")
	}
	stop()
	for _, repair := range []string{"nonce stuck", "nonce still stuck", "filled nonce gap"} {
		if strings.Contains(logs.String(), repair) {
			t.Errorf("the engine repaired a nonce (%q):\n%s", repair, logs.String())
		}
	}
}

// The preferred node is held ten blocks behind: it serves no read of the
// faucet's but its probes, and the status endpoint's tip never goes back.
func TestServeWithANodeHeldBehind(t *testing.T) {
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{key.TestnetAddress(): faultKeyFunding},
		BlockTime: 100 * time.Millisecond})
	for range 12 {
		dn.Mine()
	}
	fes, urls := serveFrontEnds(t, dn, 2)
	fes[0].HoldBehind(10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = dn.Run(ctx) }()
	base, _ := serveInProcess(t, io.Discard, "--key-file", writeKeys(t, key), "--log-level", "error", "--ip-allow", "127.0.0.1",
		"--status-cache-ttl", "0s", "--node-url", strings.Join(urls, ","))
	var last uint64
	for i := range 40 {
		if i%4 == 0 {
			if code, body := post(t, base+"/extended/v1/faucets/stx?address="+newRecipients(t, 1)[0].String(), "", ""); code != http.StatusOK {
				t.Fatalf("drip: %d %s", code, body)
			}
		}
		var status struct {
			ChainTip struct {
				BlockHeight uint64 `json:"block_height"`
			} `json:"chain_tip"`
		}
		getJSON(t, base+"/extended/v1/status", &status)
		if h := status.ChainTip.BlockHeight; h < last || h < 12 {
			t.Fatalf("status read %d: tip %d after %d", i, h, last)
		}
		last = status.ChainTip.BlockHeight
		time.Sleep(20 * time.Millisecond)
	}
	for _, call := range []string{node.CallAccount, node.CallBroadcast, node.CallPoX, node.CallFeeTransfer, node.CallFeeTransaction, node.CallReadOnly} {
		if n := fes[0].Served(call); n != 0 {
			t.Errorf("the node held behind served %d %s calls", n, call)
		}
	}
	if fes[1].Served(node.CallAccount) == 0 || fes[1].Served(node.CallBroadcast) == 0 {
		t.Error("the node at the tip served no account read or broadcast")
	}
}

// serveInProcess runs `faucet serve` with args in this process, on a free
// port and with the memory store, until stop (or the test's end), and
// returns its base URL once it is ready. Its log goes to stderr.
func serveInProcess(t *testing.T, stderr io.Writer, args ...string) (base string, stop func()) {
	t.Helper()
	base, stop = startInProcess(t, stderr, args...)
	waitReady(t, base)
	return base, stop
}

// startInProcess is serveInProcess without waiting for the faucet to be
// ready.
func startInProcess(t *testing.T, stderr io.Writer, args ...string) (base string, stop func()) {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, clock.RealClock{}, append([]string{"serve", "--store", "memory", "--listen", addr}, args...), io.Discard, stderr)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Error("serve did not stop with its context")
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + addr, stop
}

// dripConfirmed asks the faucet at base for a STX drip, wants it answered
// 200, and mined in dn's next block.
func dripConfirmed(t *testing.T, base string, dn *devnode.Node) {
	t.Helper()
	code, body := post(t, base+"/extended/v1/faucets/stx?address="+newAddress(t), "", "")
	var drip struct {
		Success bool   `json:"success"`
		TxID    string `json:"txId"`
	}
	if err := json.Unmarshal([]byte(body), &drip); code != http.StatusOK || err != nil || !drip.Success {
		t.Fatalf("drip: %d %s", code, body)
	}
	txid, err := stacks.ParseTxID(drip.TxID)
	if err != nil {
		t.Fatal(err)
	}
	dn.Mine()
	if st := dn.TxStatus(txid); st.State != devnode.TxConfirmed {
		t.Errorf("drip %s: %s after a block", drip.TxID, st.State)
	}
}

// serveFrontEnds serves n new front ends of dn until the test ends.
func serveFrontEnds(t *testing.T, dn *devnode.Node, n int) ([]*devnode.FrontEnd, []string) {
	t.Helper()
	fes := make([]*devnode.FrontEnd, n)
	urls := make([]string, n)
	for i := range fes {
		fes[i] = dn.FrontEnd()
		srv := httptest.NewServer(fes[i].Handler())
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	return fes, urls
}
