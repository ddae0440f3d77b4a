package main

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// Two replicas on one Postgres, BTC on: whichever receives a BTC drip
// answers it (the one without the Bitcoin key forwards it to the one with
// it), and when the key's holder is stopped mid-burst (SIGTERM, as a pod
// delete or a rollout does) the other takes the key over. A client that
// never retries gets 200 for every drip, and every recipient receives
// exactly one output of the drip amount.
func TestBTCEveryReplicaAnswersThroughAHandover(t *testing.T) {
	e := newBTCFaultEnv(t)
	ctx := context.Background()
	start, err := e.client.BlockCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uri := pgtest.Shared(t).CreateDB(t)
	args := append([]string{"--store", uri, "--peer-listen", "127.0.0.1:0", "--shutdown-delay", "1s"}, e.args...)
	procs := []*faucetProc{e.serve("replica-a", args...), e.serve("replica-b", args...)}
	// The keys spread over both replicas (one Stacks key, the Bitcoin
	// key): the holder is the one whose BTC faucet started last without
	// giving the key away since.
	holds := func(p *faucetProc) bool {
		l := p.logs.String()
		return strings.LastIndex(l, `"btc faucet ready"`) > strings.LastIndex(l, `"btc faucet: gave the BTC key`)
	}
	var holder, other *faucetProc
	if err := eventually.Wait(t, 60*time.Second, func() bool {
		a, b := holds(procs[0]), holds(procs[1])
		switch {
		case a && !b && procs[1].ownedKeys() == 1:
			holder, other = procs[0], procs[1]
		case b && !a && procs[0].ownedKeys() == 1:
			holder, other = procs[1], procs[0]
		}
		return holder != nil
	}); err != nil {
		t.Fatalf("no replica paid BTC: %v\n%s\n%s", err, procs[0].logs.tail(20), procs[1].logs.tail(20))
	}
	if err := eventually.Wait(t, 30*time.Second, func() bool {
		return strings.Contains(other.logs.String(), `"peer listener serving"`) && strings.Contains(holder.logs.String(), `"peer listener serving"`)
	}); err != nil {
		t.Fatal("the peer listeners did not start")
	}

	const n = 80
	to := newBTCRecipients(t, n)
	answers := make([]btcAnswer, n)
	took := make([]time.Duration, n)
	var stopped atomic.Bool
	var answered atomic.Int32
	tenth := make(chan struct{})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		// Both replicas receive drips, as a Service spreads them, until the
		// holder is stopped; then only the survivor does (its endpoints
		// are gone).
		p := procs[i%2]
		if stopped.Load() {
			p = other
		}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			answers[i] = p.dripBTC(to[i])
			took[i] = time.Since(t0)
			if answered.Add(1) == 20 {
				close(tenth)
			}
		})
		if i == 30 {
			<-tenth
			stopped.Store(true)
			if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	<-holder.done
	if holder.err != nil {
		t.Errorf("the holder exited with %v after SIGTERM", holder.err)
	}

	// Every answered payout reaches a block: the holder's from the
	// mempool, any it recorded but had not sent from the survivor's resume.
	txids := map[string]bool{}
	for _, a := range answers {
		if a.code == http.StatusOK {
			txids[a.txid] = true
		}
	}
	if err := eventually.Wait(t, 60*time.Second, func() bool {
		if _, err := e.client.Generate(ctx, 1); err != nil {
			return false
		}
		for id := range txids {
			if tx, err := e.client.RawTransaction(ctx, id); err != nil || tx.Confirmations < 1 {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("answered payouts not mined: %v\n%s", err, other.logs.tail(20))
	}
	got := e.receivedByScript(start)
	var slowest time.Duration
	for i, a := range answers {
		slowest = max(slowest, took[i])
		if a.code != http.StatusOK {
			t.Errorf("drip %d to %s answered %d %s", i, a.to, a.code, a.body)
			continue
		}
		addr, err := bitcoin.ParseAddress(a.to, bitcoin.Regtest)
		if err != nil {
			t.Fatal(err)
		}
		if outs := got[hex.EncodeToString(addr.PkScript())]; len(outs) != 1 || outs[0] != 10_000 {
			t.Errorf("%s answered 200 (tx %s) but received %v", a.to, a.txid, outs)
		}
	}
	t.Logf("BTC on two replicas, holder stopped after 20 of %d drips: %d payouts, every drip answered 200 and paid once; slowest answer %s",
		n, len(txids), slowest.Round(time.Millisecond))
	if err := eventually.Wait(t, 30*time.Second, func() bool { return holds(other) }); err != nil {
		t.Fatalf("the survivor never took the Bitcoin key over: %v\n%s", err, other.logs.tail(20))
	}
	// The survivor pays on its own now.
	k, _ := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if a := other.dripBTC(k.Address().String()); a.code != http.StatusOK {
		t.Fatalf("drip after the handover: %d\n%s", a.code, other.logs.tail(20))
	}
}
