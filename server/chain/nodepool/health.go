package nodepool

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// state is a node's place in the rotation.
type state int

const (
	stateUnknown state = iota // not heard from yet: tried after those in rotation
	stateIn                   // serves reads and broadcasts
	stateOut                  // probed with back-off until it recovers
)

func (s state) String() string {
	switch s {
	case stateIn:
		return "ready"
	case stateOut:
		return "out"
	default:
		return "unknown"
	}
}

// member is one node of the pool. Its fields after c and order are
// guarded by group.mu.
type member[C client] struct {
	c     C
	order int

	state     state
	reason    string        // why it is out of rotation
	tip       uint64        // its chain tip height at its last probe or tip read
	lag       uint64        // blocks behind the best tip at the last probe round
	latency   time.Duration // moving average of its answered calls
	since     time.Time     // when state last changed
	failedAt  time.Time
	readAt    time.Time // when a read last gave its tip (observe)
	nextProbe time.Time
	backoff   time.Duration

	accepted, refused, unanswered uint64 // broadcasts
	resent                        uint64 // transactions it lacked, sent again
}

// observe takes a node's tip from a read of it, and its chain. Lag is
// judged by probe rounds, which read every node at once; a read refreshes
// one node only, and on a fast chain the others' last tips would look
// behind.
func (g *group[C]) observe(c C, tip uint64, otherChain string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.memberOf(c)
	if m == nil {
		return
	}
	m.tip, m.readAt = tip, g.t.clock.Now()
	if otherChain != "" {
		g.setState(m, stateOut, otherChain)
	}
}

// probeResult is one node's answer in a probe round.
type probeResult struct {
	ok         bool
	tip        uint64
	otherChain string
}

// judgeLocked places a probe round's nodes: out when of another chain or
// more than maxLag behind the best tip of the round and of the nodes in
// rotation, in otherwise.
func (g *group[C]) judgeLocked(round []*member[C], results []probeResult) {
	var answered []*member[C]
	var best uint64
	for i, m := range round {
		r := results[i]
		if !r.ok {
			continue
		}
		m.tip = r.tip
		if r.otherChain != "" {
			g.setState(m, stateOut, r.otherChain)
			continue
		}
		answered = append(answered, m)
		best = max(best, m.tip)
	}
	for _, m := range g.members {
		if m.state == stateIn && !slices.Contains(round, m) {
			best = max(best, m.tip)
		}
	}
	for _, m := range answered {
		m.lag = best - m.tip
		if m.lag <= g.t.maxLag {
			g.setState(m, stateIn, "")
			continue
		}
		g.setState(m, stateOut, fmt.Sprintf("%d blocks behind the best tip", m.lag))
		// Lag is no outage: look again soon, so it rejoins once caught up.
		m.backoff, m.nextProbe = g.t.probeInterval, g.t.clock.Now().Add(g.t.probeInterval)
	}
}

func (g *group[C]) memberOf(c C) *member[C] {
	for _, m := range g.members {
		if m.c == c {
			return m
		}
	}
	return nil
}

// failed takes a node out of rotation after a call it did not answer.
func (g *group[C]) failed(m *member[C], err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m.failedAt = g.t.clock.Now()
	g.setState(m, stateOut, g.rpc.failureReason(err))
}

// answered folds a call's latency into the node's average.
func (g *group[C]) answered(m *member[C], d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.latency == 0 {
		m.latency = d
		return
	}
	m.latency += (d - m.latency) / 8
}

// setState moves m and schedules its next probe: at the probe interval in
// rotation, with doubling back-off out of it. Moves are logged for pools of
// several nodes; a lone node's outages are the engine's to report.
func (g *group[C]) setState(m *member[C], s state, reason string) {
	now := g.t.clock.Now()
	if s == stateOut {
		m.backoff = min(max(2*m.backoff, g.t.probeInterval), g.t.maxBackoff)
	} else {
		m.backoff = g.t.probeInterval
	}
	m.nextProbe = now.Add(m.backoff)
	if m.state == s && m.reason == reason {
		return
	}
	prev, prevSince := m.state, m.since
	m.state, m.reason, m.since = s, reason, now
	if len(g.members) < 2 {
		return
	}
	switch {
	case s == stateOut && prev != stateOut:
		g.log.Warn(g.name+" node left the rotation", "node", m.c.URL(), "reason", reason,
			"in_rotation", g.countLocked(stateIn))
	case s == stateIn && prev == stateOut:
		g.log.Info(g.name+" node rejoined the rotation", "node", m.c.URL(), "out_for", now.Sub(prevSince).Round(time.Millisecond).String(),
			"tip", m.tip)
	}
}

func (g *group[C]) countLocked(s state) int {
	n := 0
	for _, m := range g.members {
		if m.state == s {
			n++
		}
	}
	return n
}

// Probe asks every node for its tip at once and places each in or out of
// rotation; it returns when all have answered or failed. Run probes on its
// own schedule; a caller may probe once before serving.
func (g *group[C]) Probe(ctx context.Context) {
	g.probe(ctx, g.members)
}

func (g *group[C]) probe(ctx context.Context, round []*member[C]) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, g.t.probeTimeout)
	defer cancel()
	results := make([]probeResult, len(round))
	var wg sync.WaitGroup
	for i, m := range round {
		wg.Go(func() {
			start := g.t.clock.Now()
			tip, other, err := g.rpc.probe(ctx, m.c)
			switch {
			case err == nil:
				g.answered(m, g.t.clock.Since(start))
				results[i] = probeResult{ok: true, tip: tip, otherChain: other}
			case parent.Err() == nil: // not our own shutdown
				g.failed(m, err)
			}
		})
	}
	wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.judgeLocked(round, results)
}

// due are the members to probe: every one but those out of rotation whose
// back-off has not ended, so that a round compares the tips of all nodes
// serving. A lone node in rotation whose tip a read gave since the last
// round is not probed: the faucet's own tip poll reads the same /v2/info,
// and on a rate-limited gateway every request counts.
func (g *group[C]) due() []*member[C] {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.t.clock.Now()
	var out []*member[C]
	for _, m := range g.members {
		switch {
		case m.state == stateOut && now.Before(m.nextProbe):
		case len(g.members) == 1 && m.state == stateIn && m.readAt.After(g.lastRound):
		default:
			out = append(out, m)
		}
	}
	g.lastRound = now
	return out
}

// run probes the nodes, and calls each round's after (if any), until ctx
// ends.
func (g *group[C]) run(ctx context.Context, after func(context.Context)) error {
	t := g.t.clock.NewTicker(g.t.probeInterval)
	defer t.Stop()
	for {
		if ms := g.due(); len(ms) > 0 {
			g.probe(ctx, ms)
		}
		if after != nil {
			after(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Healthy is the number of nodes in rotation.
func (g *group[C]) Healthy() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.countLocked(stateIn)
}

// NodeStatus is one node's health as the pool sees it.
type NodeStatus struct {
	URL    string // without credentials
	State  string // ready, out or unknown
	Reason string // why it is out
	Tip    uint64 // the chain tip height it last reported
	Lag    uint64 // blocks behind the best tip at the last probe
	// Latency is the moving average of its answered calls.
	Latency time.Duration
	Since   time.Time // when it entered State
	// Broadcasts it accepted, refused (a verdict on the transaction) and
	// did not answer; Resent counts transactions it lacked and was sent
	// again.
	Accepted, Refused, Unanswered, Resent uint64
}

// Nodes reports every node, in the configured order.
func (g *group[C]) Nodes() []NodeStatus {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]NodeStatus, len(g.members))
	for i, m := range g.members {
		out[i] = NodeStatus{URL: m.c.URL(), State: m.state.String(), Reason: m.reason, Tip: m.tip,
			Latency: m.latency, Since: m.since, Accepted: m.accepted, Refused: m.refused,
			Unanswered: m.unanswered, Resent: m.resent, Lag: m.lag}
	}
	return out
}
