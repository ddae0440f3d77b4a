package guard

import (
	"math/bits"
	"sync"
	"time"
)

// rateBuckets is the resolution of the sliding window: memory stays fixed
// whatever the traffic, and the count errs by at most one bucket's worth.
const rateBuckets = 60

// rateWindow counts events over a sliding window as a ring of buckets,
// each window/rateBuckets wide. It is per process: with several replicas
// each raises on its own share of the traffic.
type rateWindow struct {
	width time.Duration

	mu     sync.Mutex
	slots  [rateBuckets]int64 // which bucket number each ring entry holds
	counts [rateBuckets]int
}

func newRateWindow(window time.Duration) *rateWindow {
	return &rateWindow{width: max(window/rateBuckets, 1)}
}

func (w *rateWindow) slot(now time.Time) int64 { return now.UnixNano() / int64(w.width) }

func ringIndex(slot int64) int {
	i := int(slot % rateBuckets)
	if i < 0 {
		i += rateBuckets
	}
	return i
}

func (w *rateWindow) add(now time.Time) {
	s := w.slot(now)
	i := ringIndex(s)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.slots[i] != s {
		w.slots[i], w.counts[i] = s, 0
	}
	w.counts[i]++
}

// count sums the buckets of the last window, the current one included.
func (w *rateWindow) count(now time.Time) int {
	cur := w.slot(now)
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for i, s := range w.slots {
		if s > cur-rateBuckets && s <= cur {
			n += w.counts[i]
		}
	}
	return n
}

// raisedDifficulty: above the threshold, at least 16 bits plus step bits
// per doubling of the rate over it, capped at limit; else the base.
func raisedDifficulty(base, count, threshold, step, limit int) int {
	if threshold <= 0 || count <= threshold {
		return base
	}
	// floor(log2(count/threshold)) equals that of its integer part when >= 1.
	doublings := bits.Len(uint(count/threshold)) - 1
	d := max(base, 16) + step*doublings
	return max(min(d, limit), base)
}
