// Package faucet is the dispensing engine: a pool of sending keys with their
// own nonce ledgers (keypool.go), the one function that places a transaction
// (place.go), and the policies on top of it: single drips, send-many batches
// (batch.go), treasury refills (treasury.go) and nonce repair (repair.go).
// Who may drip and how often is decided before it (package guard). It talks
// to the Stacks node only through NodeClient.
package faucet

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// Faucet dispenses STX. Safe for concurrent use.
type Faucet struct {
	cfg  Config
	memo stacks.Memo
	log  *slog.Logger
	// pool owns the sending keys and their nonces (keypool.go).
	pool *keyPool
	// tokens are the SIP-010 tokens it drips beside STX (tokens.go).
	tokens *tokens
	// journal records every transaction before it is sent (place.go).
	journal *journal.Journal

	// chain is the node's chain id and tip; price prices transactions;
	// clock is the chain's pace as the poll loop sees it.
	chain *chainView
	price *pricer
	clock *blockClock

	history historyWriter
	// treasury is nil unless Config.Treasury is set (treasury.go).
	treasury *treasury
	// onRefillRecorded, when set (tests only), is called once a refill is
	// in the ledger, before it is broadcast.
	onRefillRecorded func(PendingTx)
	// fates remembers txids that were replaced or dropped, for the drip
	// status endpoint.
	fates txFates
	// batch is nil unless Config.Batching.Max ≥ 2 (batch.go).
	batch *batcher
	// The engine's parts, each in a file of its name: keeping the keys'
	// accounts in step with the node and the journal, placing
	// transactions, the poll loop, repairs and readiness.
	accounts  *accounts
	placer    *placer
	poller    *poller
	repairs   *repairer
	readiness *readiness
}

// accounts keeps each key's view of its account in step with the node
// (syncs) and the journal (loads, ownership): accounts.go.
type accounts struct{ f *Faucet }

// placer is the one path of every transaction (place.go).
type placer struct{ f *Faucet }

// repairer resolves transactions in doubt and unsticks nonces (repair.go).
type repairer struct{ f *Faucet }

// New validates cfg and builds an engine. Call Run to keep it in sync.
func New(cfg Config) (*Faucet, error) {
	cfg.setDefaults()
	if len(cfg.Keys) == 0 {
		return nil, errors.New("faucet: no keys")
	}
	if cfg.Node == nil {
		return nil, errors.New("faucet: no node client")
	}
	if cfg.Fees.Min > cfg.Fees.Max {
		return nil, fmt.Errorf("faucet: fee min %d exceeds fee max %d", cfg.Fees.Min, cfg.Fees.Max)
	}
	if cfg.ChainID == stacks.ChainIDMainnet {
		return nil, errors.New("faucet: chain id 1 is mainnet; the faucet is testnet only")
	}
	memo, err := stacks.NewMemo(cfg.Amounts.Memo)
	if err != nil {
		return nil, fmt.Errorf("faucet: %w", err)
	}
	f := &Faucet{cfg: cfg, memo: memo, log: cfg.Logger, journal: journal.New(cfg.State.Journal, cfg.Now)}
	f.accounts, f.placer, f.repairs = &accounts{f}, &placer{f}, &repairer{f}
	f.poller = &poller{f: f, sent: make(chan struct{}, 1), nodeWatch: nodeWatch{log: cfg.Logger, now: cfg.Now}}
	f.readiness = &readiness{f: f}
	f.history = historyWriter{queue: make(chan DripRecord, 4096), store: cfg.State.History, log: cfg.Logger}
	f.chain, f.price, f.clock = newChainView(&f.cfg), newPricer(&f.cfg), &blockClock{now: cfg.Now}
	if err := f.setupTreasury(); err != nil {
		return nil, err
	}
	// After the treasury, which fills the tokens' refill defaults.
	if f.tokens, err = newTokens(f.cfg.Tokens, cfg.Logger); err != nil {
		return nil, fmt.Errorf("faucet: %w", err)
	}
	// Unless replicas share the store this process is the only writer:
	// every key is ours from the start (its journal loads on first use).
	f.pool = newKeyPool(cfg.Keys, cfg.Refills.Treasury, !cfg.State.Shared, cfg.Timing.MaxInFlight, cfg.Fees.Reserve)
	b, err := cfg.Batching.Resolve()
	if err != nil {
		return nil, fmt.Errorf("faucet: %w", err)
	}
	f.cfg.Batching = b
	if b.Max >= 2 {
		f.batch = &batcher{f: f, max: b.Max, window: b.Window}
	}
	return f, nil
}

// JournalKeys lists the keys the engine sends with, as the journal and its
// ownership name them: the distributors, then the treasury if any.
func (f *Faucet) JournalKeys() []string {
	all := f.pool.all()
	out := make([]string, len(all))
	for i, k := range all {
		out[i] = k.addr.String()
	}
	return out
}

// Addresses lists the faucet's sending addresses.
func (f *Faucet) Addresses() []string {
	out := make([]string, len(f.pool.keys))
	for i, k := range f.pool.keys {
		out[i] = k.addr.String()
	}
	return out
}

// Request is one drip, already admitted (checks and rate limits are the
// caller's): whom to pay and which amount.
type Request struct {
	Recipient stacks.Principal
	// Asset is what to pay; the zero value is STX.
	Asset Asset
	// Stacking asks for the stacking amount instead of the default one
	// (STX only).
	Stacking bool
	// Amount, when not 0, is what to pay in the asset's base units instead
	// of its configured drip: the HTTP layer's budget may scale a drip, a
	// sign-in tier multiply it.
	Amount uint64
}

// Result describes the broadcast transaction.
type Result struct {
	TxID  stacks.TxID
	TxRaw []byte
	Asset Asset
	// Amount is in the asset's units: µSTX, or the token's base units.
	Amount   uint64
	Fee      uint64
	Nonce    uint64
	Sender   stacks.Address
	Stacking bool
	// Batch is the number of drips the transaction pays when it is a
	// send-many call (Fee is then this drip's share); 0 for a transfer.
	Batch int
	// InDoubt: the node may or may not have taken the transaction (its
	// answer was lost). The engine keeps its bytes and rebroadcasts them
	// until the nonce confirms, so the transfer is still delivered.
	InDoubt bool
	// rawHex is TxRaw in hex, encoded once for every drip a call pays.
	rawHex *rawHex
}

type rawHex struct {
	once sync.Once
	s    string
}

// TxRawHex is TxRaw in hex. The drips of one send-many call share it: a
// call of 200 recipients is some 26 kB of hex, and each drip answers
// with it.
func (r *Result) TxRawHex() string {
	if r.rawHex == nil {
		return hex.EncodeToString(r.TxRaw)
	}
	r.rawHex.once.Do(func() { r.rawHex.s = hex.EncodeToString(r.TxRaw) })
	return r.rawHex.s
}

// Drip sends one transfer to req.Recipient. It answers once the node has
// accepted the transaction into its mempool, not when it is mined. A request
// yields at most one accepted transaction.
func (f *Faucet) Drip(ctx context.Context, req Request) (*Result, error) {
	if req.Recipient.Address.IsMainnet() {
		return nil, failf(ReasonRejected, nil, "recipient is a mainnet address")
	}
	result, err := f.checkedSend(ctx, req)
	if err != nil {
		return nil, err
	}
	result.Stacking = req.Stacking
	return result, nil
}

// RecordOf is the history record of a drip's outcome at at: res when it was
// sent, else err's reason.
func RecordOf(at time.Time, req Request, res *Result, err error) DripRecord {
	d := DripRecord{At: at, Recipient: req.Recipient.String(), Asset: req.Asset.OrSTX(), Stacking: req.Stacking}
	if res != nil {
		d.Amount, d.Fee, d.TxID, d.Sender, d.Nonce, d.Outcome = res.Amount, res.Fee, res.TxID.String(), res.Sender.String(), res.Nonce, OutcomeSent
		d.Batch = res.Batch
		return d
	}
	d.Outcome = string(ReasonOf(err))
	if d.Outcome == "" {
		d.Outcome = "internal"
	}
	return d
}

// Record writes an answered drip to the history; a failed write is logged,
// never turned into a failed drip (the transfer has happened or not
// already).
func (f *Faucet) Record(ctx context.Context, d DripRecord) { f.history.record(ctx, d) }

// storeFailure turns a store error into the drip error users see.
func storeFailure(err error, what string) *Error {
	return failf(ReasonStoreUnavailable, fmt.Errorf("%s: %w", what, err), "the faucet's state store is unavailable; try again shortly")
}

func (f *Faucet) checkedSend(ctx context.Context, req Request) (*Result, error) {
	if err := f.chain.check(ctx); err != nil {
		return nil, err
	}
	if !req.Asset.IsSTX() {
		tok := f.tokens.byName(req.Asset)
		switch {
		case tok == nil:
			return nil, failf(ReasonRejected, nil, "unknown asset %q", string(req.Asset))
		case req.Stacking:
			return nil, failf(ReasonRejected, nil, "stacking drips are STX only")
		}
		return f.sendToken(ctx, tok, req.Recipient, req.Amount)
	}
	amount := req.Amount
	if amount == 0 {
		var err error
		if amount, err = f.amount(ctx, req.Stacking); err != nil {
			return nil, err
		}
	}
	if f.batch.batchable(req, amount) {
		return f.batch.submitBatched(ctx, req.Recipient)
	}
	return f.send(ctx, req.Recipient, amount)
}

// send pays amount to to in one token transfer.
func (f *Faucet) send(ctx context.Context, to stacks.Principal, amount uint64) (*Result, error) {
	return f.sendVia(ctx, f.placer.chooseDistributor(f.cfg.Timing.BusyWait), to, amount)
}

// sendVia is send with choose picking the key and nonce.
func (f *Faucet) sendVia(ctx context.Context, choose chooser, to stacks.Principal, amount uint64) (*Result, error) {
	chainID := f.chain.id()
	fee := f.price.transfer(ctx, to)
	return f.placeDrip(ctx, choose, placement{to: to, asset: AssetSTX, amount: amount, fee: fee,
		build: func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewTokenTransfer(stacks.TransferParams{
				Recipient: to, Amount: amount, Nonce: nonce, Fee: fee, Memo: f.memo, ChainID: chainID,
			}, key)
		}})
}

// placeDrip places one drip on a distributor choose picks (the
// least-loaded one that can pay it). A key cannot pay itself (the node
// refuses an STX transfer to its sender, the token contract one to its
// sender), so such keys are skipped.
func (f *Faucet) placeDrip(ctx context.Context, choose chooser, pl placement) (*Result, error) {
	pl.choose, pl.excluded = choose, map[*keyState]bool{}
	for _, k := range f.pool.keys {
		if !pl.to.IsContract() && pl.to.Address == k.addr {
			pl.excluded[k] = true
			pl.lastErr = failf(ReasonRejected, nil, "the recipient is one of the faucet's own addresses")
		}
	}
	done, err := f.placer.place(ctx, pl)
	if err != nil {
		return nil, err
	}
	return f.placedResult(done, pl.amount), nil
}

// amount is the drip size for the tier.
func (f *Faucet) amount(ctx context.Context, stacking bool) (uint64, error) {
	if !stacking {
		return f.cfg.Amounts.Default, nil
	}
	if f.cfg.Amounts.Stacking > 0 {
		return f.cfg.Amounts.Stacking, nil
	}
	minAmount, err := f.chain.stackingMinimum(ctx)
	if err != nil {
		return 0, failf(ReasonStackingUnavailable, err, "the stacking amount is unavailable (no PoX information from the node); try again shortly")
	}
	amt, ok := padPercent(minAmount, *f.cfg.Amounts.StackingPaddingPercent)
	if !ok {
		return 0, failf(ReasonStackingUnavailable, nil, "the stacking amount overflows")
	}
	return amt, nil
}

// padPercent is ceil(v × (100+pct) / 100) without overflow.
func padPercent(v, pct uint64) (uint64, bool) {
	hi, lo := bits.Mul64(v, 100+pct)
	if hi >= 100 {
		return 0, false
	}
	q, r := bits.Div64(hi, lo, 100)
	if r != 0 {
		q++
	}
	return q, q != 0 || v == 0
}
