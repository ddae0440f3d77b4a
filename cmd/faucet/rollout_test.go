package main

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// service stands in for a Kubernetes Service: it sends each drip to one of
// the replicas whose /readyz answered 200 at its last probe, probing every
// period as endpoints and kube-proxy follow readiness.
type service struct {
	mu      sync.Mutex
	procs   []*faucetProc
	ready   []*faucetProc
	next    int
	stopped chan struct{}
	done    sync.WaitGroup
}

func newService(t *testing.T, period time.Duration, procs ...*faucetProc) *service {
	s := &service{procs: procs, stopped: make(chan struct{})}
	s.probe()
	s.done.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-s.stopped:
				return
			case <-tick.C:
				s.probe()
			}
		}
	})
	t.Cleanup(s.stop)
	return s
}

func (s *service) stop() {
	select {
	case <-s.stopped:
	default:
		close(s.stopped)
	}
	s.done.Wait()
}

// add makes p an endpoint candidate, as a new pod of the Deployment.
func (s *service) add(p *faucetProc) {
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
}

func (s *service) probe() {
	s.mu.Lock()
	procs := slices.Clone(s.procs)
	s.mu.Unlock()
	var up []*faucetProc
	for _, p := range procs {
		if ready(p.url) {
			up = append(up, p)
		}
	}
	s.mu.Lock()
	s.ready = up
	s.mu.Unlock()
}

// pick is the next ready replica, round robin, or nil.
func (s *service) pick() *faucetProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) == 0 {
		return nil
	}
	s.next++
	return s.ready[s.next%len(s.ready)]
}

// steadyLoad sends drips through svc from workers, each pausing between
// its drips, until stop (or limit drips); it returns every answer.
func steadyLoad(t *testing.T, svc *service, workers int, pause time.Duration, limit int) (stop func() []dripAnswer) {
	to := newRecipients(t, limit)
	var mu sync.Mutex
	var answers []dripAnswer
	var noEndpoint int
	sent := 0
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-quit:
					return
				case <-time.After(pause):
				}
				p := svc.pick()
				mu.Lock()
				if sent == limit {
					mu.Unlock()
					return
				}
				if p == nil {
					noEndpoint++
					mu.Unlock()
					continue
				}
				r := to[sent]
				sent++
				mu.Unlock()
				a := p.drip(r)
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		})
	}
	return func() []dripAnswer {
		close(quit)
		wg.Wait()
		if noEndpoint > 0 {
			t.Errorf("%d drips found no ready replica", noEndpoint)
		}
		return answers
	}
}

// logTime is when p logged the first line with msg whose key field is key
// (if set) and that has field also (if set), or the zero time.
func (p *faucetProc) logTime(msg, key, also string) time.Time {
	for line := range strings.SplitSeq(p.logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg || (key != "" && rec["key"] != key) {
			continue
		}
		if _, ok := rec[also]; also != "" && !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, rec["time"].(string))
		if err == nil {
			return at
		}
	}
	return time.Time{}
}

// readyReasonOf is p's /readyz reason, or "" when it is ready.
func (p *faucetProc) readyReasonOf() string {
	resp, err := http.Get(p.url + "/readyz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(b, &body)
	return body.Reason
}

// acquiredKeys lists the keys p's store logged acquiring, in order.
func (p *faucetProc) acquiredKeys() []string {
	var keys []string
	for line := range strings.SplitSeq(p.logs.String(), "\n") {
		var rec struct {
			Msg   string `json:"msg"`
			Key   string `json:"key"`
			Epoch *int64 `json:"epoch"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "key acquired" && rec.Epoch != nil {
			keys = append(keys, rec.Key)
		}
	}
	return keys
}

// TestFaultsRolloutPostgres: a rollout as the Deployment makes it
// (maxSurge 1, maxUnavailable 0) with keys == replicas (2), under a steady
// STX load sent only to ready replicas, as a Service does. Each surge pod
// joins youngest, so it takes the oldest replica's key; the oldest drains
// (not ready, still paying) for the shutdown delay, then hands the key
// over; the surge pod turns ready; the oldest, now unready, is the one
// SIGTERMed. Twice, until both replicas are new; then a scale-down to one
// SIGTERMs a replica holding its key. Every drip is answered 200: no
// busy, no connection error; every answered drip is mined.
func TestFaultsRolloutPostgres(t *testing.T) {
	e := newFaultEnv(t, 2)
	uri := pgtest.Shared(t).CreateDB(t)
	args := []string{"--store", uri, "--shutdown-delay", "1s", "--busy-wait", "20s"}
	a := e.serve("replica-a", args...)
	a.waitOwned(2, 20*time.Second)
	b := e.serve("replica-b", args...)
	a.waitOwned(1, 20*time.Second)
	b.waitOwned(1, 20*time.Second)
	a.waitReady()
	b.waitReady()

	stopMining := e.mineEvery(200 * time.Millisecond)
	svc := newService(t, 100*time.Millisecond, a, b)
	stopLoad := steadyLoad(t, svc, 8, 50*time.Millisecond, 1200)

	// Handover latencies, from the releasing replica's log line (written
	// just after its unlock, so it may come a hair after the other's
	// acquisition) to the acquiring replica's.
	var handovers []time.Duration
	// surge starts a new pod; the oldest old one hands its key over and is
	// SIGTERMed once the new one is ready.
	surge := func(name string, oldest, other *faucetProc) *faucetProc {
		t.Helper()
		n := e.serve(name, args...)
		svc.add(n)
		n.waitOwned(1, 20*time.Second)
		n.waitReady()
		if got := oldest.ownedKeys(); got != 0 {
			t.Fatalf("%s owns %d keys once %s is ready, want 0", oldest.name, got, n.name)
		}
		if got := other.ownedKeys(); got != 1 {
			t.Fatalf("%s owns %d keys, want its 1", other.name, got)
		}
		if why := oldest.readyReasonOf(); why == "" {
			t.Fatalf("%s without a key is ready", oldest.name)
		}
		key := n.acquiredKeys()[0]
		released, acquired := oldest.logTime("key released to another replica", key, ""), n.logTime("key acquired", key, "epoch")
		drainFrom := oldest.logTime("handing the keys over: this replica's share fell to none; it keeps paying, not ready, for the drain", "", "")
		if released.IsZero() || acquired.IsZero() || drainFrom.IsZero() {
			t.Fatalf("no drain, release or acquisition of %s logged", key)
		}
		handovers = append(handovers, acquired.Sub(released))
		t.Logf("%s: %s drained %s, released %s; %s acquired it %s later",
			n.name, oldest.name, released.Sub(drainFrom).Round(time.Millisecond), key, n.name, acquired.Sub(released).Round(100*time.Microsecond))
		oldest.stop(syscall.SIGTERM)
		return n
	}
	c := surge("replica-c", a, b)
	d := surge("replica-d", b, c)
	eventually.True(t, 10*time.Second, "c and d ready", func() bool { return ready(c.url) && ready(d.url) })
	time.Sleep(time.Second) // the load goes on over the new replicas alone

	// A scale-down: C is SIGTERMed holding its key. It leaves the
	// membership at once, pays through its lame duck, then releases the
	// key, which D takes at once.
	key := c.acquiredKeys()[0]
	c.stop(syscall.SIGTERM)
	d.waitOwned(2, 10*time.Second)
	left, released := c.logTime("left key ownership; keeping the keys held until what is in flight is done", "", ""), c.logTime("keys released at exit", "", "")
	acquired := d.logTime("key acquired", key, "epoch")
	if left.IsZero() || released.IsZero() || acquired.IsZero() || released.Before(left) {
		t.Fatalf("C left %v, released %v, D acquired %v: want left, then released, then acquired", left, released, acquired)
	}
	handovers = append(handovers, acquired.Sub(released))
	t.Logf("scale-down: replica-c left the membership, kept %s %s, released it; replica-d acquired it %s later",
		key, released.Sub(left).Round(time.Millisecond), acquired.Sub(released).Round(100*time.Microsecond))
	time.Sleep(500 * time.Millisecond)
	answers := stopLoad()
	svc.stop()

	busy, unanswered, other := 0, 0, 0
	for _, r := range answers {
		switch {
		case r.code == http.StatusOK:
		case r.code == 0:
			unanswered++
		case r.reason == "busy":
			busy++
		default:
			other++
			t.Errorf("drip answered %d %s", r.code, r.reason)
		}
	}
	t.Logf("rollout: %d drips, %d busy, %d without an answer, %d other failures; handovers %v", len(answers), busy, unanswered, other, handovers)
	if busy != 0 || unanswered != 0 {
		t.Errorf("%d drips answered busy and %d got no answer, want none", busy, unanswered)
	}
	stopMining()
	e.mineUntilEmpty(6)
	e.checkPaid(answers, 500_000_000)
}
