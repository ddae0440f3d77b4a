// Package faucet is the dispensing engine: a pool of sending keys with their
// own nonce ledgers (keypool.go), the one function that places a transaction
// (place.go), and the policies on top of it: single drips (drip.go),
// send-many batches (batcher.go), treasury refills (treasury.go, refill.go)
// and nonce repair (repair.go), moved block by block by the poll loop
// (poller.go). Who may drip and how often is decided before it (package
// guard). It talks to the Stacks node only through NodeClient, and reads
// the time only from Config.Clock.
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
//
// It is the one holder of the whole engine: it builds the parts, each
// given only what it uses, and answers the exported API from them. The
// parts reach one another through small interfaces their consumer names
// (keyPreparer, keyKeeper, txPlacer, doubtResolver, …), the way a
// loop is kept apart from the state it steps: the poller is the loop, the
// accounts, placer, repairer, treasury and batcher the steps.
type Faucet struct {
	cfg Config
	log *slog.Logger
	// pool owns the sending keys and their nonces (keypool.go).
	pool *keyPool
	// tokens are the SIP-010 tokens it drips beside STX (tokens.go).
	tokens *tokens
	// journal records every transaction before it is sent (place.go).
	journal *journal.Journal

	// chain is the node's chain id and tip; price prices transactions;
	// pace is the chain's pace as the poll loop sees it.
	chain *chainView
	price *pricer
	pace  *blockClock
	bcast *broadcaster

	history *historyWriter
	// fates remembers txids that were replaced or dropped, for the drip
	// status endpoint.
	fates *txFates
	// The engine's parts, each in a file of its name: keeping the keys'
	// accounts in step with the node and the journal, turning drips into
	// placements, placing transactions, the poll loop, repairs and
	// readiness. treasury is nil unless Config.Refills.Treasury is set,
	// batch unless Config.Batching.Max ≥ 2.
	accounts  *accounts
	drips     *dripper
	placer    *placer
	poller    *poller
	repairs   *repairer
	readiness *readiness
	treasury  *treasury
	batch     *batcher
}

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
	refills, err := resolveTreasury(&cfg)
	if err != nil {
		return nil, err
	}
	refillMemo, err := stacks.NewMemo(RefillMemo)
	if err != nil {
		return nil, fmt.Errorf("faucet: %w", err)
	}
	// After the treasury, which fills the tokens' refill defaults.
	toks, err := newTokens(cfg.Tokens, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("faucet: %w", err)
	}
	if cfg.Batching, err = cfg.Batching.Resolve(); err != nil {
		return nil, fmt.Errorf("faucet: %w", err)
	}
	clk, t := cfg.Clock, cfg.Timing
	f := &Faucet{cfg: cfg, log: cfg.Logger, tokens: toks, journal: journal.New(cfg.State.Journal, clk),
		chain: newChainView(cfg.Node, cfg.ChainID, t.ChainCheckInterval, t.CacheTTL, clk),
		price: newPricer(cfg.Node, cfg.Fees, t.CacheTTL, clk, cfg.Logger),
		pace:  &blockClock{clk: clk}, bcast: newBroadcaster(cfg.Node, clk), fates: &txFates{},
		history: &historyWriter{queue: make(chan DripRecord, 4096), store: cfg.State.History, log: cfg.Logger},
		// Unless replicas share the store this process is the only
		// writer: every key is ours from the start (its journal loads on
		// first use).
		pool: newKeyPool(cfg.Keys, cfg.Refills.Treasury, !cfg.State.Shared, t.MaxInFlight, cfg.Fees.Reserve, clk),
	}
	f.wire(memo, refillMemo, refills)
	return f, nil
}

// wire builds the parts of f, each from what it uses. The accounts and
// the repairer use each other (a load resolves the entries in doubt, a
// repair resyncs after BadNonce): the accounts are built first and given
// the repairer once it exists, before anything runs.
func (f *Faucet) wire(memo, refillMemo stacks.Memo, refills []refillRule) {
	cfg, clk, log := &f.cfg, f.cfg.Clock, f.log
	sent := make(chan struct{}, 1)
	f.accounts = &accounts{node: cfg.Node, pool: f.pool, journal: f.journal, chain: f.chain, tokens: f.tokens,
		dryRecover: satAdd(cfg.Amounts.Default, cfg.Fees.Max), reserve: cfg.Fees.Reserve, clk: clk, log: log}
	f.placer = &placer{pool: f.pool, journal: f.journal, keys: f.accounts, chain: f.chain, send: f.bcast, clk: clk,
		sent: sent, maxAttempts: cfg.Timing.MaxAttempts, log: log}
	f.repairs = &repairer{pool: f.pool, journal: f.journal, send: f.bcast, placer: f.placer, keys: f.accounts,
		price: f.price, chain: f.chain, pace: f.pace, fates: f.fates, memo: memo, feeMax: cfg.Fees.Max,
		stuckBlocks: cfg.Timing.StuckBlocks, clk: clk, log: log}
	f.accounts.doubt = f.repairs
	single := &distributorChoice{pool: f.pool, prep: f.accounts, wait: cfg.Timing.BusyWait}
	f.drips = &dripper{placer: f.placer, price: f.price, chain: f.chain, keys: f.pool.keys, memo: memo,
		tokenMemo: []byte(cfg.Amounts.Memo), single: single, log: log}
	f.readiness = &readiness{chain: f.chain, pool: f.pool, accounts: f.accounts,
		need: satAdd(cfg.Amounts.Default, cfg.Fees.Min), dripCost: DripCost(cfg.Amounts.Default, cfg.Fees.Fallback), log: log}
	if p, ok := cfg.State.History.(storePinger); ok && cfg.State.Shared {
		f.readiness.store = p
	}
	f.poller = &poller{clk: clk, idle: cfg.Timing.PollInterval, busyEvery: cfg.Timing.BusyPollInterval, tipWait: tipReadWait, sent: sent,
		pool: f.pool, chain: f.chain, pace: f.pace, accounts: f.accounts, repairs: f.repairs, tokens: f.tokens,
		tokenNode: cfg.Node, ready: f.readiness, watch: nodeWatch{log: log, clk: clk}, log: log}
	if cfg.Refills.Treasury != nil {
		f.treasury = &treasury{key: f.pool.treasury, pool: f.pool, accounts: f.accounts, repairs: f.repairs,
			placer: f.placer, price: f.price, chain: f.chain, node: cfg.Node, journal: f.journal, tokens: f.tokens,
			history: f.history, reserve: cfg.Fees.Reserve, feeMax: cfg.Fees.Max, memo: refillMemo, rules: refills,
			dry: map[Asset]*dryState{}, warnedAt: map[Asset]uint64{}, log: log}
		f.poller.treasury = f.treasury
	}
	if b := cfg.Batching; b.Max >= 2 {
		f.batch = &batcher{max: b.Max, window: b.Window, amount: cfg.Amounts.Default, memo: []byte(cfg.Amounts.Memo),
			contract: b.Contract, busyWait: cfg.Timing.BusyWait, clk: clk, pace: f.pace, pool: f.pool, prep: f.accounts,
			single: single, lone: &distributorChoice{pool: f.pool, prep: f.accounts, keep: f.pool.keptSlots()},
			singles: f.drips, placer: f.placer, price: f.price, chain: f.chain, log: log}
		f.poller.queue = f.batch
	}
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

// JournalKeyGroups is JournalKeys by kind: the sending keys, then the
// treasury when there is one. Replicas share each group out on its own.
func (f *Faucet) JournalKeyGroups() [][]string {
	groups := [][]string{f.Addresses()}
	if t := f.pool.treasury; t != nil {
		groups = append(groups, []string{t.addr.String()})
	}
	return groups
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
		return f.drips.token(ctx, tok, req.Recipient, req.Amount)
	}
	amount := req.Amount
	if amount == 0 {
		var err error
		if amount, err = f.amount(ctx, req.Stacking); err != nil {
			return nil, err
		}
	}
	var res *Result
	var err error
	if f.batch.batchable(req, amount) {
		res, err = f.batch.submitBatched(ctx, req.Recipient)
	} else {
		res, err = f.drips.transfer(ctx, f.drips.single, req.Recipient, amount)
	}
	if err != nil {
		return nil, err
	}
	res.Stacking = req.Stacking
	return res, nil
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
