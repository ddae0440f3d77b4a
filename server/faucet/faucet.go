// Package faucet is the dispensing engine: a pool of sending keys with their
// own nonce ledgers, drip amounts, fees, rate limits and repair of stuck nonces.
// It talks to the Stacks node only through NodeClient.
package faucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stxfaucet/faucet-operator/server/node"
	"github.com/stxfaucet/faucet-operator/server/stacks"
	"github.com/stxfaucet/faucet-operator/server/ttlcache"
)

// NodeClient is the node RPC the engine needs; *node.Client implements it.
type NodeClient interface {
	Info(ctx context.Context) (*node.Info, error)
	PoX(ctx context.Context) (*node.PoXInfo, error)
	Account(ctx context.Context, principal string) (*node.Account, error)
	Broadcast(ctx context.Context, rawTx []byte) (string, error)
	TransferFeeRate(ctx context.Context) (uint64, error)
	TransactionFeeEstimate(ctx context.Context, payload []byte, estimatedLen uint64) (*node.FeeEstimate, error)
}

// Defaults for Config fields left zero.
const (
	DefaultAmount          uint64 = 500_000_000 // 500 STX
	DefaultStackingPadding uint64 = 20          // percent above PoX min_amount_ustx
	DefaultMemo                   = "faucet"
	DefaultMaxInFlight            = 25 // the node's mempool chaining limit
	DefaultFeeMin          uint64 = 180
	DefaultFeeMax          uint64 = 100_000
	DefaultFeeFallback     uint64 = 1_000
	DefaultStuckBlocks     uint64 = 3
	DefaultMaxAttempts            = 4
)

// Config configures an engine. Zero values take the defaults above.
type Config struct {
	Keys []*stacks.PrivateKey
	Node NodeClient

	DefaultAmount          uint64 // µSTX per default drip
	StackingAmount         uint64 // fixed stacking drip; 0 = from PoX
	StackingPaddingPercent uint64 // added to min_amount_ustx; 0 = DefaultStackingPadding
	NoStackingPadding      bool   // use min_amount_ustx exactly
	Memo                   string

	FeeMin, FeeMax, FeeFallback uint64 // fee = node rate × length, clamped to [FeeMin, FeeMax]
	FeeReserve                  uint64 // µSTX a key keeps back beyond in-flight spends

	ChainID     uint32 // when set, refuse a node reporting another chain id
	MaxInFlight int    // per key
	MaxAttempts int    // node submissions per drip
	StuckBlocks uint64 // blocks without nonce progress before repair

	Limits   LimitsConfig
	Disabled bool // suspended: every drip answers ReasonDisabled

	// BusyWait is how long a drip may wait for a key's in-flight slot to free
	// up (at the next block) before failing with ReasonBusy; 0 fails at once.
	BusyWait time.Duration

	PollInterval       time.Duration // tip polling for syncs and repairs; default 1s
	ChainCheckInterval time.Duration // how long a chain-id check is trusted; default 30s
	CacheTTL           time.Duration // PoX and fee-rate cache; default 10s

	// Ledger, Limiter and History hold the engine's state; nil keeps it in
	// memory. Owner, when set, decides which keys this process may use
	// (several replicas on one shared store); nil owns every key.
	Ledger  Ledger
	Limiter Limiter
	History History
	Owner   KeyOwner

	// Treasury, when set, funds the distributor keys (Keys) and never pays
	// drips: a distributor whose available balance falls below RefillBelow
	// µSTX gets RefillAmount µSTX from it (see treasury.go). RefillBelow
	// defaults to DefaultRefillBelowDrips × (DefaultAmount+FeeFallback),
	// RefillAmount to DefaultRefillAmountFactor × RefillBelow; RefillAmount
	// must be at least RefillBelow.
	Treasury     *stacks.PrivateKey
	RefillBelow  uint64
	RefillAmount uint64

	// BatchMax, from 2 to MaxBatch, gathers default drips into send-many
	// calls of up to that many recipients (batch.go); 0 or 1 is off.
	// BatchWindow is the longest a drip waits for others (default
	// DefaultBatchWindow); BatchContract the send-many-memo contract
	// (zero = stacks.SendManyMemoTestnet).
	BatchMax      int
	BatchWindow   time.Duration
	BatchContract stacks.ContractID

	Logger *slog.Logger
	Now    func() time.Time
}

func (c *Config) setDefaults() {
	if c.DefaultAmount == 0 {
		c.DefaultAmount = DefaultAmount
	}
	if c.StackingPaddingPercent == 0 && !c.NoStackingPadding {
		c.StackingPaddingPercent = DefaultStackingPadding
	}
	if c.Memo == "" {
		c.Memo = DefaultMemo
	}
	if c.FeeMin == 0 {
		c.FeeMin = DefaultFeeMin
	}
	if c.FeeMax == 0 {
		c.FeeMax = max(DefaultFeeMax, c.FeeMin)
	}
	if c.FeeFallback == 0 {
		c.FeeFallback = DefaultFeeFallback
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.StuckBlocks == 0 {
		c.StuckBlocks = DefaultStuckBlocks
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.ChainCheckInterval <= 0 {
		c.ChainCheckInterval = 30 * time.Second
	}
	if c.CacheTTL <= 0 {
		c.CacheTTL = 10 * time.Second
	}
	if c.BatchWindow <= 0 {
		c.BatchWindow = DefaultBatchWindow
	}
	if c.Ledger == nil {
		c.Ledger = NewMemoryLedger()
	}
	if c.Limiter == nil {
		c.Limiter = NewMemoryLimiter()
	}
	if c.History == nil {
		c.History = NewMemoryHistory(DefaultMemoryHistorySize)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Faucet dispenses STX. Safe for concurrent use.
type Faucet struct {
	cfg  Config
	memo stacks.Memo
	keys []*keyState
	log  *slog.Logger

	chain   ttlcache.Value[chainInfo]
	pox     ttlcache.Value[uint64] // min_amount_ustx
	feeRate ttlcache.Value[uint64]

	pickMu sync.Mutex // serialises key choice + nonce allocation across keys
	rr     int        // round-robin start for ties
	// freed is closed (and replaced) whenever a sync may have freed in-flight
	// slots, waking drips that wait in BusyWait.
	freed   chan struct{}
	history historyWriter
	// onBusyWait, when set (tests only), is called each time a drip starts
	// waiting for a free slot: a synchronisation point.
	onBusyWait func()
	// treasury is nil unless Config.Treasury is set (treasury.go).
	treasury *treasury
	// onRefillRecorded, when set (tests only), is called once a refill is
	// in the ledger, before it is broadcast.
	onRefillRecorded func(PendingTx)
	// lastFee is the fee of the last drip, for the drips-left estimate.
	lastFee atomic.Uint64
	// fates remembers txids that were replaced or dropped, for the drip
	// status endpoint.
	fates txFates
	// batch is nil unless Config.BatchMax ≥ 2 (batch.go).
	batch *batcher
}

// chainInfo is what the engine needs from /v2/info.
type chainInfo struct {
	chainID uint32
	height  uint64
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
	if cfg.FeeMin > cfg.FeeMax {
		return nil, fmt.Errorf("faucet: fee min %d exceeds fee max %d", cfg.FeeMin, cfg.FeeMax)
	}
	if cfg.ChainID == stacks.ChainIDMainnet {
		return nil, errors.New("faucet: chain id 1 is mainnet; the faucet is testnet only")
	}
	memo, err := stacks.NewMemo(cfg.Memo)
	if err != nil {
		return nil, fmt.Errorf("faucet: %w", err)
	}
	f := &Faucet{cfg: cfg, memo: memo, log: cfg.Logger, freed: make(chan struct{})}
	f.history.queue = make(chan DripRecord, 4096)
	f.chain.TTL, f.pox.TTL, f.feeRate.TTL = cfg.ChainCheckInterval, cfg.CacheTTL, cfg.CacheTTL
	f.chain.Now, f.pox.Now, f.feeRate.Now = cfg.Now, cfg.Now, cfg.Now
	for _, k := range cfg.Keys {
		ks := newKeyState(k)
		// Without an owner this process is the only writer: every key is
		// ours from the start (its ledger loads on first use).
		ks.owned = cfg.Owner == nil
		f.keys = append(f.keys, ks)
	}
	if err := f.setupTreasury(); err != nil {
		return nil, err
	}
	if cfg.BatchMax < 0 || cfg.BatchMax > MaxBatch {
		return nil, fmt.Errorf("faucet: batch max %d out of range (2..%d, or 0 or 1 for off)", cfg.BatchMax, MaxBatch)
	}
	if cfg.BatchMax >= 2 {
		if f.cfg.BatchContract == (stacks.ContractID{}) {
			id, err := stacks.ParseContractID(stacks.SendManyMemoTestnet)
			if err != nil {
				return nil, fmt.Errorf("faucet: %w", err)
			}
			f.cfg.BatchContract = id
		}
		if f.cfg.BatchContract.Address.IsMainnet() {
			return nil, fmt.Errorf("faucet: batch contract %s is on mainnet; the faucet is testnet only", f.cfg.BatchContract)
		}
		f.batch = &batcher{max: cfg.BatchMax, window: cfg.BatchWindow}
	}
	return f, nil
}

// Addresses lists the faucet's sending addresses.
func (f *Faucet) Addresses() []string {
	out := make([]string, len(f.keys))
	for i, k := range f.keys {
		out[i] = k.addr.String()
	}
	return out
}

// Request is one drip.
type Request struct {
	Recipient stacks.Principal
	Stacking  bool
	// ClientIP is used for the per-IP limit; the zero Addr skips it.
	ClientIP netip.Addr
	// SkipIPLimit exempts the request from the per-IP limit (an API token
	// or an allow-listed network); ClientIP is still recorded.
	SkipIPLimit bool
	// Token, when set, is the API token the request carries: its quota is
	// charged and its per-address limit replaces the default one.
	Token *TokenQuota
}

// TokenQuota is an API token's allowance; it replaces the per-address limit
// for the token's drips.
type TokenQuota struct {
	Name       string
	Quota      Limit // all drips made with the token
	PerAddress Limit // drips per recipient address with the token
}

// Result describes the broadcast transaction.
type Result struct {
	TxID     stacks.TxID
	TxRaw    []byte
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
}

// Drip sends one transfer to req.Recipient. It answers once the node has
// accepted the transaction into its mempool, not when it is mined. A request
// yields at most one accepted transaction.
func (f *Faucet) Drip(ctx context.Context, req Request) (*Result, error) {
	if f.cfg.Disabled {
		return nil, failf(ReasonDisabled, nil, "the faucet is suspended")
	}
	if req.Recipient.Address.IsMainnet() {
		return nil, failf(ReasonRejected, nil, "recipient is a mainnet address")
	}
	// Limits first: a limited client learns that even while the node is down.
	res, wait, ok, err := f.cfg.Limiter.Reserve(ctx, f.cfg.Now(), f.buckets(req))
	if err != nil {
		return nil, storeFailure(err, "reserve rate-limit slots")
	}
	if !ok {
		return nil, &Error{Reason: ReasonRateLimited, Message: "Too many requests", RetryAfter: wait}
	}
	result, err := f.checkedSend(ctx, req)
	if err != nil {
		// Every error path of send leaves no transaction of this drip in
		// flight (a drip that may have been sent succeeds, InDoubt), so the
		// charge goes back. A failed release keeps it: the safe side.
		if rerr := f.cfg.Limiter.Release(context.WithoutCancel(ctx), res); rerr != nil {
			f.log.Warn("rate-limit release failed; the slot stays charged", "err", rerr)
		}
		f.record(ctx, req, nil, err)
		return nil, err
	}
	result.Stacking = req.Stacking
	f.record(ctx, req, result, nil)
	return result, nil
}

// record writes the drip's outcome to the history; a failed write is logged,
// never turned into a failed drip (the transfer has happened or not already).
func (f *Faucet) record(ctx context.Context, req Request, res *Result, err error) {
	d := DripRecord{At: f.cfg.Now(), Recipient: req.Recipient.String(), Stacking: req.Stacking, ClientBucket: ClientBucket(req.ClientIP)}
	if res != nil {
		d.Amount, d.Fee, d.TxID, d.Sender, d.Nonce, d.Outcome = res.Amount, res.Fee, res.TxID.String(), res.Sender.String(), res.Nonce, OutcomeSent
		d.Batch = res.Batch
	} else {
		d.Outcome = string(ReasonOf(err))
		if d.Outcome == "" {
			d.Outcome = "internal"
		}
	}
	f.queueHistory(ctx, d)
}

// queueHistory writes d to the history. While Run is under way a worker
// writes it off the request path; otherwise (or when its queue is full) the
// write happens here.
func (f *Faucet) queueHistory(ctx context.Context, d DripRecord) {
	if f.history.running.Load() {
		select {
		case f.history.queue <- d:
			return
		default:
		}
	}
	f.writeHistory(context.WithoutCancel(ctx), d)
}

func (f *Faucet) writeHistory(ctx context.Context, d DripRecord) {
	if herr := f.cfg.History.Record(ctx, d); herr != nil {
		f.log.Warn("drip history write failed", "txid", d.TxID, "err", herr)
	}
}

// historyWriter is the queue between drips and the history store.
type historyWriter struct {
	queue   chan DripRecord
	running atomic.Bool
}

// runHistory writes queued records until ctx ends, then flushes the queue.
func (f *Faucet) runHistory(ctx context.Context) {
	f.history.running.Store(true)
	for {
		select {
		case d := <-f.history.queue:
			f.writeHistory(context.WithoutCancel(ctx), d)
		case <-ctx.Done():
			f.history.running.Store(false)
			for {
				select {
				case d := <-f.history.queue:
					f.writeHistory(context.WithoutCancel(ctx), d)
				default:
					return
				}
			}
		}
	}
}

// storeFailure turns a store error into the drip error users see.
func storeFailure(err error, what string) *Error {
	return failf(ReasonStoreUnavailable, fmt.Errorf("%s: %w", what, err), "the faucet's state store is unavailable; try again shortly")
}

func (f *Faucet) checkedSend(ctx context.Context, req Request) (*Result, error) {
	if err := f.checkChain(ctx); err != nil {
		return nil, err
	}
	amount, err := f.amount(ctx, req.Stacking)
	if err != nil {
		return nil, err
	}
	if f.batchable(req, amount) {
		return f.submitBatched(ctx, req.Recipient)
	}
	return f.send(ctx, req.Recipient, amount)
}

// buckets names the limits a request counts against. A contract principal
// counts as its deployer's address: a fresh contract name must not be a
// fresh allowance.
func (f *Faucet) buckets(req Request) []Bucket {
	addr := req.Recipient.Address.String()
	refs := make([]Bucket, 0, 3)
	switch {
	case req.Stacking:
		// Stacking drips are large: a token never widens their limit.
		refs = append(refs, Bucket{"stacking:" + addr, f.cfg.Limits.StackingPerAddress})
	case req.Token != nil:
		// The token's own per-address bucket, so its users cannot eat the
		// anonymous allowance of an address and vice versa.
		refs = append(refs, Bucket{"token:" + req.Token.Name + ":address:" + addr, req.Token.PerAddress})
	default:
		refs = append(refs, Bucket{"address:" + addr, f.cfg.Limits.PerAddress})
	}
	if req.Token != nil {
		refs = append(refs, Bucket{"token:" + req.Token.Name, req.Token.Quota})
	}
	if req.ClientIP.IsValid() && !req.SkipIPLimit {
		refs = append(refs, Bucket{ipBucketKey(req.ClientIP), f.cfg.Limits.PerIP})
	}
	return refs
}

// send picks a key, allocates a nonce, signs, records and broadcasts,
// handling the node's rejections with bounded retries.
//
// Crash safety: the signed bytes are in the ledger (state broadcasting)
// before the first send, so a crash at any point leaves either no trace (the
// nonce was never used) or bytes that resuming rebroadcasts (the node answers
// 200 for a tx it holds, so that is idempotent). Nothing is paid twice and no
// nonce is lost.
func (f *Faucet) send(ctx context.Context, to stacks.Principal, amount uint64) (*Result, error) {
	chainID := f.chainID()
	fee := f.fee(ctx, to)
	excluded := map[*keyState]bool{}
	var lastErr *Error
	// A key cannot pay itself (the node refuses transfers to the sender).
	for _, k := range f.keys {
		if !to.IsContract() && to.Address == k.addr {
			excluded[k] = true
			lastErr = failf(ReasonRejected, nil, "the recipient is one of the faucet's own addresses")
		}
	}
	for attempt := 0; attempt < f.cfg.MaxAttempts; attempt++ {
		k, nonce, ferr := f.pick(ctx, amount, fee, excluded)
		if ferr != nil {
			if lastErr != nil && ferr.Reason != ReasonStoreUnavailable {
				return nil, lastErr // the key-specific failure explains more
			}
			return nil, ferr
		}
		tx, err := stacks.NewTokenTransfer(stacks.TransferParams{
			Recipient: to, Amount: amount, Nonce: nonce, Fee: fee, Memo: f.memo, ChainID: chainID,
		}, k.key)
		if err != nil {
			f.release(k, nonce)
			return nil, failf(ReasonRejected, err, "could not sign the transaction")
		}
		raw := tx.Serialize()
		p := &PendingTx{Sender: k.addr, Nonce: nonce, TxID: tx.TxID(), Raw: raw, Recipient: to, Amount: amount, Fee: fee, SentAt: f.cfg.Now(), State: TxBroadcasting}
		if retry, rerr := f.recordSending(ctx, k, p, excluded); rerr != nil {
			if retry {
				lastErr = rerr
				continue
			}
			return nil, rerr
		}
		result := &Result{TxID: p.TxID, TxRaw: raw, Amount: amount, Fee: fee, Nonce: nonce, Sender: k.addr}
		maybeSent, err := f.broadcast(ctx, raw)
		if err == nil {
			p.State = TxPending
			f.commit(ctx, k, p)
			return result, nil
		}
		if maybeSent {
			// The node may hold it: answering an error would invite a
			// retry and a second payment. The bytes stay recorded in state
			// broadcasting; repair rebroadcasts them until resolved.
			f.commit(ctx, k, p)
			f.log.Warn("broadcast outcome unknown; the tx is tracked and rebroadcast until its nonce confirms",
				"sender", k.addr.String(), "nonce", nonce, "txid", p.TxID.String(), "err", err)
			result.InDoubt = true
			return result, nil
		}
		lastErr = f.handleBroadcastError(ctx, k, p, err, excluded)
		if lastErr == nil {
			continue // retry on the same or another key
		}
		if lastErr.Reason != ReasonExhausted && lastErr.Reason != ReasonBusy {
			return nil, lastErr
		}
	}
	if lastErr == nil {
		lastErr = failf(ReasonBusy, nil, "the faucet could not place the transaction; try again shortly")
	}
	return nil, lastErr
}

// recordSending writes p (state broadcasting) to the ledger before its
// first broadcast. On failure the nonce is given back; retry is true when
// another key may still be tried (another replica took this one over).
func (f *Faucet) recordSending(ctx context.Context, k *keyState, p *PendingTx, excluded map[*keyState]bool) (retry bool, _ *Error) {
	err := f.cfg.Ledger.Put(ctx, *p)
	if err == nil {
		return false, nil
	}
	f.release(k, p.Nonce)
	if errors.Is(err, ErrNotOwner) {
		// Another replica took the key over: never send with it.
		f.Lost(k.addr)
		excluded[k] = true
		return true, failf(ReasonBusy, err, "the faucet is busy; try again in a minute")
	}
	return false, storeFailure(err, "record the transaction")
}

// commit moves an allocated nonce to pending once its tx is (or may be) at
// the node. The ledger write comes first: a sync that confirms the nonce
// meanwhile finds it allocated, not pending, and so cannot delete the row
// before this write re-adds it.
func (f *Faucet) commit(ctx context.Context, k *keyState, p *PendingTx) {
	if p.State == TxPending {
		if err := f.cfg.Ledger.Put(context.WithoutCancel(ctx), *p); err != nil {
			// The row stays "broadcasting": resuming rebroadcasts the same
			// bytes, which the node answers 200. Nothing is lost.
			f.log.Warn("ledger update after broadcast failed", "sender", k.addr.String(), "nonce", p.Nonce, "err", err)
		}
	}
	k.mu.Lock()
	delete(k.allocated, p.Nonce)
	k.pending[p.Nonce] = p
	k.mu.Unlock()
}

// handleBroadcastError updates key state after a broadcast that surely did
// not place the tx at the node. It returns nil when the drip should simply
// be retried, or the error to report (or to keep as the last error while
// other keys are tried).
func (f *Faucet) handleBroadcastError(ctx context.Context, k *keyState, p *PendingTx, err error, excluded map[*keyState]bool) *Error {
	// Forget the recorded bytes before the nonce can be reused: a later
	// drip's record for the same nonce must not be deleted by this one.
	if derr := f.cfg.Ledger.Delete(context.WithoutCancel(ctx), k.addr, p.Nonce); derr != nil {
		f.log.Warn("ledger delete after a refused broadcast failed", "sender", k.addr.String(), "nonce", p.Nonce, "err", derr)
	}
	var rej *node.RejectionError
	if !errors.As(err, &rej) {
		f.release(k, p.Nonce)
		var de *node.DecodeError
		switch {
		case errors.As(err, &de):
			// A 400 "Failed to decode": the node refuses these very bytes.
			f.log.Error("node could not decode the faucet transaction", "sender", k.addr.String(), "nonce", p.Nonce, "err", err)
			return failf(ReasonRejected, err, "the Stacks node refused the transaction")
		case errors.Is(err, context.Canceled):
			return failf(ReasonNodeUnavailable, err, "the request was cancelled")
		}
		return failf(ReasonNodeUnavailable, err, "the Stacks node is unavailable; try again shortly")
	}
	log := f.log.With("sender", k.addr.String(), "nonce", p.Nonce, "reason", rej.Reason)
	switch rej.Reason {
	case node.ReasonConflictingNonceInMempool:
		// Another writer holds this nonce: mark it taken and move on.
		k.mu.Lock()
		delete(k.allocated, p.Nonce)
		if _, ours := k.pending[p.Nonce]; !ours { // never overwrite a tx we hold bytes for
			k.pending[p.Nonce] = &PendingTx{Sender: k.addr, Nonce: p.Nonce, Foreign: true, SentAt: f.cfg.Now()}
		}
		k.mu.Unlock()
		log.Warn("nonce already used in mempool; advancing")
		return nil
	case node.ReasonBadNonce:
		f.release(k, p.Nonce)
		if serr := f.syncKey(ctx, k); serr != nil {
			log.Warn("resync after BadNonce failed", "err", serr)
		}
		log.Warn("nonce behind the node; resynced")
		return nil
	case node.ReasonTooMuchChaining:
		f.release(k, p.Nonce)
		excluded[k] = true
		log.Warn("mempool chaining limit reached for key")
		return failf(ReasonBusy, err, "the faucet is busy; try again in a minute")
	case node.ReasonNotEnoughFunds:
		f.release(k, p.Nonce)
		k.mu.Lock()
		k.dry = true
		k.mu.Unlock()
		excluded[k] = true
		log.Warn("node reports key cannot pay; marked dry")
		return failf(ReasonExhausted, err, "the faucet is out of funds")
	case node.ReasonServerFailureNoSuchChainTip, node.ReasonServerFailureDatabase, node.ReasonServerFailureOther:
		// The node blames itself (no chain tip while syncing, its database):
		// it is unavailable, our transaction is not at fault.
		f.release(k, p.Nonce)
		log.Warn("node failed to process the transaction", "err", err)
		return failf(ReasonNodeUnavailable, err, "the Stacks node is unavailable; try again shortly")
	default:
		f.release(k, p.Nonce)
		log.Error("node rejected faucet transaction", "err", err)
		return failf(ReasonRejected, err, "the Stacks node refused the transaction")
	}
}

// release gives back a nonce that no accepted tx occupies, and wakes drips
// waiting for the in-flight slot it frees.
func (f *Faucet) release(k *keyState, nonce uint64) {
	k.mu.Lock()
	k.unallocate(nonce)
	k.mu.Unlock()
	f.signalFreed()
}

// outcomeUnknown is true when the node may have accepted the tx although we
// got no answer: the request was sent (not refused at dial) and then timed
// out, was cut off or was cancelled. A definite HTTP answer is not unknown.
func outcomeUnknown(err error) bool {
	var te *node.TransportError
	sent := errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	return sent && !neverSent(err)
}

// neverSent is true when the request provably did not reach the node (the
// connection was refused), so the nonce can be reused.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// broadcast submits raw, retrying the identical bytes on transient failures:
// the node answers 200 for a tx already in its mempool, so this is idempotent.
// maybeSent reports whether any attempt may have reached the node, so that a
// definite failure of a later retry does not hide an earlier unknown outcome.
func (f *Faucet) broadcast(ctx context.Context, raw []byte) (maybeSent bool, err error) {
	backoff := 50 * time.Millisecond
	for try := 0; try < 3; try++ {
		if _, err = f.cfg.Node.Broadcast(ctx, raw); err == nil {
			return true, nil
		}
		maybeSent = maybeSent || outcomeUnknown(err)
		if !node.IsUnavailable(err) || neverSent(err) {
			return maybeSent, err
		}
		select {
		case <-ctx.Done():
			return maybeSent, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	return maybeSent, err
}

// pick chooses the least-loaded key that can afford amount+fee and allocates
// its next nonce. When every key is at its in-flight cap it waits up to
// BusyWait for a block to free a slot.
func (f *Faucet) pick(ctx context.Context, amount, fee uint64, excluded map[*keyState]bool) (*keyState, uint64, *Error) {
	return f.pickWithin(ctx, amount, fee, excluded, f.cfg.BusyWait)
}

// pickWithin is pick waiting at most wait for a free slot.
func (f *Faucet) pickWithin(ctx context.Context, amount, fee uint64, excluded map[*keyState]bool, wait time.Duration) (*keyState, uint64, *Error) {
	var deadline <-chan time.Time
	for {
		f.pickMu.Lock()
		freed := f.freed
		f.pickMu.Unlock()
		k, nonce, err := f.pickOnce(ctx, amount, fee, excluded)
		if err == nil || err.Reason != ReasonBusy || wait <= 0 {
			return k, nonce, err
		}
		if deadline == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			deadline = t.C
		}
		if f.onBusyWait != nil {
			f.onBusyWait()
		}
		select {
		case <-freed:
		case <-deadline:
			return nil, 0, err
		case <-ctx.Done():
			return nil, 0, err
		}
	}
}

// signalFreed wakes drips waiting for in-flight capacity.
func (f *Faucet) signalFreed() {
	f.pickMu.Lock()
	close(f.freed)
	f.freed = make(chan struct{})
	f.pickMu.Unlock()
}

func (f *Faucet) pickOnce(ctx context.Context, amount, fee uint64, excluded map[*keyState]bool) (*keyState, uint64, *Error) {
	for _, k := range f.keys {
		if excluded[k] {
			continue
		}
		k.mu.Lock()
		owned, synced := k.owned, k.synced
		k.mu.Unlock()
		if !owned {
			continue
		}
		if err := f.loadKey(ctx, k); err != nil {
			if errors.Is(err, ErrNotOwner) {
				f.Lost(k.addr)
				continue
			}
			return nil, 0, storeFailure(err, "load the key's ledger")
		}
		if !synced {
			if err := f.syncKey(ctx, k); err != nil {
				f.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
			}
		}
	}
	spend := satAdd(amount, fee)
	f.pickMu.Lock()
	defer f.pickMu.Unlock()
	var best *keyState
	bestLoad := 0
	anyOwned, anySynced, anyCapacity := false, false, false
	n := len(f.keys)
	for i := range n {
		k := f.keys[(f.rr+i)%n]
		if excluded[k] {
			continue
		}
		k.mu.Lock()
		usable := k.owned && k.loaded
		anyOwned = anyOwned || usable
		ok := usable && k.synced
		anySynced = anySynced || ok
		load := k.inFlight()
		hasCapacity := ok && load < f.cfg.MaxInFlight
		anyCapacity = anyCapacity || hasCapacity
		canPay := ok && !k.dry && k.available(f.cfg.FeeReserve) >= spend
		k.mu.Unlock()
		if hasCapacity && canPay && (best == nil || load < bestLoad) {
			best, bestLoad = k, load
		}
	}
	f.rr++
	switch {
	case best != nil:
		best.mu.Lock()
		nonce := best.allocate(spend)
		best.mu.Unlock()
		return best, nonce, nil
	case !anyOwned:
		return nil, 0, failf(ReasonBusy, nil, "this faucet replica holds no sending key right now; try again shortly")
	case !anySynced:
		return nil, 0, failf(ReasonNodeUnavailable, nil, "the Stacks node is unavailable; try again shortly")
	case !anyCapacity:
		return nil, 0, failf(ReasonBusy, nil, "the faucet is busy; try again in a minute")
	default:
		return nil, 0, failf(ReasonExhausted, nil, "the faucet is out of funds")
	}
}

// syncKey reads the key's account from the node and applies it. Reads run
// concurrently (poll, BadNonce, pick, readiness); one that started before a
// read already applied is stale and is dropped, so a key never moves back.
func (f *Faucet) syncKey(ctx context.Context, k *keyState) error {
	k.mu.Lock()
	k.syncStarted++
	seq := k.syncStarted
	k.mu.Unlock()
	acct, err := f.cfg.Node.Account(ctx, k.addr.String())
	if err != nil {
		return fmt.Errorf("sync %s: %w", k.addr, err)
	}
	height := f.chain.Peek().height
	k.mu.Lock()
	if seq < k.syncApplied {
		k.mu.Unlock()
		return nil
	}
	k.syncApplied = seq
	before := k.inFlight()
	advanced, confirmed := k.applyAccount(acct.Balance, acct.Nonce, height)
	// A dry key comes back once it can pay a default drip again.
	if k.dry && k.available(f.cfg.FeeReserve) >= satAdd(f.cfg.DefaultAmount, f.cfg.FeeMax) {
		k.dry = false
	}
	freed := advanced && k.inFlight() < before
	owned := k.owned
	k.mu.Unlock()
	if freed {
		f.signalFreed()
	}
	if !owned {
		return nil // the new owner prunes its ledger; our writes would be fenced
	}
	if len(confirmed) == 0 {
		return nil
	}
	if e := f.cfg.Ledger.DeleteBelow(context.WithoutCancel(ctx), k.addr, acct.Nonce); e != nil {
		return fmt.Errorf("ledger delete %s below nonce %d: %w", k.addr, acct.Nonce, e)
	}
	return nil
}

// amount is the drip size for the tier.
func (f *Faucet) amount(ctx context.Context, stacking bool) (uint64, error) {
	if !stacking {
		return f.cfg.DefaultAmount, nil
	}
	if f.cfg.StackingAmount > 0 {
		return f.cfg.StackingAmount, nil
	}
	minAmount, err := f.pox.Get(ctx, func(ctx context.Context) (uint64, error) {
		p, err := f.cfg.Node.PoX(ctx)
		if err != nil {
			return 0, err
		}
		if p.MinAmountUstx == 0 {
			return 0, errors.New("node reports min_amount_ustx 0")
		}
		return p.MinAmountUstx, nil
	})
	if err != nil {
		return 0, failf(ReasonStackingUnavailable, err, "the stacking amount is unavailable (no PoX information from the node); try again shortly")
	}
	amt, ok := padPercent(minAmount, f.cfg.StackingPaddingPercent)
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

// fee is the node's rate × the tx length, clamped to [FeeMin, FeeMax] and
// never below the length (the node's minimum relay fee).
func (f *Faucet) fee(ctx context.Context, to stacks.Principal) uint64 {
	length := transferLen(to)
	fee, ok := f.rateFee(ctx, length)
	if !ok {
		fee = f.cfg.FeeFallback
	}
	fee = max(fee, length)
	f.lastFee.Store(fee)
	return fee
}

// transferLen is the length of a signed transfer to to.
func transferLen(to stacks.Principal) uint64 {
	return uint64((&stacks.Transaction{Payload: stacks.TokenTransfer{Recipient: to}}).EncodedLen())
}

// rateFee is the node's transfer fee rate × length, clamped to [FeeMin,
// FeeMax]; false when the node has no rate.
func (f *Faucet) rateFee(ctx context.Context, length uint64) (uint64, bool) {
	rate, err := f.feeRate.Get(ctx, f.cfg.Node.TransferFeeRate)
	if err != nil || rate == 0 {
		return 0, false
	}
	hi, fee := bits.Mul64(rate, length)
	if hi != 0 {
		fee = f.cfg.FeeMax
	}
	return min(max(fee, f.cfg.FeeMin), f.cfg.FeeMax), true
}

// checkChain confirms, from a cached /v2/info, that the node is a testnet
// with the expected chain id.
func (f *Faucet) checkChain(ctx context.Context) error {
	ci, err := f.chain.Get(ctx, f.fetchChain)
	if err != nil {
		return failf(ReasonNodeUnavailable, err, "the Stacks node is unavailable; try again shortly")
	}
	return f.chainAllowed(ci.chainID)
}

func (f *Faucet) chainAllowed(id uint32) error {
	if id == stacks.ChainIDMainnet {
		return failf(ReasonDisabled, nil, "the faucet is not available: the node is on mainnet")
	}
	if f.cfg.ChainID != 0 && id != f.cfg.ChainID {
		return failf(ReasonDisabled, nil, "the faucet is not available: the node reports chain id %d, expected %d", id, f.cfg.ChainID)
	}
	return nil
}

func (f *Faucet) fetchChain(ctx context.Context) (chainInfo, error) {
	info, err := f.cfg.Node.Info(ctx)
	if err != nil {
		return chainInfo{}, err
	}
	return chainInfo{chainID: info.NetworkID, height: info.StacksTipHeight}, nil
}

func (f *Faucet) chainID() uint32 {
	if id := f.chain.Peek().chainID; id != 0 {
		return id
	}
	return stacks.ChainIDTestnet
}
