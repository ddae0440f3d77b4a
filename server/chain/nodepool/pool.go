// Package nodepool spreads a faucet's Stacks node RPC over several nodes of
// one chain, so that no single node's restart, lag or silent drop of a
// broadcast stops the faucet.
//
// Reads go to the healthy node at the highest tip and fail over to the next
// when a node does not answer. Broadcasts go to every healthy node at once
// and succeed when one accepts. A background loop (Run) probes every node's
// /v2/info, takes out of rotation a node that is unreachable, answers
// errors, lags the best tip by more than Config.MaxLag blocks or reports
// another chain, probes it with back-off until it recovers, and checks that
// the nodes hold the transactions the faucet sent, re-sending to one that
// lacks a transaction (the Stacks mempool has no anti-entropy of its own).
//
// A pool of one node behaves as that node's client: its errors pass
// through unchanged and it is used even while it is out of rotation.
package nodepool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Defaults of the zero Config fields.
const (
	// DefaultMaxLag is how many blocks a node may trail the best tip and
	// still serve reads: followers routinely trail the miner by a block or
	// two; more means a node that is syncing or cut off.
	DefaultMaxLag uint64 = 5
	// DefaultProbeInterval is how often a node in rotation is probed.
	DefaultProbeInterval = time.Second
	// DefaultProbeTimeout bounds a probe's /v2/info: a node that takes
	// longer is out of rotation (a hung node would otherwise stay in until
	// the client's own, longer timeout).
	DefaultProbeTimeout = 2 * time.Second
	// DefaultMaxBackoff caps the probe interval of a node out of rotation.
	DefaultMaxBackoff = 30 * time.Second
	// DefaultTipHold is how long a tip lower than the best one seen is
	// answered with the best one instead: long enough to ride out a load
	// balancer flipping between a fresh and a stale node, short enough that
	// a chain that really restarted (a devnet reset) is followed.
	DefaultTipHold = 30 * time.Second
	// DefaultResendAfter is how old a sent transaction must be before the
	// nodes are asked whether they hold it.
	DefaultResendAfter = 2 * time.Second
	// DefaultTrackFor is how long a sent transaction is watched at most.
	DefaultTrackFor = 10 * time.Minute
	// maxTracked bounds the watched transactions; the oldest go first.
	maxTracked = 4096
)

// Config configures a Pool. Zero fields take the defaults above.
type Config struct {
	// Clients are the nodes, in the order of preference among equals.
	Clients []*node.Client
	// ChainID, when set, takes a node reporting another network_id out of
	// rotation. Otherwise the first node to answer sets the chain (its
	// network_id, parent_network_id and genesis_chainstate_hash).
	ChainID       uint32
	MaxLag        uint64
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	MaxBackoff    time.Duration
	TipHold       time.Duration
	ResendAfter   time.Duration
	TrackFor      time.Duration
	Logger        *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Pool is the node RPC of the faucet over several nodes. It is safe for
// concurrent use and implements the node client's read and broadcast
// methods.
type Pool struct {
	cfg     Config
	log     *slog.Logger
	members []*member

	mu    sync.Mutex
	chain chainID      // pinned on the first answer unless Config.ChainID
	shown *shownTip    // the tip Info last answered; never goes back within TipHold
	sent  *sentTracker // transactions to check on every node
}

// New returns a pool over cfg.Clients; Run must run for probes and
// re-sends, though reads and broadcasts work without it.
func New(cfg Config) (*Pool, error) {
	if len(cfg.Clients) == 0 {
		return nil, errors.New("nodepool: no node")
	}
	seen := map[string]bool{}
	for _, c := range cfg.Clients {
		if c == nil {
			return nil, errors.New("nodepool: nil client")
		}
		if seen[c.URL()] {
			return nil, fmt.Errorf("nodepool: node %s listed twice", c.URL())
		}
		seen[c.URL()] = true
	}
	if cfg.MaxLag == 0 {
		cfg.MaxLag = DefaultMaxLag
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.TipHold <= 0 {
		cfg.TipHold = DefaultTipHold
	}
	if cfg.ResendAfter <= 0 {
		cfg.ResendAfter = DefaultResendAfter
	}
	if cfg.TrackFor <= 0 {
		cfg.TrackFor = DefaultTrackFor
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pool{cfg: cfg, log: cfg.Logger, shown: &shownTip{}, sent: newSentTracker()}
	p.chain.id = cfg.ChainID
	for i, c := range cfg.Clients {
		p.members = append(p.members, &member{c: c, order: i, state: stateUnknown})
	}
	return p, nil
}

// URL names the pool's nodes for logs: their URLs without credentials.
func (p *Pool) URL() string {
	urls := make([]string, len(p.members))
	for i, m := range p.members {
		urls[i] = m.c.URL()
	}
	return strings.Join(urls, ",")
}

// Len is the number of nodes.
func (p *Pool) Len() int { return len(p.members) }

// candidates are the members to try for a read, best first: those in
// rotation by tip (highest first), then those not probed yet, then, when
// none of those is left, the ones out of rotation (least recently failed
// first), so that a pool whose every node failed still tries them.
func (p *Pool) candidates() []*member {
	p.mu.Lock()
	defer p.mu.Unlock()
	var in, unknown, out []*member
	for _, m := range p.members {
		switch m.state {
		case stateIn:
			in = append(in, m)
		case stateUnknown:
			unknown = append(unknown, m)
		default:
			out = append(out, m)
		}
	}
	slices.SortStableFunc(in, func(a, b *member) int {
		if a.tip != b.tip {
			return cmpDesc(a.tip, b.tip)
		}
		return a.order - b.order
	})
	if in = append(in, unknown...); len(in) > 0 {
		return in
	}
	slices.SortStableFunc(out, func(a, b *member) int { return a.failedAt.Compare(b.failedAt) })
	return out
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

// nodeFailed reports whether err says the node could not serve the call,
// so another node should be asked: not an answer about the request.
func nodeFailed(err error) bool { return node.IsUnavailable(err) }

// read runs call on the best node, and on the next one at once when a node
// fails to answer. When the best node is slow to answer (a hung node
// answers only at the client's timeout) the next one is asked too, after
// a hedge delay, and the first answer wins; reads are idempotent. The
// last node's error is returned when none answers.
func read[T any](ctx context.Context, p *Pool, call func(context.Context, *node.Client) (T, error)) (T, error) {
	var zero T
	cands := p.candidates()
	if len(cands) == 1 {
		m := cands[0]
		start := p.cfg.Now()
		v, err := call(ctx, m.c)
		switch {
		case err == nil:
			p.answered(m, p.cfg.Now().Sub(start))
		case nodeFailed(err) && ctx.Err() == nil:
			p.failed(m, err)
		}
		return v, err
	}
	type result struct {
		m    *member
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
			start := p.cfg.Now()
			v, err := call(callCtx, m.c)
			results <- result{m, v, err, p.cfg.Now().Sub(start)}
		}()
	}
	launch()
	hedge := time.NewTimer(p.hedgeDelay(cands[0]))
	defer hedge.Stop()
	lastErr := errors.New("nodepool: no node")
	for running > 0 {
		select {
		case r := <-results:
			running--
			if r.err == nil || !nodeFailed(r.err) || ctx.Err() != nil {
				if r.err == nil {
					p.answered(r.m, r.took)
				}
				return r.v, r.err
			}
			p.failed(r.m, r.err)
			lastErr = r.err
			if next < len(cands) {
				launch()
			}
		case <-hedge.C:
			if next < len(cands) {
				launch()
				hedge.Reset(p.hedgeDelay(cands[next-1]))
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
func (p *Pool) hedgeDelay(m *member) time.Duration {
	p.mu.Lock()
	lat := m.latency
	p.mu.Unlock()
	if lat == 0 {
		return unknownHedgeDelay
	}
	return min(max(4*lat, minHedgeDelay), maxHedgeDelay)
}

// Info reads /v2/info from the best node. The tip it answers never goes
// below one answered before, unless every node stays lower for
// Config.TipHold (the chain restarted): a node a little behind, or a load
// balancer alternating between nodes, cannot move the faucet's view back.
func (p *Pool) Info(ctx context.Context) (*node.Info, error) {
	info, err := read(ctx, p, func(ctx context.Context, c *node.Client) (*node.Info, error) {
		info, err := c.Info(ctx)
		if err == nil {
			p.observe(c, info)
		}
		return info, err
	})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shown.next(info, p.cfg.Now(), p.cfg.TipHold), nil
}

// PoX reads /v2/pox from the best node.
func (p *Pool) PoX(ctx context.Context) (*node.PoXInfo, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (*node.PoXInfo, error) { return c.PoX(ctx) })
}

// Account reads an account from the best node.
func (p *Pool) Account(ctx context.Context, principal string) (*node.Account, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (*node.Account, error) { return c.Account(ctx, principal) })
}

// TransferFeeRate reads /v2/fees/transfer from the best node.
func (p *Pool) TransferFeeRate(ctx context.Context) (uint64, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (uint64, error) { return c.TransferFeeRate(ctx) })
}

// TransactionFeeEstimate asks the best node for a fee estimate.
func (p *Pool) TransactionFeeEstimate(ctx context.Context, payload []byte, estimatedLen uint64) (*node.FeeEstimate, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (*node.FeeEstimate, error) {
		return c.TransactionFeeEstimate(ctx, payload, estimatedLen)
	})
}

// CallReadOnly runs a read-only function on the best node.
func (p *Pool) CallReadOnly(ctx context.Context, contract stacks.ContractID, function string, sender stacks.Principal, args ...stacks.ClarityValue) (stacks.ClarityValue, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (stacks.ClarityValue, error) {
		return c.CallReadOnly(ctx, contract, function, sender, args...)
	})
}

// TokenBalance reads a SIP-010 balance from the best node.
func (p *Pool) TokenBalance(ctx context.Context, token stacks.ContractID, owner stacks.Principal) (uint64, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (uint64, error) { return c.TokenBalance(ctx, token, owner) })
}

// TokenMetadata reads a SIP-010 token's metadata from the best node.
func (p *Pool) TokenMetadata(ctx context.Context, token stacks.ContractID) (node.TokenMetadata, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (node.TokenMetadata, error) {
		return c.TokenMetadata(ctx, token)
	})
}

// Transaction looks a mined transaction up on the best node.
func (p *Pool) Transaction(ctx context.Context, txid string) (*node.MinedTx, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (*node.MinedTx, error) { return c.Transaction(ctx, txid) })
}

// MempoolTx reports whether the best node holds txid unconfirmed.
func (p *Pool) MempoolTx(ctx context.Context, txid string) (bool, error) {
	return read(ctx, p, func(ctx context.Context, c *node.Client) (bool, error) { return c.MempoolTx(ctx, txid) })
}

// shownTip keeps Info's answers from going back.
type shownTip struct {
	info      *node.Info
	lowerFrom time.Time // when answers below info began; zero while none
}

// next is the info to answer for a fresh read.
func (s *shownTip) next(fresh *node.Info, now time.Time, hold time.Duration) *node.Info {
	switch {
	case s.info == nil || fresh.StacksTipHeight >= s.info.StacksTipHeight:
		s.info, s.lowerFrom = fresh, time.Time{}
	case s.lowerFrom.IsZero():
		s.lowerFrom = now
	case now.Sub(s.lowerFrom) >= hold:
		s.info, s.lowerFrom = fresh, time.Time{}
	}
	return s.info
}
