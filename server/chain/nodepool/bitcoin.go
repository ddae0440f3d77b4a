package nodepool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// DefaultBTCMaxLag is how many blocks a Bitcoin node may trail the best
// tip and still serve reads: peers pass a block on in seconds, so a node
// two behind is syncing, cut off or on a fork of its own.
const DefaultBTCMaxLag uint64 = 2

// BTCConfig configures a BTCPool. Zero fields take the defaults.
type BTCConfig struct {
	// Clients are the nodes, in the order of preference among equals.
	Clients []*btcnode.Client
	// Chains, when set, are the chains a node may report (e.g. testnet3
	// and testnet4 for --btc-network testnet); a node on another is out of
	// rotation. The first node to answer pins the chain and its genesis
	// block either way: two signets share a name, not a genesis.
	Chains        []btcnode.Chain
	MaxLag        uint64 // DefaultBTCMaxLag when 0
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	MaxBackoff    time.Duration
	Logger        *slog.Logger
	// Clock reads the time and paces the probes and hedged reads; the
	// real clock when nil.
	Clock clock.WithTicker
}

// BTCPool is the Bitcoin node RPC of the BTC faucet over several nodes.
// It is safe for concurrent use and has the node client's methods that
// the BTC payer, its chain follower and the balance endpoint call.
type BTCPool struct {
	*group[*btcnode.Client]
}

// NewBTC returns a pool over cfg.Clients; Run must run for probes, though
// reads and broadcasts work without it.
func NewBTC(cfg BTCConfig) (*BTCPool, error) {
	cfg.MaxLag = settings.OrDefault(cfg.MaxLag, DefaultBTCMaxLag)
	rpc := &bitcoinRPC{chains: cfg.Chains, genesis: map[*btcnode.Client]string{}}
	g, err := newGroup("bitcoin", chainRPC[*btcnode.Client](rpc), cfg.Clients, tuning{
		maxLag: cfg.MaxLag, probeInterval: cfg.ProbeInterval, probeTimeout: cfg.ProbeTimeout,
		maxBackoff: cfg.MaxBackoff, clock: cfg.Clock,
	}, cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &BTCPool{group: g}, nil
}

// Run probes the nodes until ctx ends.
func (p *BTCPool) Run(ctx context.Context) error { return p.run(ctx, nil) }

// RequireTestChain reads the best node's chain, refusing mainnet.
func (p *BTCPool) RequireTestChain(ctx context.Context) (btcnode.Chain, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (btcnode.Chain, error) { return c.RequireTestChain(ctx) })
}

// BlockCount reads the best node's tip height.
func (p *BTCPool) BlockCount(ctx context.Context) (int64, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (int64, error) {
		h, err := c.BlockCount(ctx)
		if err == nil && h >= 0 {
			p.observe(c, uint64(h), "")
		}
		return h, err
	})
}

// BlockHash reads the hash of the best node's main-chain block at height.
func (p *BTCPool) BlockHash(ctx context.Context, height int64) (string, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (string, error) { return c.BlockHash(ctx, height) })
}

// Block reads a block from the best node.
func (p *BTCPool) Block(ctx context.Context, hash string) (*btcnode.Block, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (*btcnode.Block, error) { return c.Block(ctx, hash) })
}

// RawTransaction looks a transaction up on the best node.
func (p *BTCPool) RawTransaction(ctx context.Context, txid string) (*btcnode.Tx, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (*btcnode.Tx, error) { return c.RawTransaction(ctx, txid) })
}

// BlockHeight asks the best node for the height of a block.
func (p *BTCPool) BlockHeight(ctx context.Context, hash string) (int64, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (int64, error) { return c.BlockHeight(ctx, hash) })
}

// EstimateFee asks the best node for a fee rate.
func (p *BTCPool) EstimateFee(ctx context.Context, confTarget int) (*btcnode.FeeEstimate, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (*btcnode.FeeEstimate, error) {
		return c.EstimateFee(ctx, confTarget)
	})
}

// MempoolSpends lists which of outs the best node's mempool spends.
func (p *BTCPool) MempoolSpends(ctx context.Context, outs []btcnode.OutPoint) (map[btcnode.OutPoint]string, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (map[btcnode.OutPoint]string, error) {
		return c.MempoolSpends(ctx, outs)
	})
}

// AddressBalance reads an address's confirmed balance from the best node.
func (p *BTCPool) AddressBalance(ctx context.Context, address string) (int64, error) {
	return read(ctx, p.group, func(ctx context.Context, c *btcnode.Client) (int64, error) { return c.AddressBalance(ctx, address) })
}

// SendRawTransaction posts rawTx to every node in rotation at once and
// returns the txid as soon as one accepts it. Only when none does is the
// answer an error: a node's verdict when one gave it ("already in the
// mempool" or "already in the chain" first: the payer counts those as
// sent), else the last node's failure.
func (p *BTCPool) SendRawTransaction(ctx context.Context, rawTx []byte) (string, error) {
	txid, err := p.broadcast(ctx, func(ctx context.Context, c *btcnode.Client) (string, error) {
		return c.SendRawTransaction(ctx, rawTx)
	})
	return txid, err
}

// bitcoinRPC adapts the group to the Bitcoin node client.
type bitcoinRPC struct {
	chains []btcnode.Chain // accepted; any when empty

	mu      sync.Mutex
	chain   btcnode.Chain // pinned by the first answer
	pinned  string        // genesis hash pinned by the first answer
	genesis map[*btcnode.Client]string
}

func (b *bitcoinRPC) probe(ctx context.Context, c *btcnode.Client) (uint64, string, error) {
	info, err := c.BlockchainInfo(ctx)
	if err != nil {
		return 0, "", err
	}
	genesis, err := b.genesisOf(ctx, c)
	if err != nil {
		return 0, "", err
	}
	tip := uint64(max(info.Blocks, 0))
	return tip, b.check(info, genesis), nil
}

// genesisOf reads a node's genesis block hash once.
func (b *bitcoinRPC) genesisOf(ctx context.Context, c *btcnode.Client) (string, error) {
	b.mu.Lock()
	g, ok := b.genesis[c]
	b.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := c.BlockHash(ctx, 0)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.genesis[c] = g
	b.mu.Unlock()
	return g, nil
}

// check returns why a node cannot serve the pool's chain, or "".
func (b *bitcoinRPC) check(info *btcnode.BlockchainInfo, genesis string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case info.Chain == "" || info.Chain == btcnode.ChainMain:
		return fmt.Sprintf("reports chain %q, not a test chain", info.ChainName)
	case len(b.chains) > 0 && !slices.Contains(b.chains, info.Chain):
		return fmt.Sprintf("reports chain %s, not the faucet's network", info.Chain)
	case b.chain == "":
		b.chain, b.pinned = info.Chain, genesis
	case info.Chain != b.chain:
		return fmt.Sprintf("reports chain %s, not %s", info.Chain, b.chain)
	case genesis != b.pinned:
		return "has another genesis block: another chain"
	}
	if info.InitialBlockDownload {
		return "is in its initial block download"
	}
	return ""
}

func (*bitcoinRPC) unavailable(err error) bool { return btcnode.IsUnavailable(err) }

// refusal ranks a node's verdict on a transaction; a node that already
// has it ranks above any other, so that one lagging node's "missing
// inputs" does not hide another's "already in the mempool".
func (*bitcoinRPC) refusal(err error) int {
	var rpc *btcnode.RPCError
	switch {
	case !errors.As(err, &rpc) || btcnode.IsUnavailable(err):
		return 0
	case btcnode.IsAlreadyInMempool(err) || btcnode.IsAlreadyInChain(err):
		return 2
	default:
		return 1
	}
}

func (*bitcoinRPC) cut(err error) error {
	return &btcnode.TransportError{Client: "btcnode", Call: btcnode.CallSendRawTx, Err: err}
}

func (*bitcoinRPC) failureReason(err error) string {
	f := failureOf(err)
	f.warmup = btcnode.IsInWarmup(err)
	var ae *btcnode.AuthError
	if f.auth = errors.As(err, &ae); f.auth {
		f.status = ae.StatusCode
	}
	return f.reason("JSON-RPC")
}
