package faucet

import (
	"slices"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// keyState is one sending key's view of its account: the node's confirmed
// balance and nonce, plus what we have in flight above that nonce. Only nonce
// allocation and bookkeeping hold mu; signing and broadcasting do not.
type keyState struct {
	key  *stacks.PrivateKey
	addr stacks.Address

	mu      sync.Mutex
	synced  bool
	balance uint64 // confirmed µSTX as of the last sync
	// tokens are the key's balances of the configured tokens (an entry
	// once a read of it succeeded or failed).
	tokens    map[Asset]*tokenBalance
	confirmed uint64 // the node's next nonce (confirmed txs only)
	// pending holds accepted or possibly-accepted txs by nonce (≥ confirmed).
	pending map[uint64]*PendingTx
	// allocated marks nonces handed to a drip (or the repair loop) that has
	// not finished broadcasting.
	allocated map[uint64]cost // nonce → reserved spend
	dry       bool
	// lastAdvance and advancedAt are the tip height and the time from
	// which the confirmed nonce counts as stuck: when it last moved, or
	// later, when our tx for it reached the node (a nonce still being
	// broadcast is late, not stuck).
	lastAdvance uint64
	advancedAt  time.Time

	// owned: this process may send with the key (always, unless replicas
	// share the store). loaded: pending was read from the journal since
	// ownership began; loadMu serialises that load.
	owned  bool
	loaded bool
	loadMu sync.Mutex
	// syncStarted numbers account reads as they start; syncApplied is the
	// number of the newest one applied. An older read finishing later is
	// stale and must not move the key backwards.
	syncStarted, syncApplied uint64
}

func newKeyState(k *stacks.PrivateKey) *keyState {
	return &keyState{
		key:       k,
		addr:      k.TestnetAddress(),
		pending:   map[uint64]*PendingTx{},
		allocated: map[uint64]cost{},
		tokens:    map[Asset]*tokenBalance{},
	}
}

// hasInFlight reports whether the key is ours and has a transaction in
// flight (or a nonce allocated for one).
func (k *keyState) hasInFlight() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.owned && k.loaded && k.inFlight() > 0
}

// inFlight counts pending and allocated nonces. Caller holds mu.
func (k *keyState) inFlight() int { return len(k.pending) + len(k.allocated) }

// tokenBalance is a key's balance of one token: confirmed as of the last
// read of it, less the transfers of it that account reads confirmed since.
type tokenBalance struct {
	balance uint64
	known   bool   // a read succeeded
	applied uint64 // the account read number the token read belongs to
	failing bool   // the last read failed (logged once)
}

// token returns the key's balance entry of asset, creating it. Caller
// holds mu.
func (k *keyState) token(asset Asset) *tokenBalance {
	b := k.tokens[asset]
	if b == nil {
		b = &tokenBalance{}
		k.tokens[asset] = b
	}
	return b
}

// committed sums what in-flight txs will take: µSTX, and base units of
// token ("" for none). Caller holds mu.
func (k *keyState) committed(token Asset) (stx, amount uint64) {
	add := func(c cost) {
		stx = satAdd(stx, c.stx)
		if token != "" && c.token == token {
			amount = satAdd(amount, c.amount)
		}
	}
	for _, p := range k.pending {
		add(costOf(p.Asset, p.Amount, p.Fee))
	}
	for _, v := range k.allocated {
		add(v)
	}
	return stx, amount
}

// available is balance − in-flight spends − reserve, in µSTX. Caller holds mu.
func (k *keyState) available(reserve uint64) uint64 {
	stx, _ := k.committed("")
	return satSub(satSub(k.balance, stx), reserve)
}

// tokenAvailable is the key's balance of token − its in-flight transfers;
// 0 while the balance is unknown. Caller holds mu.
func (k *keyState) tokenAvailable(token Asset) uint64 {
	b := k.tokens[token]
	if b == nil || !b.known {
		return 0
	}
	_, moving := k.committed(token)
	return satSub(b.balance, moving)
}

// tokenRead reports whether a read of the key's token balance succeeded,
// and whether none has been tried yet. Caller holds mu.
func (k *keyState) tokenRead(token Asset) (known, unread bool) {
	b := k.tokens[token]
	if b == nil {
		return false, true
	}
	return b.known, !b.known && !b.failing
}

// canAfford reports whether the key can pay spend beyond what is in flight
// and the µSTX reserve. Caller holds mu.
func (k *keyState) canAfford(spend cost, reserve uint64) bool {
	if k.available(reserve) < spend.stx {
		return false
	}
	return spend.token == "" || k.tokenAvailable(spend.token) >= spend.amount
}

// nextNonce is the nonce the next drip gets: the lowest one at or above the
// confirmed nonce that no pending or allocated tx occupies. Without gaps that
// is max(confirmed, highest in flight + 1); a gap (a hole left by a drip whose
// broadcast failed) is reused first so it cannot block the chain. Holes are
// derived from the maps every time, so they can neither go stale nor be
// handed out twice. Caller holds mu.
func (k *keyState) nextNonce() uint64 {
	var buf [64]uint64 // a key's in-flight nonces fit: no allocation per drip
	used := buf[:0]
	for n := range k.pending {
		used = append(used, n)
	}
	for n := range k.allocated {
		used = append(used, n)
	}
	slices.Sort(used)
	next := k.confirmed
	for _, n := range used {
		if n > next {
			break // next is a hole
		}
		if n == next {
			next++
		}
	}
	return next
}

// allocate reserves the lowest usable nonce for a spend. Caller holds mu.
func (k *keyState) allocate(spend cost) uint64 {
	nonce := k.nextNonce()
	k.allocated[nonce] = spend
	return nonce
}

// unallocate gives a nonce back after a drip that did not get a tx accepted;
// if it lies below another in-flight nonce it is now a hole, which the next
// allocation (or the repair loop) fills. Caller holds mu.
func (k *keyState) unallocate(nonce uint64) {
	delete(k.allocated, nonce)
}

// flags reads the key's ownership and sync state.
func (k *keyState) flags() (owned, loaded, synced bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.owned, k.loaded, k.synced
}

// fundsOf reads the key's confirmed balance of asset and what is
// available beyond in-flight spends: µSTX with the reserve kept back, or a
// token (0, 0 while its balance is unknown).
func (k *keyState) fundsOf(asset Asset, reserve uint64) (balance, available uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if asset.IsSTX() {
		return k.balance, k.available(reserve)
	}
	if b := k.tokens[asset]; b != nil {
		balance = b.balance
	}
	return balance, k.tokenAvailable(asset)
}

// tokenIsKnown reports whether a read of asset's balance has succeeded.
func (k *keyState) tokenIsKnown(asset Asset) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.tokens[asset]
	return b != nil && b.known
}

// commitPending moves an allocated nonce to pending: its tx is (or may be)
// at the node.
// tip is the newest height the engine has seen.
func (k *keyState) commitPending(p *PendingTx, tip uint64, now time.Time) {
	k.mu.Lock()
	delete(k.allocated, p.Nonce)
	k.pending[p.Nonce] = p
	if p.Nonce == k.confirmed {
		// The chain waited on this broadcast: it is stuck only once the
		// node has had it for StuckBlocks.
		k.lastAdvance, k.advancedAt = max(k.lastAdvance, tip), now
	}
	k.mu.Unlock()
}

// takenByOther records that another writer's tx holds nonce in the mempool
// (ConflictingNonceInMempool): the nonce is no longer ours to allocate. A tx
// we hold bytes for is never overwritten.
func (k *keyState) takenByOther(nonce uint64, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.allocated, nonce)
	if _, ours := k.pending[nonce]; !ours {
		k.pending[nonce] = &PendingTx{Sender: k.addr, Nonce: nonce, Foreign: true, SentAt: now}
	}
}

// setDry marks the key as unable to pay (the node said so).
func (k *keyState) setDry() {
	k.mu.Lock()
	k.dry = true
	k.mu.Unlock()
}

// startSync numbers an account read as it starts.
func (k *keyState) startSync() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.syncStarted++
	return k.syncStarted
}

// syncOutcome is what applying an account read changed.
type syncOutcome struct {
	applied bool // false: a newer read was applied already
	freed   bool // the confirmed nonce advanced and freed in-flight slots
	owned   bool
	// confirmed: pending nonces the read confirmed (their ledger rows go).
	confirmed []uint64
}

// applySync applies account read seq unless a newer one was applied: the
// confirmed balance and nonce replace ours and the pending txs below the
// nonce are dropped. A dry key comes back once it can pay dryRecover again.
func (k *keyState) applySync(seq, balance, nonce, height, dryRecover, reserve uint64, now time.Time) syncOutcome {
	k.mu.Lock()
	defer k.mu.Unlock()
	if seq < k.syncApplied {
		return syncOutcome{owned: k.owned}
	}
	k.syncApplied = seq
	before := k.inFlight()
	advanced := nonce > k.confirmed || !k.synced
	k.balance, k.confirmed, k.synced = balance, nonce, true
	if advanced {
		k.lastAdvance, k.advancedAt = height, now
	}
	var confirmed []uint64
	for n, p := range k.pending {
		if n < nonce {
			if !p.Asset.IsSTX() {
				// The token read that follows replaces this; until then
				// the balance must not count the tokens the tx moved (if
				// the transfer failed on chain, this errs low, safely).
				b := k.token(p.Asset)
				b.balance = satSub(b.balance, p.Amount)
			}
			delete(k.pending, n)
			confirmed = append(confirmed, n)
		}
	}
	if k.dry && k.available(reserve) >= dryRecover {
		k.dry = false
	}
	return syncOutcome{applied: true, freed: advanced && k.inFlight() < before, owned: k.owned, confirmed: confirmed}
}

// applyTokenSync applies asset's balance read right after account read
// seq, unless the read of a newer account read was applied already.
func (k *keyState) applyTokenSync(asset Asset, seq, balance uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.token(asset)
	if seq < b.applied || seq < k.syncApplied {
		return
	}
	b.balance, b.known, b.applied = balance, true, seq
}

// readTransition is how a read's outcome changed from the previous one.
type readTransition int

const (
	readUnchanged readTransition = iota
	readStartedFailing
	readRecovered
)

// noteTokenRead records whether the latest read of asset's balance failed.
func (k *keyState) noteTokenRead(asset Asset, err error) readTransition {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.token(asset)
	was := b.failing
	b.failing = err != nil
	switch {
	case err != nil && !was:
		return readStartedFailing
	case err == nil && was:
		return readRecovered
	}
	return readUnchanged
}

// needsLoad reports whether the key is ours and its ledger not yet loaded.
func (k *keyState) needsLoad() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.owned && !k.loaded
}

// loadPending replaces what the key holds in flight with the ledger's
// entries, marks it loaded and unsynced, and returns the entries in doubt
// (state broadcasting) for the caller to resolve.
func (k *keyState) loadPending(entries []PendingTx) (doubt []*PendingTx) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pending = make(map[uint64]*PendingTx, len(entries))
	for i := range entries {
		e := &entries[i]
		k.pending[e.Nonce] = e
		if e.State == TxBroadcasting && !e.Foreign {
			doubt = append(doubt, e)
		}
	}
	k.synced, k.loaded = false, true
	return doubt
}

// stillInDoubt reports whether p is still the key's entry at its nonce,
// unconfirmed, on a key we own.
func (k *keyState) stillInDoubt(p *PendingTx) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur, ok := k.pending[p.Nonce]
	return ok && cur == p && k.owned && p.Nonce >= k.confirmed
}

// replaceIfSame swaps the entry at p's nonce for by (nil deletes it) if p is
// still the one there, and reports whether it did.
func (k *keyState) replaceIfSame(p, by *PendingTx) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pending[p.Nonce] != p {
		return false
	}
	if by == nil {
		delete(k.pending, p.Nonce)
		return true
	}
	k.pending[p.Nonce] = by
	return true
}

// replaceTx swaps our entry with txid at nonce for by, if it is still the
// one there, and reports whether it did.
func (k *keyState) replaceTx(nonce uint64, txid stacks.TxID, by *PendingTx) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cur, ok := k.pending[nonce]; !ok || cur.Foreign || cur.TxID != txid {
		return false
	}
	k.pending[nonce] = by
	return true
}

// setPending puts p, a changed copy of the key's entry at its nonce (the
// same transaction: state and counters differ, never the bytes), in that
// entry's place if it is still in flight, and reports whether it did. It
// writes nothing to the store: the caller does that after the lock is
// released (repairer.updatePending says why that order is safe).
func (k *keyState) setPending(p *PendingTx) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur, ok := k.pending[p.Nonce]
	if !ok || cur.Foreign || cur.TxID != p.TxID {
		return false // confirmed, replaced or given up meanwhile
	}
	k.pending[p.Nonce] = p
	return true
}

// confirmedPast reports whether the node's confirmed nonce has passed
// nonce: whatever held it is settled on chain.
func (k *keyState) confirmedPast(nonce uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return nonce < k.confirmed
}

// acquire marks the key ours, its ledger still to be loaded.
func (k *keyState) acquire() {
	k.mu.Lock()
	k.owned, k.loaded = true, false
	k.mu.Unlock()
}

// disown stops handing the key out and drops what this process knew of its
// in-flight txs (the next owner reads them from the store). It reports
// whether the key was owned.
func (k *keyState) disown() (was bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	was = k.owned
	k.owned, k.loaded = false, false
	return was
}

// unloadIfDisowned drops what this process knew of the key's in-flight txs
// unless it was acquired again meanwhile.
func (k *keyState) unloadIfDisowned() {
	k.mu.Lock()
	if !k.owned {
		k.loaded = false
	}
	k.mu.Unlock()
}

// stopAllocating stops handing the key out, keeping what it holds.
func (k *keyState) stopAllocating() {
	k.mu.Lock()
	k.owned = false
	k.mu.Unlock()
}

// allocating reports whether a caller holds one of the key's nonces.
func (k *keyState) allocating() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.allocated) > 0
}

// inDoubt lists the entries whose broadcast outcome is unknown.
func (k *keyState) inDoubt() []*PendingTx {
	k.mu.Lock()
	defer k.mu.Unlock()
	var doubt []*PendingTx
	for _, p := range k.pending {
		if p.State == TxBroadcasting && !p.Foreign {
			doubt = append(doubt, p)
		}
	}
	return doubt
}

// repairPlan is what a stuck key needs: the nonce the chain waits on, the
// entry we hold there (nil: a hole, claimed for the filler) and our entries
// from that nonce up without a gap.
type repairPlan struct {
	nonce uint64
	stuck *PendingTx // a copy
	chain []PendingTx
}

// planRepair decides at height whether the key is stuck: its confirmed
// nonce has not moved for stuckBlocks, and for at least minWait, while txs
// wait above it. The time bound keeps a poll loop that fell behind fast
// blocks from taking a late broadcast for a stuck one. A hole at the
// confirmed nonce is claimed (allocated) so that no drip races the filler
// for it. nil: nothing to do.
func (k *keyState) planRepair(height, stuckBlocks uint64, now time.Time, minWait time.Duration) *repairPlan {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.pending) == 0 {
		// Nothing waits on the confirmed nonce (a hole below an allocated
		// nonce is taken by the next drip): restart the stuck clock.
		k.lastAdvance, k.advancedAt = height, now
		return nil
	}
	if height < k.lastAdvance+stuckBlocks || now.Sub(k.advancedAt) < minWait {
		return nil
	}
	plan := &repairPlan{nonce: k.confirmed}
	if p, ok := k.pending[plan.nonce]; ok {
		cp := *p
		plan.stuck = &cp
	}
	if _, busy := k.allocated[plan.nonce]; busy {
		return nil // a drip is sending this nonce right now
	}
	k.lastAdvance, k.advancedAt = height, now // give the repair stuckBlocks to work
	if plan.stuck == nil {
		k.allocated[plan.nonce] = cost{}
	}
	// A node that lost one tx may have lost the ones after it too.
	for n := plan.nonce; ; n++ {
		p, ok := k.pending[n]
		if !ok {
			break
		}
		if !p.Foreign {
			plan.chain = append(plan.chain, *p)
		}
	}
	return plan
}

// findTx returns a copy of our in-flight entry with that txid.
func (k *keyState) findTx(txid string) (PendingTx, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.pending {
		if !p.Foreign && p.TxID.String() == txid {
			return *p, true
		}
	}
	return PendingTx{}, false
}

// pendingAt returns a copy of our in-flight entry at nonce.
func (k *keyState) pendingAt(nonce uint64) (PendingTx, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.pending[nonce]; ok && !p.Foreign {
		return *p, true
	}
	return PendingTx{}, false
}

func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

func satSub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
