package btcfaucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/btcsuite/btcd/wire"
	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/internal/ttlcache"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// FeeRateTTL is how long the node's fee estimate is reused: one estimate
// per payout would put a node round trip on every drip, for a figure that
// moves per block.
const FeeRateTTL = 10 * time.Second

// Payout placement: the journal's crash-safety rule (package journal), for
// UTXOs. A payout is signed, recorded (state broadcasting) and only then
// sent; a crash at any point leaves either no trace or recorded bytes that
// Resume sends again byte for byte (the node answers "already have it" or
// "already in the chain"). Coins an in-flight payout spends are reserved,
// so no two payouts spend one coin; the change of an in-flight payout may
// be spent by the next one, up to MaxChain unconfirmed ancestors (Bitcoin
// Core's mempool limit of 25).

// SettleDepth is how deep a payout's block must be before the payout is
// forgotten. Until then a reorg that drops the block makes the payout
// unconfirmed again, and it is sent again, byte for byte: a drip the
// faucet answered is paid even when the block that paid it is orphaned.
const SettleDepth = 6

// MaxChain is the longest chain of unconfirmed payouts: a payout spending
// in-flight change has one more ancestor than its parent.
const MaxChain = 25

// Node is what the payout engine asks of the Bitcoin node.
type Node interface {
	BlockSource
	SendRawTransaction(ctx context.Context, raw []byte) (string, error)
	EstimateFee(ctx context.Context, confTarget int) (*btcnode.FeeEstimate, error)
	// MempoolSpends lists which of the outputs mempool transactions spend.
	MempoolSpends(ctx context.Context, outs []btcnode.OutPoint) (map[btcnode.OutPoint]string, error)
}

var _ Node = (*btcnode.Client)(nil)

// Fees bound the fee rate, in sat/vB: the node's estimate clamped to
// [Min, Max], or Fallback when it has none.
type Fees struct {
	Min, Max, Fallback int64
}

// Errors of Pay.
var (
	// ErrNoCoins: not enough mature, unreserved coins for the payouts.
	ErrNoCoins = errors.New("not enough spendable coins")
	// ErrBusy: the coins there are sit at the end of chains of MaxChain
	// unconfirmed payouts; the next block frees them.
	ErrBusy = errors.New("every spendable coin is at the unconfirmed-chain limit")
	// ErrRefused: the node refused the payout for good.
	ErrRefused = errors.New("the node refused the payout")
	// ErrNodeDown: the node could not be reached; the payout was surely
	// not sent (the connection was refused) and is not recorded.
	ErrNodeDown = errors.New("the Bitcoin node is unreachable")
)

// Payer places payouts from one key. Safe for concurrent use; placements
// are serialised (coin choice and reservation must be atomic).
type Payer struct {
	key     *bitcoin.PrivateKey
	addr    string // the key's address: its journal key
	node    Node
	chain   *chainFollower
	journal *journal.Journal
	fees    Fees
	clock   clock.PassiveClock
	// estimate caches the node's estimate in sat/vB; 0 when it has none.
	estimate ttlcache.Value[int64]

	mu       sync.Mutex
	log      *slog.Logger
	inflight map[string]*PayoutRecord
	// spentElsewhere are chain coins that a mempool transaction the payer
	// did not record spends (its own payouts before a restart without its
	// records, or another wallet of the key), and unspentAt the coins the
	// node said are free, each at the tip it was asked at: a coin is asked
	// about at most once a block, and skipped until a block shows where
	// it went.
	spentElsewhere, unspentAt map[wire.OutPoint]int64
	// maxTip is the highest tip the chain view has reached.
	maxTip int64
	// beforeSend, when set (tests), runs after the record and before the
	// broadcast; an error stops there, as a crash would.
	beforeSend func(PayoutRecord) error
}

// NewPayer builds a payer of key's coins found from height start on, its
// payouts recorded in store (nil: in memory), on clk (nil: the real
// clock).
func NewPayer(key *bitcoin.PrivateKey, node Node, store journal.Store, fees Fees, start int64, clk clock.PassiveClock) *Payer {
	return newPayer(key, node, store, fees, newChainFollower(node, key.Address().PkScript(), start, 0), clk)
}

// newPayer builds a payer on a chain view that may already be synced (the
// service keeps one across payers: a rescan from the start height can
// take long on signet).
func newPayer(key *bitcoin.PrivateKey, node Node, store journal.Store, fees Fees, chain *chainFollower, clk clock.PassiveClock) *Payer {
	if store == nil {
		store = journal.NewMemoryStore()
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	p := &Payer{key: key, addr: key.Address().String(), node: node, chain: chain,
		journal: journal.New(store, clk), fees: fees, clock: clk, log: slog.New(slog.DiscardHandler), inflight: map[string]*PayoutRecord{},
		spentElsewhere: map[wire.OutPoint]int64{}, unspentAt: map[wire.OutPoint]int64{}}
	p.estimate.TTL, p.estimate.Clock = FeeRateTTL, clk
	return p
}

// SetLogger sets where the payer reports what it decides on its own (fee
// bumps made or skipped); nil discards. By default nothing is logged.
func (p *Payer) SetLogger(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = l
}

// Resume loads the key's journal and sends every recorded payout again,
// byte for byte, then syncs: what a restarted faucet does before paying.
func (p *Payer) Resume(ctx context.Context) error {
	entries, err := p.journal.Load(ctx, p.addr)
	if err != nil {
		return fmt.Errorf("btc payer: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range entries {
		r, err := recordOf(e)
		if err != nil {
			return fmt.Errorf("btc payer: load the journal: %w", err)
		}
		p.inflight[r.TxID] = &r
	}
	if err := p.syncLocked(ctx); err != nil {
		return err
	}
	for _, r := range p.sortedInflight() {
		if r.MinedAt != 0 || r.OrphanedAt != 0 {
			continue // in a block already, kept only against a reorg; or its coins are gone
		}
		if err := p.resend(ctx, r); err != nil && !errors.Is(err, ErrRefused) {
			return fmt.Errorf("btc payer: resend %s: %w", r.TxID, err)
		}
	}
	return nil
}

// Sync reads new blocks and forgets the payouts they confirmed.
func (p *Payer) Sync(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncLocked(ctx)
}

func (p *Payer) syncLocked(ctx context.Context) error {
	res, err := p.chain.Sync(ctx)
	if err != nil {
		return err
	}
	tip := p.chain.Tip()
	for txid, r := range p.inflight {
		confirmed, lost := true, false
		var at int64
		for _, c := range r.Coins {
			cc, ok := p.chain.Coin(c.OutPoint)
			if !ok || cc.SpentBy != txid {
				confirmed = false
			} else {
				at = cc.SpentHeight
			}
			if ok && cc.SpentBy != "" && cc.SpentBy != txid {
				// Spent by another transaction: a version of this payout
				// (a fee bump, or the payout a bump replaced) confirmed
				// instead, and this one never can.
				lost = true
			}
		}
		switch {
		case confirmed && tip-at+1 < SettleDepth:
			r.MinedAt = at // kept: a reorg may still undo its block
			continue
		case !confirmed && !lost:
			if r.MinedAt != 0 {
				// Its block left the main chain: in flight again, and
				// sent again below.
				p.log.Warn("btc payout unconfirmed by a reorg; sending it again", "txid", txid, "was_at", r.MinedAt)
				r.MinedAt = 0
			}
			continue
		}
		if err := p.journal.Forget(ctx, p.addr, txid); err != nil {
			return fmt.Errorf("btc payer: forget settled %s: %w", txid, err)
		}
		delete(p.inflight, txid)
	}
	p.maxTip = max(p.maxTip, tip)
	if err := p.retireOrphans(ctx, tip); err != nil {
		return err
	}
	// Payouts in doubt (their broadcast's answer was lost) are sent again,
	// byte for byte, parents first; after a new block or a reorg, every
	// unconfirmed one is: a restarted node forgets its mempool, and a reorg
	// may have dropped a payout it does not take back.
	resendAll := res.Applied > 0 || res.Undone > 0
	for _, r := range p.sortedInflight() {
		if r.MinedAt == 0 && r.OrphanedAt == 0 && (resendAll || r.State == PayoutBroadcasting) {
			if err := p.resend(ctx, r); err != nil && !errors.Is(err, ErrRefused) && !errors.Is(err, ErrNodeDown) {
				return err
			}
		}
	}
	return nil
}

// Pay signs one transaction paying every payout, records it and sends it
// (send). It answers once the node holds it (or may hold it: a lost answer
// is success in doubt, never an error, since the recorded bytes are sent
// again until a block confirms them).
func (p *Payer) Pay(ctx context.Context, payouts []bitcoin.Payout) (*PayoutRecord, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var total int64
	for _, po := range payouts {
		total += po.Amount
	}
	rate := p.feeRate(ctx)
	var (
		sel   []bitcoin.Coin
		depth map[wire.OutPoint]int
	)
	for round := 0; ; round++ {
		var coins []bitcoin.Coin
		var err error
		if coins, depth, err = p.spendable(); err != nil {
			return nil, err
		}
		sel, err = bitcoin.SelectCoins(coins, total, rate, len(payouts))
		if err != nil {
			if errors.Is(err, bitcoin.ErrInsufficientFunds) {
				return nil, fmt.Errorf("btc payer: %w: %w", ErrNoCoins, err)
			}
			return nil, fmt.Errorf("btc payer: %w", err)
		}
		// A selection of free coins goes; one with a coin the mempool
		// spends is made again without it (a bounded number of times).
		if round >= maxSelectRounds || !p.dropSpentElsewhere(ctx, sel) {
			break
		}
	}
	tx, err := bitcoin.BuildPayout(bitcoin.BuildParams{Key: p.key, Coins: sel, Payouts: payouts, FeeRate: rate})
	if err != nil {
		return nil, fmt.Errorf("btc payer: %w", err)
	}
	rec := &PayoutRecord{TxID: tx.TxID().String(), Raw: tx.Raw(), Coins: tx.Coins(), Fee: tx.Fee()}
	for _, po := range payouts {
		rec.Outputs = append(rec.Outputs, Output{Address: po.Address.String(), Amount: po.Amount})
	}
	for _, c := range sel {
		rec.Depth = max(rec.Depth, depth[c.OutPoint])
	}
	rec.Depth++
	if i := tx.ChangeIndex(); i >= 0 {
		rec.Change = &bitcoin.Coin{OutPoint: wire.OutPoint{Hash: tx.TxID(), Index: uint32(i)}, Value: tx.Change(),
			PkScript: p.key.Address().PkScript()}
	}
	if err := p.send(ctx, rec, nil); err != nil {
		return nil, err
	}
	return rec, nil
}

// send places r through the journal, a replacement of old when old is not
// nil: recorded, then sent. Accepted or in doubt, it is in flight (a lost
// answer is success in doubt: the recorded bytes are sent again until a
// block confirms them). A refusal, or a connection refused at dial, leaves
// no trace: the journal forgot it and its coins are free again. A failed
// record (among others a replica that lost the key: journal.ErrNotOwner)
// sends nothing.
func (p *Payer) send(ctx context.Context, r *PayoutRecord, old *PayoutRecord) error {
	if old != nil {
		r.Replaces = old.TxID
	}
	e := r.entry(p.addr)
	var sent journal.Sent
	var err error
	if old == nil {
		sent, err = p.journal.Send(ctx, &e, p.chainFor(r))
	} else {
		sent, err = p.journal.Replace(ctx, old.entry(p.addr), &e, p.chainFor(r))
	}
	if err != nil {
		return fmt.Errorf("btc payer: record payout: %w", err)
	}
	r.State, r.SentAt, r.Replaces = e.State, e.SentAt, e.Replaces
	switch {
	case sent.Verdict != journal.NotSent:
		p.inflight[r.TxID] = r
		if errors.Is(sent.Err, errStopped) {
			return sent.Err // a test's crash: recorded, never sent
		}
		return nil
	case journal.NeverSent(sent.Err):
		return fmt.Errorf("btc payer: %w: %w", ErrNodeDown, sent.Err)
	}
	return fmt.Errorf("btc payer: %w: %w", ErrRefused, sent.Err)
}

// resend sends a recorded payout again, byte for byte (Resume, Sync). Its
// drips were answered, so it is never forgotten here: it stays recorded,
// its coins reserved, and is sent again after each block until one
// confirms it or a block confirms another spend of its coins (Sync sees
// that: a fee-bumped version, say); a fee refusal is BumpStuck's to cure.
func (p *Payer) resend(ctx context.Context, r *PayoutRecord) error {
	e := r.entry(p.addr)
	sent := p.journal.Resend(ctx, &e, p.chainFor(r))
	switch {
	case sent.Verdict == journal.Accepted:
		if r.State != PayoutPending {
			r.State = PayoutPending
			e.State = PayoutPending
			// A failed write leaves it "broadcasting" in the store: sent
			// again on resume, which the node answers "already have it".
			_ = p.journal.Update(context.WithoutCancel(ctx), e)
		}
		return nil
	case journal.NeverSent(sent.Err):
		return fmt.Errorf("btc payer: %w: %w", ErrNodeDown, sent.Err)
	case sent.Verdict == journal.InDoubt:
		return nil // sent again at every Sync until a block holds it
	}
	p.log.Warn("btc payout refused on resend; kept, and sent again after the next block", "txid", r.TxID, "err", sent.Err)
	return fmt.Errorf("btc payer: %w: %w", ErrRefused, sent.Err)
}

// chainFor is the journal's view of the node for r: behind the test hook
// when one is set.
func (p *Payer) chainFor(r *PayoutRecord) journal.Chain {
	c := btcChain{node: p.node}
	if p.beforeSend == nil {
		return c
	}
	hook := p.beforeSend
	return journal.Hooked{Chain: c, Before: func([]byte) error {
		if err := hook(*r); err != nil {
			return fmt.Errorf("%w: %w", errStopped, err)
		}
		return nil
	}}
}

// errStopped marks a send a test hook stopped, as a crash would.
var errStopped = errors.New("stopped before the send")

// btcChain is the journal's view of the Bitcoin node.
type btcChain struct{ node Node }

// Send submits raw; a node that has it already (in its mempool or chain)
// holds it.
func (c btcChain) Send(ctx context.Context, raw []byte) error {
	_, err := c.node.SendRawTransaction(ctx, raw)
	if btcnode.IsAlreadyInMempool(err) || btcnode.IsAlreadyInChain(err) {
		return nil
	}
	return err
}

// Judge: refused at dial, or refused by the node, it is not there; cut off
// or unanswered by a node that may have read it, it is in doubt.
func (btcChain) Judge(err error) journal.Verdict {
	switch {
	case journal.NeverSent(err):
		return journal.NotSent
	case btcnode.IsUnavailable(err) || journal.Cut(err):
		return journal.InDoubt
	}
	return journal.NotSent
}

// waitIdle returns once no call holds the payer: a Pay or BumpStuck under
// way has finished.
func (p *Payer) waitIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = len(p.inflight) // the lock is the point; this names what it guards
}

func (p *Payer) sortedInflight() []*PayoutRecord {
	out := make([]*PayoutRecord, 0, len(p.inflight))
	for _, r := range p.inflight {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *PayoutRecord) int {
		if a.Depth != b.Depth {
			return a.Depth - b.Depth
		}
		return a.SentAt.Compare(b.SentAt)
	})
	return out
}

// feeRate is the node's estimate for the next few blocks in sat/vB,
// clamped, or the fallback.
func (p *Payer) feeRate(ctx context.Context) int64 {
	rate := p.fees.Fallback
	est, err := p.estimate.Get(ctx, func(ctx context.Context) (int64, error) {
		e, err := p.node.EstimateFee(ctx, 6)
		if errors.Is(err, btcnode.ErrNoFeeEstimate) {
			return 0, nil // a fact worth caching: the fallback applies
		}
		if err != nil {
			return 0, err
		}
		return (e.SatPerKvB + 999) / 1000, nil
	})
	if err == nil && est > 0 {
		rate = est
	}
	return min(max(rate, p.fees.Min, bitcoin.MinFeeRate), max(p.fees.Max, p.fees.Min))
}

// InFlight counts the payouts not yet confirmed.
func (p *Payer) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.inflight {
		if r.MinedAt == 0 {
			n++
		}
	}
	return n
}
