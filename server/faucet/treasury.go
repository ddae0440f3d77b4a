package faucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/settings"
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
	DefaultRefillBelowDrips = settings.RefillBelowDrips
	// DefaultRefillAmountFactor: RefillAmount defaults to RefillBelow times this.
	DefaultRefillAmountFactor = settings.RefillAmountFactor
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
	var err error
	if r.Below, r.Amount, err = settings.Refill(r.Below, r.Amount, DripCost(amount, feeFallback)); err != nil {
		return r, fmt.Errorf("refill amount %d µSTX is below the refill threshold %d µSTX; a refill must lift a key above it", r.Amount, r.Below)
	}
	return r, nil
}

// treasury is the refill state of an engine with a treasury key, and what
// its refills are placed with.
type treasury struct {
	// key is the treasury's own; pool holds it and the distributors.
	key      *keyState
	pool     *keyPool
	accounts treasuryAccounts
	repairs  keyRepairer
	placer   txPlacer
	price    *pricer
	chain    *chainView
	// node and journal read a distributor another replica owns.
	node    accountNode
	journal *journal.Journal
	tokens  *tokens
	history dripRecorder
	// reserve is what a key keeps back; feeMax the top fee, which a dry
	// treasury must cover beside a refill to count as funded again.
	reserve, feeMax uint64
	// onRecorded, when set (tests only), is called once a refill is in
	// the journal, before it is broadcast.
	onRecorded func(PendingTx)
	memo       stacks.Memo
	// rules: STX first, then each token in configuration order.
	rules []refillRule
	log   *slog.Logger

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

// treasuryAccounts is what the treasury asks of the keys' accounts.
type treasuryAccounts interface {
	ownedLoaded(ctx context.Context, k *keyState) bool
	syncKey(ctx context.Context, k *keyState) error
}

// dripRecorder writes a record to the drip history.
type dripRecorder interface {
	record(ctx context.Context, d DripRecord)
}

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
	var err error
	if t.RefillBelow, t.RefillAmount, err = settings.Refill(t.RefillBelow, t.RefillAmount, t.Amount); err != nil {
		return t, fmt.Errorf("token refill amount %d is below the token refill threshold %d; a refill must lift a key above it", t.RefillAmount, t.RefillBelow)
	}
	return t, nil
}

// resolveTreasury validates the refill settings and fills their defaults
// in c (the tokens' too), and returns the refill rules; none without a
// treasury. Called by New before the tokens are built.
func resolveTreasury(c *Config) ([]refillRule, error) {
	if c.Refills.Treasury == nil {
		if c.Refills.Below != 0 || c.Refills.Amount != 0 {
			return nil, errors.New("faucet: refill settings without a treasury key")
		}
		return nil, nil
	}
	addr := c.Refills.Treasury.TestnetAddress()
	for _, k := range c.Keys {
		if k.TestnetAddress() == addr {
			return nil, fmt.Errorf("faucet: the treasury key (%s) is also a distributor key", addr)
		}
	}
	r, err := c.Refills.Resolve(c.Amounts.Default, c.Fees.Fallback)
	if err != nil {
		return nil, fmt.Errorf("faucet: %w", err)
	}
	c.Refills = r
	rules := []refillRule{{asset: AssetSTX, below: r.Below, amount: r.Amount}}
	c.Tokens = slices.Clone(c.Tokens)
	for i, tok := range c.Tokens {
		tr, err := tok.ResolveRefills()
		if err != nil {
			return nil, fmt.Errorf("faucet: token %s: %w", tok.Name, err)
		}
		c.Tokens[i] = tr
		rules = append(rules, refillRule{asset: tr.Name, below: tr.RefillBelow, amount: tr.RefillAmount})
	}
	return rules, nil
}

// Treasury reports the treasury's state; ok is false without a treasury.
func (f *Faucet) Treasury() (TreasuryStatus, bool) {
	if f.treasury == nil {
		return TreasuryStatus{}, false
	}
	return f.treasury.status(), true
}

// status is the treasury's state now.
func (t *treasury) status() TreasuryStatus {
	ks := t.key.status(t.reserve)
	stx := t.rule(AssetSTX)
	s := TreasuryStatus{
		Address:         ks.Address,
		Balance:         ks.Balance,
		Available:       ks.Available,
		ConfirmedNonce:  ks.ConfirmedNonce,
		InFlight:        ks.InFlight,
		InFlightRefills: t.pool.refillsInFlight(),
		Synced:          ks.Synced,
		Owned:           ks.Owned,
		RefillBelow:     stx.below,
		RefillAmount:    stx.amount,
		Dry:             t.isDry(AssetSTX),
		RefillsSent:     t.sent.Load(),
		RefillsFailed:   t.failed.Load(),
	}
	for _, r := range t.rules[1:] { // the tokens, in configuration order
		b := ks.Tokens[r.asset]
		s.Tokens = append(s.Tokens, TreasuryToken{Name: r.asset, Balance: b.Balance, Available: b.Available, Known: b.Known,
			RefillBelow: r.below, RefillAmount: r.amount, Dry: t.isDry(r.asset)})
	}
	return s
}

// syncTreasury is the treasury's part of a block: load its ledger if it is
// ours, read its account, repair it, and see whether a dry treasury has
// been funded again. It reports whether refills may be sent this block.
func (t *treasury) syncTreasury(ctx context.Context, height uint64) bool {
	k := t.key
	if !t.accounts.ownedLoaded(ctx, k) {
		return false
	}
	if err := t.accounts.syncKey(ctx, k); err != nil {
		t.log.Warn("treasury sync failed", "sender", k.addr.String(), "err", err)
		return false
	}
	t.repairs.repair(ctx, k, height)
	for _, r := range t.rules {
		bal, avail := k.fundsOf(r.asset, t.reserve)
		need := satAdd(r.amount, t.feeMax)
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
				t.log.Info("treasury funded again; refills resume", "sender", k.addr.String(), "asset", string(r.asset),
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
	bal, avail := t.key.fundsOf(asset, t.reserve)
	t.log.Warn(msg, append([]any{"sender", t.key.addr.String(), "recipient", recipient.String(), "asset", string(asset),
		"balance", bal, "available", avail, "refill_amount", t.rule(asset).amount}, args...)...)
}
