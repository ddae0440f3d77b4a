package faucet

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// keyPool owns the sending keys: their locks, nonce allocation, release,
// commit and the application of the node's account reads. It is the only
// code that takes a keyState's mu; everything else asks it.
type keyPool struct {
	keys     []*keyState // distributors, in configuration order
	treasury *keyState   // nil without a treasury
	// maxInFlight caps a key's allocated plus pending nonces; reserve is
	// the µSTX a key keeps back beyond its in-flight spends.
	maxInFlight int
	reserve     uint64
	// clk times the waits for a free slot.
	clk clock.Clock

	mu sync.Mutex // serialises key choice + nonce allocation across keys
	rr int        // round-robin start for ties
	// freed is closed (and replaced) whenever a sync or a release may have
	// freed in-flight slots, waking drips that wait for one.
	freed chan struct{}
	// onBusyWait, when set (tests only), is called each time a caller
	// starts waiting for a free slot: a synchronisation point.
	onBusyWait func()
}

func newKeyPool(keys []*stacks.PrivateKey, treasury *stacks.PrivateKey, owned bool, maxInFlight int, reserve uint64, clk clock.Clock) *keyPool {
	p := &keyPool{maxInFlight: maxInFlight, reserve: reserve, clk: clk, freed: make(chan struct{})}
	for _, k := range keys {
		ks := newKeyState(k)
		ks.owned = owned
		p.keys = append(p.keys, ks)
	}
	if treasury != nil {
		p.treasury = newKeyState(treasury)
		p.treasury.owned = owned
	}
	return p
}

// all is every key the engine sends with: the distributors, then the
// treasury if any.
func (p *keyPool) all() []*keyState {
	if p.treasury == nil {
		return p.keys
	}
	return append(slices.Clip(p.keys), p.treasury)
}

// byKey finds a key by its address as the journal names it.
func (p *keyPool) byKey(key string) *keyState {
	for _, k := range p.all() {
		if k.addr.String() == key {
			return k
		}
	}
	return nil
}

// isDistributor reports whether addr is one of the sending keys.
func (p *keyPool) isDistributor(addr stacks.Address) bool {
	return slices.ContainsFunc(p.keys, func(k *keyState) bool { return k.addr == addr })
}

// signalFreed wakes callers waiting for in-flight capacity.
func (p *keyPool) signalFreed() {
	p.mu.Lock()
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}

// freedSignal is closed at the next sync or release that may free a slot.
func (p *keyPool) freedSignal() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.freed
}

// release gives back a nonce that no accepted tx occupies, and wakes
// callers waiting for the slot it frees.
func (p *keyPool) release(k *keyState, nonce uint64) {
	k.mu.Lock()
	k.unallocate(nonce)
	k.mu.Unlock()
	p.signalFreed()
}

// keySet is a set of keys, such as those a placement may no longer try.
// The zero value is empty; add allocates it.
type keySet map[*keyState]bool

func (s *keySet) add(k *keyState) {
	if *s == nil {
		*s = keySet{}
	}
	(*s)[k] = true
}

// keyPreparer makes a key ready for the pick: loads its journal and syncs
// it if it never was (accounts); it may drop a key another replica took.
type keyPreparer interface {
	prepareKey(ctx context.Context, k *keyState) *Error
}

// distributorChoice is the key choice of drips and batches (a chooser):
// the least-loaded distributor that can pay, waiting up to wait for a
// slot and leaving keep slots of each key free.
type distributorChoice struct {
	pool *keyPool
	prep keyPreparer
	wait time.Duration
	keep int
}

func (c *distributorChoice) choose(ctx context.Context, spend cost, excluded keySet) (*keyState, uint64, *Error) {
	return c.pool.pickWithin(ctx, spend, excluded, c.wait, c.keep, c.prep)
}

// pickWithin chooses the least-loaded distributor that can afford spend and
// allocates its next nonce, waiting up to wait for a slot to free when every
// key is at its in-flight cap. prep runs first on each candidate (it
// loads and syncs keys that need it) and may exclude one.
//
// keep is how many of each key's slots the pick must leave free (the
// adaptive batcher's lone drips leave the kept slots to send-many calls).
func (p *keyPool) pickWithin(ctx context.Context, spend cost, excluded keySet, wait time.Duration, keep int, prep keyPreparer) (*keyState, uint64, *Error) {
	var timer clock.Timer // started at the first wait
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		freed := p.freed
		p.mu.Unlock()
		k, nonce, err := p.pickOnce(ctx, spend, excluded, keep, prep)
		if err == nil || err.Reason != ReasonBusy || wait <= 0 {
			return k, nonce, err
		}
		if timer == nil {
			timer = p.clk.NewTimer(wait)
		}
		if p.onBusyWait != nil {
			p.onBusyWait()
		}
		select {
		case <-freed:
		case <-timer.C():
			return nil, 0, err
		case <-ctx.Done():
			return nil, 0, err
		}
	}
}

func (p *keyPool) pickOnce(ctx context.Context, spend cost, excluded keySet, keep int, prep keyPreparer) (*keyState, uint64, *Error) {
	for _, k := range p.keys {
		if excluded[k] {
			continue
		}
		if err := prep.prepareKey(ctx, k); err != nil {
			return nil, 0, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *keyState
	bestLoad := 0
	anyOwned, anySynced, anyCapacity := false, false, false
	// Whether a key's token balance is known, or its first read pending.
	anyTokenKnown, anyTokenUnread := spend.token == "", false
	n := len(p.keys)
	for i := range n {
		k := p.keys[(p.rr+i)%n]
		if excluded[k] {
			continue
		}
		k.mu.Lock()
		usable := k.owned && k.loaded
		anyOwned = anyOwned || usable
		ok := usable && k.synced
		anySynced = anySynced || ok
		load := k.inFlight()
		hasCapacity := ok && load < p.maxInFlight-keep
		anyCapacity = anyCapacity || hasCapacity
		if ok && spend.token != "" {
			known, unread := k.tokenRead(spend.token)
			anyTokenKnown, anyTokenUnread = anyTokenKnown || known, anyTokenUnread || unread
		}
		canPay := ok && !k.dry && k.canAfford(spend, p.reserve)
		k.mu.Unlock()
		if hasCapacity && canPay && (best == nil || load < bestLoad) {
			best, bestLoad = k, load
		}
	}
	p.rr++
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
	case !anyTokenKnown && anyTokenUnread:
		// Not "out of funds": the first read of the balances is pending.
		return nil, 0, failf(ReasonNodeUnavailable, nil, "the faucet has not read its %s balance yet; try again shortly", spend.token)
	default:
		return nil, 0, failf(ReasonExhausted, nil, "the faucet is out of funds")
	}
}

// allocateOn allocates k's next nonce for spend if k is ours, synced, under
// its in-flight cap and can afford it; otherwise it says which of those
// failed. The treasury, which has no choice of key, uses it.
func (p *keyPool) allocateOn(k *keyState, spend cost) (nonce uint64, _ allocRefusal, balance uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case !k.owned || !k.loaded || !k.synced:
		return 0, refusedNotOurs, k.balance
	case k.inFlight() >= p.maxInFlight:
		return 0, refusedBusy, k.balance
	case !k.canAfford(spend, p.reserve):
		return 0, refusedShort, k.balance
	}
	return k.allocate(spend), 0, k.balance
}

// allocRefusal says why allocateOn gave no nonce.
type allocRefusal int

const (
	refusedNotOurs allocRefusal = iota + 1 // not owned, loaded and synced
	refusedBusy                            // at its in-flight cap
	refusedShort                           // cannot afford the spend
)

// keptSlots is how many of each key's in-flight slots the adaptive
// batcher keeps for send-many calls: a fifth, at least one (none when a
// key has a single slot).
func (p *keyPool) keptSlots() int {
	return min(max(p.maxInFlight/5, 1), p.maxInFlight-1)
}

// freeSlots counts the in-flight slots free on the distributors that
// could take a transaction now, and how many of them are kept for
// send-many calls.
func (p *keyPool) freeSlots() (free, kept int) {
	keep := p.keptSlots()
	for _, k := range p.keys {
		k.mu.Lock()
		if k.owned && k.synced && !k.dry {
			n := max(p.maxInFlight-k.inFlight(), 0)
			free += n
			kept += min(n, keep)
		}
		k.mu.Unlock()
	}
	return free, kept
}

// affordable is how many drips of amount the best distributor could still
// pay in one transaction costing fee, capped at limit.
func (p *keyPool) affordable(amount, fee uint64, limit int) int {
	best := uint64(0)
	for _, k := range p.keys {
		k.mu.Lock()
		if k.owned && k.synced && !k.dry {
			if a := k.available(p.reserve); a > fee && amount > 0 {
				best = max(best, (a-fee)/amount)
			}
		}
		k.mu.Unlock()
	}
	return int(min(best, uint64(limit)))
}

// statuses reports every distributor's state.
func (p *keyPool) statuses() []KeyStatus {
	out := make([]KeyStatus, len(p.keys))
	for i, k := range p.keys {
		out[i] = k.status(p.reserve)
	}
	return out
}

// refillsInFlight counts the treasury's in-flight transfers to a
// distributor (any treasury tx to one counts, a nonce-gap filler too).
func (p *keyPool) refillsInFlight() int {
	n := 0
	p.eachRefill(func(to stacks.Address, _ Asset) bool {
		if p.isDistributor(to) {
			n++
		}
		return true
	})
	return n
}

// refillInFlight reports whether a treasury tx of asset to addr is
// recorded, accepted or in doubt, and not yet confirmed. STX counts any
// treasury transfer to addr in STX (a nonce-gap filler too).
func (p *keyPool) refillInFlight(addr stacks.Address, asset Asset) bool {
	found := false
	p.eachRefill(func(to stacks.Address, a Asset) bool {
		found = to == addr && a == asset
		return !found
	})
	return found
}

// eachRefill calls fn with the recipient and asset of each of the
// treasury's own in-flight transfers to an address, under its lock, while
// fn returns true.
func (p *keyPool) eachRefill(fn func(to stacks.Address, asset Asset) bool) {
	t := p.treasury
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tx := range t.pending {
		if !tx.Foreign && !tx.Recipient.IsContract() && !fn(tx.Recipient.Address, tx.Asset.OrSTX()) {
			return
		}
	}
}
