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
}

// observe notes a tip read by the poll. Only a height above every one
// seen counts as progress: with several nodes the reads may go to one at
// the tip and then one a block behind, and that back and forth must not
// pass for a chain that moves.
func (w *tipWatch) observe(height uint64) {
	now := w.clk.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at.IsZero() || height > w.high {
		w.high, w.at = height, now
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
