// Package nodepool spreads a faucet's node RPC over several nodes of one
// chain, Stacks (Pool) or Bitcoin (BTCPool), so that no single node's
// restart, lag or silent drop of a broadcast stops the faucet.
//
// Reads go to the healthy node at the highest tip and fail over to the next
// when a node does not answer. Broadcasts go to every healthy node at once
// and succeed when one accepts. A background loop (Run) probes every node's
// tip, takes out of rotation a node that is unreachable, answers errors,
// lags the best tip by more than MaxLag blocks or reports another chain,
// and probes it with back-off until it recovers. The Stacks pool also
// checks that the nodes hold the transactions the faucet sent, re-sending
// to one that lacks a transaction (the Stacks mempool has no anti-entropy
// of its own; the BTC payer sends its unconfirmed payouts again every
// block, to every node).
//
// The chain-agnostic part (group) knows a node's client only through a
// small adapter (chainRPC); a pool of another chain is an adapter and the
// typed read methods over it.
//
// A pool of one node behaves as that node's client: its errors pass
// through unchanged and it is used even while it is out of rotation.
package nodepool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
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

// Config configures a Stacks Pool. Zero fields take the defaults above.
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
	// Clock reads the time and paces the probes and hedged reads; the
	// real clock when nil.
	Clock clock.WithTicker
}

// Pool is the Stacks node RPC of the faucet over several nodes. It is safe
// for concurrent use and implements the node client's read and broadcast
// methods.
type Pool struct {
	*group[*node.Client]
	cfg Config
	rpc *stacksRPC

	// Guarded by group.mu.
	shown *shownTip    // the tip Info last answered; never goes back within TipHold
	sent  *sentTracker // transactions to check on every node
}

// New returns a pool over cfg.Clients; Run must run for probes and
// re-sends, though reads and broadcasts work without it.
func New(cfg Config) (*Pool, error) {
	cfg.TipHold = settings.OrDefault(cfg.TipHold, DefaultTipHold)
	cfg.ResendAfter = settings.OrDefault(cfg.ResendAfter, DefaultResendAfter)
	cfg.TrackFor = settings.OrDefault(cfg.TrackFor, DefaultTrackFor)
	rpc := &stacksRPC{}
	rpc.chain.id = cfg.ChainID
	g, err := newGroup("stacks", chainRPC[*node.Client](rpc), cfg.Clients, tuning{
		maxLag: cfg.MaxLag, probeInterval: cfg.ProbeInterval, probeTimeout: cfg.ProbeTimeout,
		maxBackoff: cfg.MaxBackoff, clock: cfg.Clock,
	}, cfg.Logger)
	if err != nil {
		return nil, err
	}
	cfg.Clock = g.t.clock
	return &Pool{group: g, cfg: cfg, rpc: rpc, shown: &shownTip{}, sent: newSentTracker()}, nil
}

// Run probes the nodes and checks the sent transactions until ctx ends.
func (p *Pool) Run(ctx context.Context) error { return p.run(ctx, p.checkSent) }

// Info reads /v2/info from the best node. The tip it answers never goes
// below one answered before, unless every node stays lower for
// Config.TipHold (the chain restarted): a node a little behind, or a load
// balancer alternating between nodes, cannot move the faucet's view back.
func (p *Pool) Info(ctx context.Context) (*node.Info, error) {
	info, err := read(ctx, p.group, func(ctx context.Context, c *node.Client) (*node.Info, error) {
		info, err := c.Info(ctx)
		if err == nil {
			p.observe(c, info.StacksTipHeight, p.rpc.check(info))
		}
		return info, err
	})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shown.next(info, p.cfg.Clock.Now(), p.cfg.TipHold), nil
}

// PoX reads /v2/pox from the best node.
func (p *Pool) PoX(ctx context.Context) (*node.PoXInfo, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (*node.PoXInfo, error) { return c.PoX(ctx) })
}

// Account reads an account from the best node.
func (p *Pool) Account(ctx context.Context, principal string) (*node.Account, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (*node.Account, error) { return c.Account(ctx, principal) })
}

// TransferFeeRate reads /v2/fees/transfer from the best node.
func (p *Pool) TransferFeeRate(ctx context.Context) (uint64, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (uint64, error) { return c.TransferFeeRate(ctx) })
}

// TransactionFeeEstimate asks the best node for a fee estimate.
func (p *Pool) TransactionFeeEstimate(ctx context.Context, payload []byte, estimatedLen uint64) (*node.FeeEstimate, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (*node.FeeEstimate, error) {
		return c.TransactionFeeEstimate(ctx, payload, estimatedLen)
	})
}

// CallReadOnly runs a read-only function on the best node.
func (p *Pool) CallReadOnly(ctx context.Context, contract stacks.ContractID, function string, sender stacks.Principal, args ...stacks.ClarityValue) (stacks.ClarityValue, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (stacks.ClarityValue, error) {
		return c.CallReadOnly(ctx, contract, function, sender, args...)
	})
}

// TokenBalance reads a SIP-010 balance from the best node.
func (p *Pool) TokenBalance(ctx context.Context, token stacks.ContractID, owner stacks.Principal) (uint64, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (uint64, error) { return c.TokenBalance(ctx, token, owner) })
}

// TokenMetadata reads a SIP-010 token's metadata from the best node.
func (p *Pool) TokenMetadata(ctx context.Context, token stacks.ContractID) (node.TokenMetadata, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (node.TokenMetadata, error) {
		return c.TokenMetadata(ctx, token)
	})
}

// Transaction looks a mined transaction up on the best node.
func (p *Pool) Transaction(ctx context.Context, txid string) (*node.MinedTx, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (*node.MinedTx, error) { return c.Transaction(ctx, txid) })
}

// MempoolTx reports whether the best node holds txid unconfirmed.
func (p *Pool) MempoolTx(ctx context.Context, txid string) (bool, error) {
	return read(ctx, p.group, func(ctx context.Context, c *node.Client) (bool, error) { return c.MempoolTx(ctx, txid) })
}

// Broadcast posts rawTx to every node in rotation at once and returns the
// txid as soon as one accepts it. Only when no node accepts is the answer
// an error: a mempool rejection when a node gave one, else the last node's
// failure. A transaction one node accepted is then watched until every
// node holds it (see Run).
func (p *Pool) Broadcast(ctx context.Context, rawTx []byte) (string, error) {
	txid, err := p.broadcast(ctx, func(ctx context.Context, c *node.Client) (string, error) { return c.Broadcast(ctx, rawTx) })
	if err == nil && p.Len() > 1 {
		p.track(txid, rawTx)
	}
	return txid, err
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

// stacksRPC adapts the group to the Stacks node client.
type stacksRPC struct {
	mu    sync.Mutex
	chain chainID // pinned on the first answer unless Config.ChainID
}

func (s *stacksRPC) probe(ctx context.Context, c *node.Client) (uint64, string, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return 0, "", err
	}
	return info.StacksTipHeight, s.check(info), nil
}

func (s *stacksRPC) check(info *node.Info) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chain.check(info)
}

func (*stacksRPC) unavailable(err error) bool { return node.IsUnavailable(err) }

func (*stacksRPC) refusal(err error) int {
	var rej *node.RejectionError
	if errors.As(err, &rej) && !rej.IsServerFailure() {
		return 1
	}
	return 0
}

func (*stacksRPC) cut(err error) error {
	return &node.TransportError{Client: "node", Call: node.CallBroadcast, Err: err}
}

func (*stacksRPC) failureReason(err error) string {
	return failureOf(err).reason("a node's JSON")
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
