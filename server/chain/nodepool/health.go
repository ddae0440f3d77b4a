package nodepool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
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
// guarded by Pool.mu.
type member struct {
	c     *node.Client
	order int

	state     state
	reason    string        // why it is out of rotation
	tip       uint64        // stacks_tip_height of its last /v2/info
	lag       uint64        // blocks behind the best tip at the last probe round
	latency   time.Duration // moving average of its answered calls
	since     time.Time     // when state last changed
	failedAt  time.Time
	nextProbe time.Time
	backoff   time.Duration

	accepted, refused, unanswered uint64 // broadcasts
	resent                        uint64 // transactions it lacked, sent again
}

// chainID is the chain every node must report.
type chainID struct {
	id, parent uint32
	genesis    string
	pinned     bool // parent and genesis are set
}

// check returns why info is of another chain, or "" when it is of this
// one; the first answer pins what Config left open.
func (c *chainID) check(info *node.Info) string {
	if c.id != 0 && info.NetworkID != c.id {
		return fmt.Sprintf("reports network_id %#x, not %#x", info.NetworkID, c.id)
	}
	if !c.pinned {
		c.id, c.parent, c.genesis, c.pinned = info.NetworkID, info.ParentNetworkID, info.GenesisChainstateHash, true
		return ""
	}
	if info.ParentNetworkID != c.parent {
		return fmt.Sprintf("reports parent_network_id %#x, not %#x: another network", info.ParentNetworkID, c.parent)
	}
	if c.genesis != "" && info.GenesisChainstateHash != "" && info.GenesisChainstateHash != c.genesis {
		return "reports another genesis_chainstate_hash: another chain"
	}
	return ""
}

// observe takes a node's /v2/info answer to a read: its tip, and its
// chain. Lag is judged by probe rounds, which read every node at once; a
// read refreshes one node only, and on a fast chain the others' last tips
// would look behind.
func (p *Pool) observe(c *node.Client, info *node.Info) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.memberOf(c)
	if m == nil {
		return
	}
	m.tip = info.StacksTipHeight
	if why := p.chain.check(info); why != "" {
		p.setState(m, stateOut, why)
	}
}

// judgeLocked places a probe round's nodes: out when of another chain or
// more than MaxLag behind the best tip of the round and of the nodes in
// rotation, in otherwise.
func (p *Pool) judgeLocked(round []*member, infos []*node.Info) {
	var answered []*member
	var best uint64
	for i, m := range round {
		if infos[i] == nil {
			continue
		}
		m.tip = infos[i].StacksTipHeight
		if why := p.chain.check(infos[i]); why != "" {
			p.setState(m, stateOut, why)
			continue
		}
		answered = append(answered, m)
		best = max(best, m.tip)
	}
	for _, m := range p.members {
		if m.state == stateIn && !slices.Contains(round, m) {
			best = max(best, m.tip)
		}
	}
	for _, m := range answered {
		m.lag = best - m.tip
		if m.lag <= p.cfg.MaxLag {
			p.setState(m, stateIn, "")
			continue
		}
		p.setState(m, stateOut, fmt.Sprintf("%d blocks behind the best tip", m.lag))
		// Lag is no outage: look again soon, so it rejoins once caught up.
		m.backoff, m.nextProbe = p.cfg.ProbeInterval, p.cfg.Now().Add(p.cfg.ProbeInterval)
	}
}

func (p *Pool) memberOf(c *node.Client) *member {
	for _, m := range p.members {
		if m.c == c {
			return m
		}
	}
	return nil
}

// failed takes a node out of rotation after a call it did not answer.
func (p *Pool) failed(m *member, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m.failedAt = p.cfg.Now()
	p.setState(m, stateOut, failureReason(err))
}

// answered folds a call's latency into the node's average.
func (p *Pool) answered(m *member, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.latency == 0 {
		m.latency = d
		return
	}
	m.latency += (d - m.latency) / 8
}

// setState moves m and schedules its next probe: at the probe interval in
// rotation, with doubling back-off out of it. Moves are logged for pools of
// several nodes; a lone node's outages are the engine's to report.
func (p *Pool) setState(m *member, s state, reason string) {
	now := p.cfg.Now()
	if s == stateOut {
		m.backoff = min(max(2*m.backoff, p.cfg.ProbeInterval), p.cfg.MaxBackoff)
	} else {
		m.backoff = p.cfg.ProbeInterval
	}
	m.nextProbe = now.Add(m.backoff)
	if m.state == s && m.reason == reason {
		return
	}
	prev, prevSince := m.state, m.since
	m.state, m.reason, m.since = s, reason, now
	if len(p.members) < 2 {
		return
	}
	switch {
	case s == stateOut && prev != stateOut:
		p.log.Warn("stacks node left the rotation", "node", m.c.URL(), "reason", reason,
			"in_rotation", p.countLocked(stateIn))
	case s == stateIn && prev == stateOut:
		p.log.Info("stacks node rejoined the rotation", "node", m.c.URL(), "out_for", now.Sub(prevSince).Round(time.Millisecond).String(),
			"tip", m.tip)
	}
}

func (p *Pool) countLocked(s state) int {
	n := 0
	for _, m := range p.members {
		if m.state == s {
			n++
		}
	}
	return n
}

// failureReason is a short, credential-free account of a failed call.
func failureReason(err error) string {
	var (
		he *node.HTTPError
		te *node.TransportError
		re *node.ResponseError
	)
	switch {
	case errors.As(err, &he):
		return fmt.Sprintf("answers HTTP %d", he.StatusCode)
	case errors.Is(err, context.DeadlineExceeded):
		return "does not answer in time"
	case errors.As(err, &te):
		return "unreachable"
	case errors.As(err, &re):
		return "answers something other than a node's JSON"
	default:
		return "fails"
	}
}

// Probe asks every node for /v2/info at once and places each in or out of
// rotation; it returns when all have answered or failed. Run probes on its
// own schedule; a caller may probe once before serving.
func (p *Pool) Probe(ctx context.Context) {
	p.probe(ctx, p.members)
}

func (p *Pool) probe(ctx context.Context, round []*member) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ProbeTimeout)
	defer cancel()
	infos := make([]*node.Info, len(round))
	var wg sync.WaitGroup
	for i, m := range round {
		wg.Go(func() {
			start := p.cfg.Now()
			info, err := m.c.Info(ctx)
			switch {
			case err == nil:
				p.answered(m, p.cfg.Now().Sub(start))
				infos[i] = info
			case parent.Err() == nil: // not our own shutdown
				p.failed(m, err)
			}
		})
	}
	wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.judgeLocked(round, infos)
}

// due are the members to probe: every one but those out of rotation whose
// back-off has not ended, so that a round compares the tips of all nodes
// serving.
func (p *Pool) due() []*member {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	var out []*member
	for _, m := range p.members {
		if m.state != stateOut || !now.Before(m.nextProbe) {
			out = append(out, m)
		}
	}
	return out
}

// Run probes the nodes and checks the sent transactions until ctx ends.
func (p *Pool) Run(ctx context.Context) error {
	t := time.NewTicker(p.cfg.ProbeInterval)
	defer t.Stop()
	for {
		if ms := p.due(); len(ms) > 0 {
			p.probe(ctx, ms)
		}
		p.checkSent(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Healthy is the number of nodes in rotation.
func (p *Pool) Healthy() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.countLocked(stateIn)
}

// NodeStatus is one node's health as the pool sees it.
type NodeStatus struct {
	URL    string // without credentials
	State  string // ready, out or unknown
	Reason string // why it is out
	Tip    uint64 // stacks_tip_height it last reported
	Lag    uint64 // blocks behind the best tip at the last probe
	// Latency is the moving average of its answered calls.
	Latency time.Duration
	Since   time.Time // when it entered State
	// Broadcasts it accepted, refused (a mempool rejection) and did not
	// answer; Resent counts transactions it lacked and was sent again.
	Accepted, Refused, Unanswered, Resent uint64
}

// Nodes reports every node, in the configured order.
func (p *Pool) Nodes() []NodeStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]NodeStatus, len(p.members))
	for i, m := range p.members {
		out[i] = NodeStatus{URL: m.c.URL(), State: m.state.String(), Reason: m.reason, Tip: m.tip,
			Latency: m.latency, Since: m.since, Accepted: m.accepted, Refused: m.refused,
			Unanswered: m.unanswered, Resent: m.resent, Lag: m.lag}
	}
	return out
}
