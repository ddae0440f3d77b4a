package faucet

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/internal/ttlcache"
)

// chainView is the engine's cached view of the node's chain: its id and
// tip, trusted for ChainCheckInterval (the poll loop refreshes it), and
// PoX's minimum stacking amount, trusted for CacheTTL.
type chainView struct {
	node chainNode
	// want is the configured chain id (0: any testnet).
	want uint32
	info ttlcache.Value[chainInfo]
	// fetchInfo is fetch as a value, made once: a drip's check passes it
	// without allocating.
	fetchInfo func(context.Context) (chainInfo, error)
	minStack  ttlcache.Value[uint64] // PoX min_amount_ustx
	// downWait is getInfo's wait while the node is failing (nodeDownWait).
	downWait time.Duration
	// moved is when the poll last saw the tip rise (TipAge).
	moved tipWatch
}

type chainInfo struct {
	chainID uint32
	height  uint64
}

// chainNode is what the chain view reads from the node.
type chainNode interface {
	Info(ctx context.Context) (*node.Info, error)
	PoX(ctx context.Context) (*node.PoXInfo, error)
}

func newChainView(n chainNode, want uint32, checkTTL, cacheTTL time.Duration, clk clock.PassiveClock) *chainView {
	c := &chainView{node: n, want: want, downWait: nodeDownWait}
	c.fetchInfo = c.fetch
	c.info.TTL, c.info.Clock = checkTTL, clk
	c.minStack.TTL, c.minStack.Clock = cacheTTL, clk
	c.moved.clk = clk
	return c
}

// check confirms, from a cached /v2/info, that the node is a testnet with
// the expected chain id.
func (c *chainView) check(ctx context.Context) error {
	ci, err := c.getInfo(ctx)
	if err != nil {
		return failf(ReasonNodeUnavailable, err, "the Stacks node is unavailable; try again shortly")
	}
	return c.allowed(ci.chainID)
}

// nodeDownWait is how long a drip or a readiness check waits for the
// node's info once the last read of it failed, rather than the read's whole
// timeout: a replica cut from its node says "unavailable" at once, and the
// read, shared and detached, goes on to serve whoever asks after it.
const nodeDownWait = 2 * time.Second

// getInfo is the cached /v2/info, read if stale, waiting at most
// nodeDownWait for the read while the node is failing.
func (c *chainView) getInfo(ctx context.Context) (chainInfo, error) {
	if c.info.LastErr() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.downWait)
		defer cancel()
	}
	return c.info.Get(ctx, c.fetchInfo)
}

// allowed refuses mainnet and any chain id but the configured one.
func (c *chainView) allowed(id uint32) error {
	if id == stacks.ChainIDMainnet {
		return failf(ReasonDisabled, nil, "the faucet is not available: the node is on mainnet")
	}
	if want := c.want; want != 0 && id != want {
		return failf(ReasonDisabled, nil, "the faucet is not available: the node reports chain id %d, expected %d", id, want)
	}
	return nil
}

// fetch reads the chain id and tip from the node.
func (c *chainView) fetch(ctx context.Context) (chainInfo, error) {
	info, err := c.node.Info(ctx)
	if err != nil {
		return chainInfo{}, err
	}
	return chainInfo{chainID: info.NetworkID, height: info.StacksTipHeight}, nil
}

// id is the chain id transactions are signed for: the node's, or the
// testnet's before the first read.
func (c *chainView) id() uint32 {
	if id := c.info.Peek().chainID; id != 0 {
		return id
	}
	return stacks.ChainIDTestnet
}

// tip is the newest height the engine has seen.
func (c *chainView) tip() uint64 { return c.info.Peek().height }

// stackingMinimum is PoX's min_amount_ustx.
func (c *chainView) stackingMinimum(ctx context.Context) (uint64, error) {
	return c.minStack.Get(ctx, func(ctx context.Context) (uint64, error) {
		p, err := c.node.PoX(ctx)
		if err != nil {
			return 0, err
		}
		if p.MinAmountUstx == 0 {
			return 0, errors.New("node reports min_amount_ustx 0")
		}
		return p.MinAmountUstx, nil
	})
}
