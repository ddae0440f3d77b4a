package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// These tests run the monitor's read against several RPC front ends of one
// simulated chain, over real HTTP: the node it reads from is the one the
// faucet's pool would choose.

// frontEnds serves n front ends of dn and returns them and their URLs.
func frontEnds(t *testing.T, dn *devnode.Node, n int) ([]*devnode.FrontEnd, []string) {
	t.Helper()
	var fes []*devnode.FrontEnd
	var urls []string
	for range n {
		fe := dn.FrontEnd()
		srv := httptest.NewServer(fe.Handler())
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
		fes, urls = append(fes, fe), append(urls, srv.URL)
	}
	return fes, urls
}

// A node held behind the tip and a stopped one serve no read, though
// listed first; status.nodes says why each is out of rotation, and the
// node at the tip is read, tokens included.
func TestFundingMonitorReadsTheNodeThePoolChooses(t *testing.T) {
	sbtc := parseAsset(t, testnetSBTC)
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr := key.TestnetAddress()
	dn := devnode.New(devnode.Config{Seed: 1, Genesis: map[stacks.Address]uint64{addr: 3 * cost},
		Tokens: []devnode.TokenSpec{devnode.SBTCToken(sbtc, map[stacks.Address]uint64{addr: 4321})}})
	for range 12 {
		dn.Mine()
	}
	fes, urls := frontEnds(t, dn, 3)
	fes[0].HoldBehind(10)
	fes[1].Stop()
	m := &FundingMonitor{}
	target := fundingTarget{nodeURLs: urls, addresses: []string{addr.String()}, tokens: []tokenTarget{{name: "sbtc", asset: sbtc}}}

	rd, err := m.read(context.Background(), target)
	if err != nil || !slices.Equal(rd.balances, []uint64{3 * cost}) {
		t.Fatalf("read %+v, %v", rd, err)
	}
	if tok := rd.tokens[0]; tok.err != nil || !slices.Equal(tok.balances, []uint64{4321}) {
		t.Errorf("sbtc %+v", tok)
	}
	for i, fe := range fes[:2] {
		if n := fe.Served(node.CallAccount) + fe.Served(node.CallReadOnly); n != 0 {
			t.Errorf("front end %d, out of rotation, served %d reads", i, n)
		}
	}
	if fes[2].Served(node.CallAccount) != 1 || fes[2].Served(node.CallReadOnly) != 1 {
		t.Errorf("the node at the tip served %d account and %d token reads, want one each",
			fes[2].Served(node.CallAccount), fes[2].Served(node.CallReadOnly))
	}
	want := []nodeReading{
		{url: urls[0], tip: 2, out: "10 blocks behind the best tip"},
		{url: urls[1], out: "unreachable"},
		{url: urls[2], tip: 12},
	}
	if !slices.Equal(rd.nodes, want) {
		t.Errorf("nodes %+v\nwant %+v", rd.nodes, want)
	}
	if health, summary := nodesStatusOf(rd.nodes); summary != "1/3" || health[0].Message != want[0].out || *health[2].TipHeight != 12 {
		t.Errorf("status.nodes %+v, %q", health, summary)
	}

	t.Run("with every node down the read fails, each node saying why", func(t *testing.T) {
		for _, fe := range fes {
			fe.Stop()
		}
		rd, err := m.read(context.Background(), target)
		if err == nil || rd.balances != nil || !node.IsUnavailable(err) {
			t.Fatalf("read %+v, %v; want the nodes' failure", rd, err)
		}
		for i, n := range rd.nodes {
			if n.url != urls[i] || n.out != "unreachable" {
				t.Errorf("node %d: %+v", i, n)
			}
		}
	})
}

// A read hedged to a second node while the first does not answer returns
// the second's balances; the pool, built for the read, leaves no goroutine
// behind: the call to the first node is cancelled.
func TestFundingMonitorPoolLeavesNothingRunning(t *testing.T) {
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr := key.TestnetAddress()
	dn := devnode.New(devnode.Config{Seed: 1, Genesis: map[stacks.Address]uint64{addr: 5 * cost}})
	fes, urls := frontEnds(t, dn, 1)
	// The first node answers its probe, then holds every account read
	// until the client gives up.
	cancelled := make(chan struct{}, 1)
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v2/accounts/") {
			dn.Handler().ServeHTTP(w, r)
			return
		}
		<-r.Context().Done()
		cancelled <- struct{}{}
	}))
	t.Cleanup(func() { held.CloseClientConnections(); held.Close() })

	fc := clocktesting.NewFakeClock(t0)
	m := &FundingMonitor{Clock: fc}
	type result struct {
		rd  reading
		err error
	}
	done := make(chan result, 1)
	go func() {
		rd, err := m.read(context.Background(), fundingTarget{nodeURLs: []string{held.URL, urls[0]}, addresses: []string{addr.String()}})
		done <- result{rd, err}
	}()
	// The hedge timer is the only thing on the monitor's clock.
	eventually.True(t, 10*time.Second, "the read's hedge timer", fc.HasWaiters)
	if !nodepoolRunning() {
		t.Fatal("no nodepool frame in the running read's stack: the check below would prove nothing")
	}
	fc.Step(2 * time.Second)
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the hedged read did not return")
	}
	if r.err != nil || r.rd.balances[0] != 5*cost || fes[0].Served(node.CallAccount) != 1 {
		t.Fatalf("read %+v, %v; want the second node's balance", r.rd, r.err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the held call was not cancelled")
	}
	eventually.True(t, 10*time.Second, "no nodepool goroutine left", func() bool { return !nodepoolRunning() })
}

// nodepoolRunning reports whether a goroutine runs nodepool code.
func nodepoolRunning() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "/nodepool.")
}
