package faucet

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Treasury refill (the cosmjs faucet pattern): one holder key, the treasury,
// funds the distributor keys, so an operator tops up a single address. The
// treasury never pays drips.
//
// The treasury is a key of its own to the engine: it has a keyState (synced
// from the node at every block, nonces allocated from it), its transfers are
// recorded in the journal (state broadcasting, then pending) before they are
// sent, resumed and resolved after a restart, and repaired when stuck, all by
// the same code as the distributors' drips.
//
// Single writer: with a shared store the treasury address is passed to
// the journal.Owner beside the distributor addresses, so it is a separately
// locked (and, on Postgres, fenced) key. Only the replica holding it sends
// refills, and it refills every distributor key: the ones it owns from its
// own state, the others from the node's balance minus their in-flight
// entries in the shared journal. (Letting the owner of the first distributor
// key send refills would not work on Postgres: ledger writes for the
// treasury address are refused with journal.ErrNotOwner unless the treasury itself
// is owned, and keys owned by other replicas would never be refilled.)
//
// At most one refill per distributor key is in flight: a refill counts from
// its allocation until the treasury's nonce for it confirms. A distributor's
// "low" reading must therefore never be older than the treasury read that
// saw its last refill confirm, or the pass refills it again. The poll syncs
// the treasury before the distributors, but the treasury's state is shared
// and may be newer than this poll's distributor reads (a concurrent poll or
// Sync, a resync after BadNonce, Acquired loading it), so the refill pass
// checks the treasury for each key first and reads a low key's balance
// again afterwards (refill, distributorAvailable).

// RefillMemo is the memo of treasury refills.
const RefillMemo = "faucet refill"

// OutcomeRefill is DripRecord.Outcome for a treasury refill of a
// distributor key (Sender is the treasury, Recipient the distributor).
const OutcomeRefill = "refill"

// Defaults for the refill settings when a treasury is configured.
const (
	// DefaultRefillBelowDrips: RefillBelow defaults to this many default
	// drips' worth, DefaultAmount+FeeFallback each.
	DefaultRefillBelowDrips uint64 = 20
	// DefaultRefillAmountFactor: RefillAmount defaults to RefillBelow times this.
	DefaultRefillAmountFactor uint64 = 10
)

// Resolve returns r with its zero thresholds set to their defaults for a
// default drip of amount with fee fallback feeFallback (each zero: its
// default), or why r cannot work: a refill must lift a key above the
// threshold. The engine and the serve flags both check refills with it.
func (r Refills) Resolve(amount, feeFallback uint64) (Refills, error) {
	if amount == 0 {
		amount = DefaultAmount
	}
	if feeFallback == 0 {
		feeFallback = DefaultFeeFallback
	}
	if r.Below == 0 {
		r.Below = satMul(DefaultRefillBelowDrips, DripCost(amount, feeFallback))
	}
	if r.Amount == 0 {
		r.Amount = satMul(DefaultRefillAmountFactor, r.Below)
	}
	if r.Amount < r.Below {
		return r, fmt.Errorf("refill amount %d µSTX is below the refill threshold %d µSTX; a refill must lift a key above it", r.Amount, r.Below)
	}
	return r, nil
}

// treasury is the refill state of an engine with a treasury key.
type treasury struct {
	f    *Faucet // the engine whose pipeline it places refills on
	memo stacks.Memo
	// rules: STX first, then each token in configuration order.
	rules []refillRule

	// passMu: one refill pass at a time (the poll loop and Sync may race).
	passMu sync.Mutex

	mu sync.Mutex
	// dry, per asset: the treasury cannot pay a refill of it (the node
	// said NotEnoughFunds or its synced balance is short). It stays dry
	// until its balance rises above the lowest balance seen while dry and
	// covers a refill again. A treasury out of a token still refills STX.
	dry map[Asset]*dryState
	// warnedAt is 1 + the tip height of the last "treasury is dry"
	// warning per asset (0: none yet): at most one per block.
	warnedAt map[Asset]uint64

	sent, failed atomic.Uint64
}

// refillRule: a distributor whose available balance of asset falls below
// below gets amount of it.
type refillRule struct {
	asset         Asset
	below, amount uint64
}

type dryState struct{ balance uint64 }

// rule returns the refill rule of asset.
func (t *treasury) rule(asset Asset) refillRule {
	for _, r := range t.rules {
		if r.asset == asset {
			return r
		}
	}
	return refillRule{asset: asset}
}

// TreasuryStatus is a point-in-time view of the treasury, for metrics.
type TreasuryStatus struct {
	Address        string
	Balance        uint64 // confirmed µSTX as of the last sync
	Available      uint64 // balance minus in-flight spends and reserve
	ConfirmedNonce uint64
	// InFlight counts all the treasury's unconfirmed transactions;
	// InFlightRefills those of them that are refills of a distributor.
	InFlight        int
	InFlightRefills int
	// RefillsSent and RefillsFailed count refills since start (monotonic):
	// sent = accepted by the node or in doubt (tracked until it confirms);
	// failed = an attempt that left no transaction in flight (including the
	// one that found the treasury short and marked it dry).
	RefillsSent   uint64
	RefillsFailed uint64
	Dry           bool
	Synced        bool
	// Owned: this replica is the treasury's writer (always true without a
	// shared store).
	Owned        bool
	RefillBelow  uint64
	RefillAmount uint64
	// Tokens are the treasury's side of each configured token, in
	// configuration order.
	Tokens []TreasuryToken
}

// TreasuryToken is the treasury's balance of a token and its refill
// settings, in the token's base units.
type TreasuryToken struct {
	Name               Asset
	Balance, Available uint64
	Known              bool // a token read succeeded
	Dry                bool
	RefillBelow        uint64
	RefillAmount       uint64
}

// ResolveRefills returns t with its zero refill settings set to their
// defaults (DefaultRefillBelowDrips drips, DefaultRefillAmountFactor ×
// RefillBelow), or why they cannot work.
func (t Token) ResolveRefills() (Token, error) {
	if t.RefillBelow == 0 {
		t.RefillBelow = satMul(DefaultRefillBelowDrips, max(t.Amount, 1))
	}
	if t.RefillAmount == 0 {
		t.RefillAmount = satMul(DefaultRefillAmountFactor, t.RefillBelow)
	}
	if t.RefillAmount < t.RefillBelow {
		return t, fmt.Errorf("token refill amount %d is below the token refill threshold %d; a refill must lift a key above it", t.RefillAmount, t.RefillBelow)
	}
	return t, nil
}

// setupTreasury validates the refill settings, fills their defaults and
// adds the treasury's key state. Called by New after the distributor keys.
func (f *Faucet) setupTreasury() error {
	c := &f.cfg
	if c.Refills.Treasury == nil {
		if c.Refills.Below != 0 || c.Refills.Amount != 0 {
			return errors.New("faucet: refill settings without a treasury key")
		}
		return nil
	}
	addr := c.Refills.Treasury.TestnetAddress()
	for _, k := range c.Keys {
		if k.TestnetAddress() == addr {
			return fmt.Errorf("faucet: the treasury key (%s) is also a distributor key", addr)
		}
	}
	r, err := c.Refills.Resolve(c.Amounts.Default, c.Fees.Fallback)
	if err != nil {
		return fmt.Errorf("faucet: %w", err)
	}
	c.Refills = r
	memo, err := stacks.NewMemo(RefillMemo)
	if err != nil {
		return fmt.Errorf("faucet: %w", err)
	}
	t := &treasury{f: f, memo: memo, dry: map[Asset]*dryState{}, warnedAt: map[Asset]uint64{},
		rules: []refillRule{{asset: AssetSTX, below: c.Refills.Below, amount: c.Refills.Amount}}}
	c.Tokens = slices.Clone(c.Tokens)
	for i, tok := range c.Tokens {
		tr, err := tok.ResolveRefills()
		if err != nil {
			return fmt.Errorf("faucet: token %s: %w", tok.Name, err)
		}
		c.Tokens[i] = tr
		t.rules = append(t.rules, refillRule{asset: tr.Name, below: tr.RefillBelow, amount: tr.RefillAmount})
	}
	f.treasury = t
	return nil
}

// Treasury reports the treasury's state; ok is false without a treasury.
func (f *Faucet) Treasury() (TreasuryStatus, bool) {
	t := f.treasury
	if t == nil {
		return TreasuryStatus{}, false
	}
	ks := f.pool.treasury.status(f.cfg.Fees.Reserve)
	s := TreasuryStatus{
		Address:         ks.Address,
		Balance:         ks.Balance,
		Available:       ks.Available,
		ConfirmedNonce:  ks.ConfirmedNonce,
		InFlight:        ks.InFlight,
		InFlightRefills: f.pool.refillsInFlight(),
		Synced:          ks.Synced,
		Owned:           ks.Owned,
		RefillBelow:     t.rule(AssetSTX).below,
		RefillAmount:    t.rule(AssetSTX).amount,
	}
	for _, tok := range f.cfg.Tokens {
		r, b := t.rule(tok.Name), ks.Tokens[tok.Name]
		s.Tokens = append(s.Tokens, TreasuryToken{Name: tok.Name, Balance: b.Balance, Available: b.Available, Known: b.Known,
			RefillBelow: r.below, RefillAmount: r.amount, Dry: t.isDry(tok.Name)})
	}
	s.Dry = t.isDry(AssetSTX)
	s.RefillsSent, s.RefillsFailed = t.sent.Load(), t.failed.Load()
	return s, true
}

// syncTreasury is the treasury's part of a block: load its ledger if it is
// ours, read its account, repair it, and see whether a dry treasury has
// been funded again. It reports whether refills may be sent this block.
func (t *treasury) syncTreasury(ctx context.Context, height uint64) bool {
	if t == nil || !t.f.accounts.ownedLoaded(ctx, t.f.pool.treasury) {
		return false
	}
	k := t.f.pool.treasury
	if err := t.f.accounts.syncKey(ctx, k); err != nil {
		t.f.log.Warn("treasury sync failed", "sender", k.addr.String(), "err", err)
		return false
	}
	t.f.repairs.repair(ctx, k, height)
	for _, r := range t.rules {
		bal, avail := k.fundsOf(r.asset, t.f.cfg.Fees.Reserve)
		need := satAdd(r.amount, t.f.cfg.Fees.Max)
		if !r.asset.IsSTX() {
			need = r.amount // its fee is STX, whose dryness is STX's
		}
		t.mu.Lock()
		if d := t.dry[r.asset]; d != nil {
			switch {
			case bal < d.balance:
				d.balance = bal // its own spends confirmed
			case bal > d.balance && avail >= need:
				delete(t.dry, r.asset)
				t.f.log.Info("treasury funded again; refills resume", "sender", k.addr.String(), "asset", string(r.asset),
					"balance", bal, "available", avail)
			}
		}
		t.mu.Unlock()
	}
	return true
}

// markDry records that the treasury cannot pay a refill of asset.
func (t *treasury) markDry(asset Asset, balance uint64) (was bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.dry[asset]
	was = d != nil
	if d == nil {
		t.dry[asset] = &dryState{balance: balance}
	} else if balance < d.balance {
		d.balance = balance
	}
	return was
}

func (t *treasury) isDry(asset Asset) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dry[asset] != nil
}

// warnDry logs that the treasury cannot pay asset, at most once per block.
func (t *treasury) warnDry(height uint64, asset Asset, recipient stacks.Address, msg string, args ...any) {
	t.mu.Lock()
	warn := t.warnedAt[asset] != height+1
	t.warnedAt[asset] = height + 1
	t.mu.Unlock()
	if !warn {
		return
	}
	k := t.f.pool.treasury
	bal, avail := k.fundsOf(asset, t.f.cfg.Fees.Reserve)
	t.f.log.Warn(msg, append([]any{"sender", k.addr.String(), "recipient", recipient.String(), "asset", string(asset),
		"balance", bal, "available", avail, "refill_amount", t.rule(asset).amount}, args...)...)
}

// refill tops up every distributor key whose available balance of an
// asset fell below its refill threshold and has no refill of it in flight.
// synced names the owned keys whose account was read this block (after the
// treasury's).
func (t *treasury) refill(ctx context.Context, height uint64, synced map[*keyState]bool) {
	if t == nil {
		return
	}
	t.passMu.Lock()
	defer t.passMu.Unlock()
	for _, d := range t.f.pool.keys {
		for _, r := range t.rules {
			if ctx.Err() != nil {
				return
			}
			// The in-flight check before the balance read, never after:
			// once a refill is no longer in flight, its nonce had
			// confirmed at the treasury read behind that answer, so a
			// distributor read started after the check includes it.
			if t.f.pool.refillInFlight(d.addr, r.asset) {
				continue
			}
			avail, ok := t.distributorAvailable(ctx, d, r.asset, synced[d])
			if !ok || avail >= r.below {
				continue
			}
			if t.isDry(r.asset) {
				t.warnDry(height, r.asset, d.addr, "treasury cannot pay a refill; the distributor key is low")
				continue
			}
			t.sendRefill(ctx, d, r, height)
		}
	}
}

// distributorAvailable is what a distributor key can spend: from this
// replica's state when it owns the key (read this block), else from the
// node's balance minus the key's in-flight entries in the shared ledger.
// ok is false when it is unknown. A key it reports below the refill
// threshold was read from the node after the call began (see refill).
func (t *treasury) distributorAvailable(ctx context.Context, d *keyState, asset Asset, syncedNow bool) (uint64, bool) {
	owned, loaded, isSynced := d.flags()
	_, avail := d.fundsOf(asset, t.f.cfg.Fees.Reserve)
	if owned && loaded {
		if !syncedNow || !isSynced || (!asset.IsSTX() && !d.tokenIsKnown(asset)) {
			return 0, false
		}
		if avail >= t.rule(asset).below {
			return avail, true
		}
		// Low as of this poll's read, which may predate the treasury read
		// that saw this key's refill confirm (another poll's, or a resync):
		// read it again. syncKey never applies a read older than one
		// already applied, so the state is now at least this fresh.
		if err := t.f.accounts.syncKey(ctx, d); err != nil {
			t.f.log.Warn("refill: re-reading a distributor's account failed", "recipient", d.addr.String(), "err", err)
			return 0, false
		}
		if owned, loaded, synced := d.flags(); !owned || !loaded || !synced {
			return 0, false // ownership changed meanwhile
		}
		if !asset.IsSTX() && !d.tokenIsKnown(asset) {
			return 0, false
		}
		_, avail := d.fundsOf(asset, t.f.cfg.Fees.Reserve)
		return avail, true
	}
	if owned {
		return 0, false // its ledger is not loaded: in-flight spends unknown
	}
	acct, err := t.f.cfg.Node.Account(ctx, d.addr.String())
	if err != nil {
		t.f.log.Warn("refill: reading a distributor's account failed", "recipient", d.addr.String(), "err", err)
		return 0, false
	}
	balance := acct.Balance
	if !asset.IsSTX() {
		id, ok := t.tokenAsset(asset)
		if !ok {
			return 0, false
		}
		// Read after the account, like syncTokens: errs low, never high.
		if balance, err = t.f.cfg.Node.TokenBalance(ctx, id.Contract, stacks.Principal{Address: d.addr}); err != nil {
			t.f.log.Warn("refill: reading a distributor's token balance failed", "recipient", d.addr.String(), "asset", string(asset), "err", err)
			return 0, false
		}
	}
	entries, err := t.f.journal.Load(ctx, d.addr.String())
	if err != nil {
		t.f.log.Warn("refill: reading a distributor's journal failed", "recipient", d.addr.String(), "err", err)
		return 0, false
	}
	txs, err := pendingOfAll(entries)
	if err != nil {
		t.f.log.Warn("refill: reading a distributor's journal failed", "recipient", d.addr.String(), "err", err)
		return 0, false
	}
	var stx, moving uint64
	for _, e := range txs {
		if e.Nonce >= acct.Nonce && !e.Foreign {
			c := costOf(e.Asset, e.Amount, e.Fee)
			stx = satAdd(stx, c.stx)
			if c.token == asset {
				moving = satAdd(moving, c.amount)
			}
		}
	}
	if !asset.IsSTX() {
		return satSub(balance, moving), true
	}
	return satSub(satSub(balance, stx), t.f.cfg.Fees.Reserve), true
}

// tokenAsset is the identifier of a token whose contract is known.
func (t *treasury) tokenAsset(name Asset) (stacks.AssetInfo, bool) {
	tok := t.f.tokens.byName(name)
	if tok == nil {
		return stacks.AssetInfo{}, false
	}
	asset, err := tok.usable()
	return asset, err == nil
}

// sendRefill sends one refill of r's asset from the treasury to d: a
// placement whose only possible key is the treasury's.
func (t *treasury) sendRefill(ctx context.Context, d *keyState, r refillRule, height uint64) {
	k := t.f.pool.treasury
	to := stacks.Principal{Address: d.addr}
	chainID := t.f.chain.id()
	log := t.f.log.With("sender", k.addr.String(), "recipient", d.addr.String(), "asset", string(r.asset), "amount", r.amount)
	fee := t.f.price.transfer(ctx, to)
	build := func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
		return stacks.NewTokenTransfer(stacks.TransferParams{
			Recipient: to, Amount: r.amount, Nonce: nonce, Fee: fee, Memo: t.memo, ChainID: chainID,
		}, key)
	}
	if !r.asset.IsSTX() {
		asset, ok := t.tokenAsset(r.asset)
		if !ok {
			return // its contract is not known yet
		}
		fee = t.f.price.token(ctx, asset, to, []byte(RefillMemo))
		build = func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewSIP010Transfer(stacks.SIP010TransferParams{
				Asset: asset, Recipient: to, Amount: r.amount, Memo: []byte(RefillMemo), Nonce: nonce, Fee: fee, ChainID: chainID,
			}, key)
		}
	}
	var refused allocRefusal
	var balance uint64
	done, err := t.f.placer.place(ctx, placement{
		to: to, asset: r.asset, amount: r.amount, fee: fee, recorded: t.f.onRefillRecorded, build: build,
		choose: func(_ context.Context, spend cost, excluded map[*keyState]bool) (*keyState, uint64, *Error) {
			if excluded[k] {
				return nil, 0, failf(ReasonBusy, nil, "the treasury cannot send now")
			}
			var nonce uint64
			nonce, refused, balance = t.f.pool.allocateOn(k, spend)
			if refused != 0 {
				return nil, 0, failf(ReasonBusy, nil, "the treasury cannot send now")
			}
			return k, nonce, nil
		},
	})
	if err == nil {
		t.refillSent(ctx, d, &done.tx, done.lostAnswer)
		return
	}
	var rej *node.RejectionError
	switch {
	case refused == refusedNotOurs:
		return // ownership changed meanwhile: the new writer refills
	case refused == refusedBusy:
		log.Warn("treasury at its in-flight cap; refill waits for the next block")
		return
	case refused == refusedShort:
		t.failed.Add(1)
		short := r.asset
		if !r.asset.IsSTX() {
			if _, avail := k.fundsOf(AssetSTX, t.f.cfg.Fees.Reserve); avail < fee {
				short = AssetSTX // it cannot pay the fee
			} else {
				balance, _ = k.fundsOf(r.asset, 0)
			}
		}
		if !t.markDry(short, balance) {
			t.warnDry(height, short, d.addr, "treasury balance too low for a refill; marked dry until it is funded")
		}
		return
	case errors.As(err, &rej) && rej.Reason == node.ReasonNotEnoughFunds:
		// The node checks the µSTX a transaction spends (a token call's
		// fee), never tokens: STX is what is short.
		t.failed.Add(1)
		bal, _ := k.fundsOf(AssetSTX, t.f.cfg.Fees.Reserve)
		if !t.markDry(AssetSTX, bal) {
			t.warnDry(height, AssetSTX, d.addr, "node reports the treasury cannot pay a refill; marked dry until it is funded")
		}
		return
	}
	t.failed.Add(1)
	log.Warn("refill not placed; retried at the next block", "err", err)
}

// refillSent counts, logs and records a refill now in flight. sendErr is
// the broadcast's error when its outcome is unknown.
func (t *treasury) refillSent(ctx context.Context, d *keyState, p *PendingTx, sendErr error) {
	t.sent.Add(1)
	args := []any{"sender", p.Sender.String(), "recipient", d.addr.String(), "amount", p.Amount,
		"fee", p.Fee, "txid", p.TxID.Hex0x(), "nonce", p.Nonce}
	if sendErr != nil {
		t.f.log.Warn("treasury refill sent, node answer lost; tracked and rebroadcast until its nonce confirms", append(args, "err", sendErr)...)
	} else {
		t.f.log.Info("treasury refill sent", args...)
	}
	t.f.history.record(ctx, DripRecord{
		At: p.SentAt, Recipient: d.addr.String(), Asset: p.Asset.OrSTX(), Amount: p.Amount, Fee: p.Fee,
		TxID: p.TxID.String(), Sender: p.Sender.String(), Nonce: p.Nonce, Outcome: OutcomeRefill,
	})
}

// satMul is a×b, saturating.
func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return ^uint64(0)
	}
	return lo
}
