package faucet

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// tipWatch remembers when the Stacks tip last rose, as the poll loop saw
// it. A chain that stops producing blocks fails nothing: drips are
// accepted and stay pending, the node answers, readiness holds. The age
// of the tip is the one sign of it.
type tipWatch struct {
	clk clock.PassiveClock
	mu  sync.Mutex
	// high is the highest tip seen; at is when it was first seen, or the
	// first successful poll while the tip has not risen since (zero
	// before that poll).
	high uint64
	at   time.Time
	// lowerSince is when reads began to come in below high without one
	// at it since (zero while none does).
	lowerSince time.Time
}

// chainRestartHold is how long every read must stay below the highest tip
// before the watch takes the chain for restarted (a devnet reset) and
// follows it down: a reset chain climbs from zero, and would otherwise
// count as stalled until it passed the old height.
const chainRestartHold = time.Minute

// observe notes a tip read by the poll. Only a height above every one
// seen counts as progress: with several nodes the reads may go to one at
// the tip and then one a block behind, and that back and forth must not
// pass for a chain that moves. Reads that all stay lower for
// chainRestartHold are a restarted chain, followed from there.
func (w *tipWatch) observe(height uint64) {
	now := w.clk.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.at.IsZero() || height > w.high:
		w.high, w.at, w.lowerSince = height, now, time.Time{}
	case height == w.high:
		w.lowerSince = time.Time{}
	case w.lowerSince.IsZero():
		w.lowerSince = now
	case now.Sub(w.lowerSince) >= chainRestartHold:
		w.high, w.at, w.lowerSince = height, now, time.Time{}
	}
}

// age is how long ago the tip last rose; false before the first
// successful poll.
func (w *tipWatch) age() (time.Duration, bool) {
	w.mu.Lock()
	at := w.at
	w.mu.Unlock()
	if at.IsZero() {
		return 0, false
	}
	return max(w.clk.Since(at), 0), true
}

// TipAge is how long ago the poll loop last saw the Stacks tip rise: since
// the first successful poll while it has not risen since. known is false
// before that poll. It keeps growing while the node is unreachable, as
// the engine then cannot tell whether the chain moves; NodeUp says which.
func (f *Faucet) TipAge() (age time.Duration, known bool) { return f.chain.moved.age() }
