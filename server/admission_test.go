package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// lostAnswerNode lets the first broadcast reach the node but loses its
// answer (a timeout), and refuses every later one at dial: the outcome of
// the first stays unknown to the engine.
type lostAnswerNode struct {
	faucet.NodeClient
	calls atomic.Int32
}

func (n *lostAnswerNode) Broadcast(ctx context.Context, raw []byte) (string, error) {
	if n.calls.Add(1) == 1 {
		_, _ = n.NodeClient.Broadcast(ctx, raw)
		return "", &node.TransportError{Call: node.CallBroadcast, Err: context.DeadlineExceeded}
	}
	return "", &node.TransportError{Call: node.CallBroadcast, Err: &url.Error{Op: "Post", URL: "http://node/v2/transactions",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}}
}

// A drip whose broadcast may have reached the node answers with its txid
// and keeps its rate-limit charge: the client's retry is refused, never
// paid a second time.
func TestAdmissionKeepsTheChargeOfADripInDoubt(t *testing.T) {
	h := newHarness(t, options{
		limits:    guard.Limits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}},
		faucetCfg: func(c *faucet.Config) { c.Node = &lostAnswerNode{NodeClient: c.Node} },
	})
	to := newRecipient(t)
	w := h.drip("address=" + to)
	if w.Code != http.StatusOK {
		t.Fatalf("maybe-sent drip: %d %s, want its txid", w.Code, w.Body)
	}
	var ok dripSuccess
	if err := json.Unmarshal(w.Body.Bytes(), &ok); err != nil || !ok.Success {
		t.Fatalf("body %s: %v", w.Body, err)
	}
	if w := h.drip("address=" + to); w.Code != http.StatusTooManyRequests {
		t.Fatalf("retry after a maybe-sent drip: %d %s, want 429", w.Code, w.Body)
	}
	if n := h.dn.MempoolSize(); n != 1 {
		t.Fatalf("mempool %d after the retry, want the one tx the node took", n)
	}
}

// A drip that surely sent nothing gives its charge back; the next one is
// charged, and stacking drips count in a bucket of their own.
func TestAdmissionReleasesTheChargeOfAFailedDrip(t *testing.T) {
	h := newHarness(t, options{limits: guard.Limits{
		PerAddress:         guard.Limit{Requests: 1, Window: time.Hour},
		StackingPerAddress: guard.Limit{Requests: 1, Window: time.Hour},
	}})
	to := newRecipient(t)
	h.dn.SetErrorRate(1)
	if w := h.drip("address=" + to); w.Code != http.StatusInternalServerError {
		t.Fatalf("drip against a failing node: %d %s", w.Code, w.Body)
	}
	h.dn.SetErrorRate(0)
	if w := h.drip("address=" + to); w.Code != http.StatusOK {
		t.Fatalf("slot not released after the failure: %d %s", w.Code, w.Body)
	}
	w := h.drip("address=" + to)
	assertError(t, w, http.StatusTooManyRequests, "Too many requests")
	if w.Header().Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	if w := h.drip("address=" + to + "&stacking=true"); w.Code != http.StatusOK {
		t.Fatalf("stacking drip blocked by the default bucket: %d %s", w.Code, w.Body)
	}
}

// Exactly the limit passes when 200 requests for one address race through
// the whole path (checks, limits, engine with four keys).
func TestAdmissionLimitsAreExactUnderConcurrency(t *testing.T) {
	h := newHarness(t, options{keys: 4, limits: guard.Limits{
		PerAddress: guard.Limit{Requests: 5, Window: time.Hour},
		PerIP:      guard.Limit{Requests: 30, Window: time.Hour},
	}})
	to := newRecipient(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 200 {
		wg.Go(func() {
			ip := "10.0." + string(rune('0'+i%2)) + ".1:4000"
			w := h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, nil, map[string]string{"RemoteAddr": ip})
			mu.Lock()
			codes[w.Code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusOK] != 5 || codes[http.StatusTooManyRequests] != 195 {
		t.Fatalf("answers %v, want exactly 5 × 200 and 195 × 429", codes)
	}
	if n := h.dn.MempoolSize(); n != 5 {
		t.Fatalf("mempool %d, want 5", n)
	}
}

// A suspended faucet refuses before the checks, the limits and the engine:
// nothing is sent and nothing charged.
func TestAdmissionSuspended(t *testing.T) {
	h := newHarness(t, options{disabled: true, limits: guard.Limits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}}})
	to := newRecipient(t)
	for range 2 {
		m := assertError(t, h.drip("address="+to), http.StatusForbidden, "Faucet is not available")
		if m["reason"] != "disabled" || m["detail"] != "the faucet is suspended" {
			t.Errorf("body %v", m)
		}
	}
	if n := h.dn.MempoolSize(); n != 0 {
		t.Fatalf("mempool %d, want nothing sent", n)
	}
}
