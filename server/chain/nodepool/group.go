package nodepool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/settings"
	"k8s.io/utils/clock"
)

// client is a node client of either chain; URL names it without
// credentials.
type client interface {
	comparable
	URL() string
}

// chainRPC is what the pool needs to know of one chain's node client.
type chainRPC[C client] interface {
	// probe reads the node's tip, and why the node is of another chain
	// ("" when it is of the pool's).
	probe(ctx context.Context, c C) (tip uint64, otherChain string, err error)
	// unavailable reports whether err says the node could not serve the
	// call (so another node should be asked), not an answer about it.
	unavailable(err error) bool
	// failureReason is a short, credential-free account of a failed call.
	failureReason(err error) string
	// refusal ranks a broadcast's error: 0 when it is no verdict on the
	// transaction (the node did not answer), higher for the verdicts to
	// prefer when no node accepts.
	refusal(err error) int
	// cut is the error of a broadcast whose caller gave up waiting.
	cut(err error) error
}

// failure is what a failed call tells of the node, for the reason it is
// out of rotation; each chain's adapter reads its client's errors into it.
type failure struct {
	status    int  // an HTTP status other than 2xx (429 too for a call held back after one)
	auth      bool // the node refuses the credentials
	warmup    bool // the node is starting
	timeout   bool
	transport bool // no answer at all
	response  bool // an answer that is not the node's protocol
}

// failureOf reads the errors both node clients share (rpcclient's).
func failureOf(err error) failure {
	var (
		he *rpcclient.HTTPError
		te *rpcclient.TransportError
		re *rpcclient.ResponseError
	)
	f := failure{timeout: errors.Is(err, context.DeadlineExceeded), transport: errors.As(err, &te), response: errors.As(err, &re)}
	switch {
	case errors.As(err, &he):
		f.status = he.StatusCode
	case rpcclient.IsThrottled(err): // held back: the 429 it waits out
		f.status = http.StatusTooManyRequests
	}
	return f
}

// reason is a short, credential-free account of f.
func (f failure) reason(protocol string) string {
	switch {
	case f.warmup:
		return "is warming up"
	case f.auth:
		return fmt.Sprintf("refuses the credentials (HTTP %d)", f.status)
	case f.status == http.StatusTooManyRequests:
		return "rate limits the faucet (HTTP 429)"
	case f.status != 0:
		return fmt.Sprintf("answers HTTP %d", f.status)
	case f.timeout:
		return "does not answer in time"
	case f.transport:
		return "unreachable"
	case f.response:
		return "answers something other than " + protocol
	default:
		return "fails"
	}
}

// tuning are the knobs common to both chains' pools.
type tuning struct {
	maxLag                                  uint64
	probeInterval, probeTimeout, maxBackoff time.Duration
	clock                                   clock.WithTicker
}

// group is the chain-agnostic part of a pool: its members' health, the
// read with failover and hedging, and the broadcast to every node.
type group[C client] struct {
	t       tuning
	name    string // the chain, in log lines: "stacks node left the rotation"
	rpc     chainRPC[C]
	log     *slog.Logger
	members []*member[C]

	mu sync.Mutex // guards the members' fields after c and order, and lastRound
	// lastRound is when due last chose a probe round.
	lastRound time.Time
}

func newGroup[C client](name string, rpc chainRPC[C], clients []C, t tuning, log *slog.Logger) (*group[C], error) {
	if len(clients) == 0 {
		return nil, errors.New("nodepool: no node")
	}
	var zero C
	seen := map[string]bool{}
	for _, c := range clients {
		if c == zero {
			return nil, errors.New("nodepool: nil client")
		}
		if seen[c.URL()] {
			return nil, errors.New("nodepool: node " + c.URL() + " listed twice")
		}
		seen[c.URL()] = true
	}
	t.maxLag = settings.OrDefault(t.maxLag, DefaultMaxLag)
	t.probeInterval = settings.OrDefault(t.probeInterval, DefaultProbeInterval)
	t.probeTimeout = settings.OrDefault(t.probeTimeout, DefaultProbeTimeout)
	t.maxBackoff = settings.OrDefault(t.maxBackoff, DefaultMaxBackoff)
	if t.clock == nil {
		t.clock = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &group[C]{t: t, name: name, rpc: rpc, log: log}
	for i, c := range clients {
		g.members = append(g.members, &member[C]{c: c, order: i, state: stateUnknown})
	}
	return g, nil
}

// URL names the pool's nodes for logs: their URLs without credentials.
func (g *group[C]) URL() string {
	urls := make([]string, len(g.members))
	for i, m := range g.members {
		urls[i] = m.c.URL()
	}
	return strings.Join(urls, ",")
}

// Len is the number of nodes.
func (g *group[C]) Len() int { return len(g.members) }

// candidates are the members to try for a read, best first: those in
// rotation by tip (highest first), then those not probed yet, then, when
// none of those is left, the ones out of rotation (least recently failed
// first), so that a pool whose every node failed still tries them.
func (g *group[C]) candidates() []*member[C] {
	g.mu.Lock()
	defer g.mu.Unlock()
	var in, unknown, out []*member[C]
	for _, m := range g.members {
		switch m.state {
		case stateIn:
			in = append(in, m)
		case stateUnknown:
			unknown = append(unknown, m)
		default:
			out = append(out, m)
		}
	}
	slices.SortStableFunc(in, func(a, b *member[C]) int {
		if a.tip != b.tip {
			return cmpDesc(a.tip, b.tip)
		}
		return a.order - b.order
	})
	if in = append(in, unknown...); len(in) > 0 {
		return in
	}
	slices.SortStableFunc(out, func(a, b *member[C]) int { return a.failedAt.Compare(b.failedAt) })
	return out
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

// read runs call on the best node, and on the next one at once when a node
// fails to answer. When the best node is slow to answer (a hung node
// answers only at the client's timeout) the next one is asked too, after
// a hedge delay, and the first answer wins; reads are idempotent. The
// last node's error is returned when none answers.
func read[C client, T any](ctx context.Context, g *group[C], call func(context.Context, C) (T, error)) (T, error) {
	var zero T
	cands := g.candidates()
	if len(cands) == 1 {
		m := cands[0]
		start := g.t.clock.Now()
		v, err := call(ctx, m.c)
		switch {
		case err == nil:
			g.answered(m, g.t.clock.Since(start))
		case g.rpc.unavailable(err) && ctx.Err() == nil:
			g.failed(m, err)
		}
		return v, err
	}
	type result struct {
		m    *member[C]
		v    T
		err  error
		took time.Duration
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel() // the reads still running lose
	results := make(chan result, len(cands))
	next, running := 0, 0
	launch := func() {
		m := cands[next]
		next++
		running++
		go func() {
			start := g.t.clock.Now()
			v, err := call(callCtx, m.c)
			results <- result{m, v, err, g.t.clock.Since(start)}
		}()
	}
	launch()
	hedge := g.t.clock.NewTimer(g.hedgeDelay(cands[0]))
	defer hedge.Stop()
	lastErr := errors.New("nodepool: no node")
	for running > 0 {
		select {
		case r := <-results:
			running--
			if r.err == nil || !g.rpc.unavailable(r.err) || ctx.Err() != nil {
				if r.err == nil {
					g.answered(r.m, r.took)
				}
				return r.v, r.err
			}
			g.failed(r.m, r.err)
			lastErr = r.err
			if next < len(cands) {
				launch()
			}
		case <-hedge.C():
			if next < len(cands) {
				launch()
				hedge.Reset(g.hedgeDelay(cands[next-1]))
			}
		}
	}
	return zero, lastErr
}

// Bounds of the hedge delay: a node answering in 5 ms is given 200 ms, one
// whose latency is not known yet a second, and no node more than two.
const (
	minHedgeDelay     = 200 * time.Millisecond
	unknownHedgeDelay = time.Second
	maxHedgeDelay     = 2 * time.Second
)

// hedgeDelay is how long a read waits for m before asking the next node
// too: four times m's usual latency, within the bounds above.
func (g *group[C]) hedgeDelay(m *member[C]) time.Duration {
	g.mu.Lock()
	lat := m.latency
	g.mu.Unlock()
	if lat == 0 {
		return unknownHedgeDelay
	}
	return min(max(4*lat, minHedgeDelay), maxHedgeDelay)
}

// broadcast posts a transaction with send to every node in rotation at
// once and returns the first acceptance; the other posts finish in the
// background (each client call has its own timeout), so the other nodes
// get the transaction too. Only when no node accepts is the answer an
// error: the best-ranked verdict on the transaction when a node gave one
// (so the caller classifies a real refusal), else the last node's failure.
func (g *group[C]) broadcast(ctx context.Context, send func(context.Context, C) (string, error)) (string, error) {
	targets := g.broadcastTargets()
	if len(g.members) == 1 {
		txid, err := send(ctx, targets[0].c)
		g.noteBroadcast(targets[0], err)
		return txid, err
	}
	type result struct {
		txid string
		err  error
	}
	results := make(chan result, len(targets))
	sendCtx := context.WithoutCancel(ctx)
	for _, m := range targets {
		go func() {
			txid, err := send(sendCtx, m.c)
			g.noteBroadcast(m, err)
			results <- result{txid, err}
		}()
	}
	var verdict, last error
	rank := 0
	for range targets {
		select {
		case <-ctx.Done():
			return "", g.rpc.cut(ctx.Err())
		case r := <-results:
			if r.err == nil {
				return r.txid, nil
			}
			if k := g.rpc.refusal(r.err); k > rank {
				verdict, rank = r.err, k
			}
			last = r.err
		}
	}
	if verdict != nil {
		return "", verdict
	}
	return "", last
}

// broadcastTargets are the nodes in rotation and those not judged yet, or
// every node when none is.
func (g *group[C]) broadcastTargets() []*member[C] {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*member[C]
	for _, m := range g.members {
		if m.state != stateOut {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = append(out, g.members...)
	}
	return out
}

// noteBroadcast counts a post's outcome and takes a node that did not
// answer out of rotation.
func (g *group[C]) noteBroadcast(m *member[C], err error) {
	g.mu.Lock()
	switch {
	case err == nil:
		m.accepted++
	case g.rpc.refusal(err) > 0:
		m.refused++
	default:
		m.unanswered++
	}
	g.mu.Unlock()
	if err != nil && g.rpc.refusal(err) == 0 && g.rpc.unavailable(err) && !errors.Is(err, context.Canceled) {
		g.failed(m, err)
	}
}
