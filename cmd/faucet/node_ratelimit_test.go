package main

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// limitingGateway fronts a node as a rate-limited public API does: once
// limited it answers every request 429 with the seconds left in
// Retry-After, until the limit's end. It counts what it refused.
type limitingGateway struct {
	url     string
	until   atomic.Int64 // Unix nanoseconds
	refused atomic.Int64
}

func serveLimitingGateway(t *testing.T, nodeURL string) *limitingGateway {
	t.Helper()
	g := &limitingGateway{}
	g.url = serveGate(t, nodeURL, func(w http.ResponseWriter, _ *http.Request) bool {
		left := time.Until(time.Unix(0, g.until.Load()))
		if left <= 0 {
			return true
		}
		g.refused.Add(1)
		w.Header().Set("Retry-After", strconv.Itoa(int((left+time.Second-1)/time.Second)))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":"rate limit exceeded"}`)
		return false
	})
	return g
}

// Behind a gateway that starts answering 429, the faucet sends it nothing
// more until the Retry-After has passed, answers a drip meanwhile 503 with
// a Retry-After no sooner than the gateway's, and drips again once the
// wait is over. Without the wait, its tip poll and probes alone would ask
// a few times a second, each answer restarting a real limiter's penalty.
func TestServeWaitsOutARateLimitingNode(t *testing.T) {
	t.Parallel() // it mostly waits out the limit
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{key.TestnetAddress(): 10_000_000_000}})
	gw := serveLimitingGateway(t, serveTestNode(t, dn))
	base, stop := serveInProcess(t, io.Discard, "--node-url", gw.url, "--key-file", writeKeys(t, key), "--log-level", "error")
	defer stop()
	dripConfirmed(t, base, dn)

	// Longer than the faucet's own Retry-After for a node outage (5 s),
	// so the drip's answer shows the gateway's wait.
	const limit = 8 * time.Second
	end := time.Now().Add(limit)
	gw.until.Store(end.UnixNano())
	eventually.True(t, 10*time.Second, "the faucet's first request to the limited gateway", func() bool { return gw.refused.Load() > 0 })

	resp, err := http.Post(base+"/extended/v3/faucets/stx", "application/json", strings.NewReader(`{"address":"`+newAddress(t)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	left := time.Until(end)
	if resp.StatusCode != http.StatusServiceUnavailable || time.Duration(retry)*time.Second < left-time.Second {
		t.Fatalf("drip while rate limited: %d, Retry-After %q (%s left of the limit): %s", resp.StatusCode, resp.Header.Get("Retry-After"), left.Round(time.Millisecond), body)
	}

	time.Sleep(time.Until(end))
	// The requests in flight when the first 429 came may each have drawn
	// one (the tip and an account read run at once); nothing after.
	t.Logf("the gateway refused %d requests during its %s limit", gw.refused.Load(), limit)
	if n := gw.refused.Load(); n > 3 {
		t.Errorf("the gateway refused %d requests during its %s limit; want the faucet to wait it out after the first", n, limit)
	}
	eventually.True(t, 20*time.Second, "the faucet ready again", func() bool { return ready(base) })
	dripConfirmed(t, base, dn)
}
