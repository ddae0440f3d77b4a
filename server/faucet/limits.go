package faucet

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Limit allows Requests drips per sliding Window. Requests ≤ 0 disables it.
type Limit struct {
	Requests int
	Window   time.Duration
}

// LimitsConfig holds the three independent buckets.
type LimitsConfig struct {
	PerAddress         Limit // default drips per recipient
	StackingPerAddress Limit // stacking drips per recipient, a bucket of its own
	PerIP              Limit // all drips per client IP (IPv6 grouped by /64)
}

// DefaultLimits are the incumbent's per-address figures plus a per-IP cap.
func DefaultLimits() LimitsConfig {
	return LimitsConfig{
		PerAddress:         Limit{Requests: 5, Window: 5 * time.Minute},
		StackingPerAddress: Limit{Requests: 1, Window: 48 * time.Hour},
		PerIP:              Limit{Requests: 30, Window: 5 * time.Minute},
	}
}

// MemoryLimiter is a Limiter in process memory: an exact sliding-window log,
// each bucket keeping its reserved slots. State is lost at exit; package
// store keeps it durably and across replicas.
type MemoryLimiter struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
	nextID    int64
}

// bucket is one key's reserved slots, oldest first, and the window they
// count in.
type bucket struct {
	slots  []slot
	window time.Duration
}

type slot struct {
	id int64
	at time.Time
}

// NewMemoryLimiter returns an empty in-memory limiter.
func NewMemoryLimiter() *MemoryLimiter {
	return &MemoryLimiter{buckets: map[string]*bucket{}}
}

// Reserve takes one slot in every bucket or none; when refused it returns how
// long until the tightest bucket frees a slot.
func (l *MemoryLimiter) Reserve(_ context.Context, now time.Time, refs []Bucket) (Reservation, time.Duration, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	var wait time.Duration
	for _, r := range refs {
		if r.Limit.Requests <= 0 {
			continue
		}
		live := l.trim(r.Key, now, r.Limit.Window)
		if len(live) >= r.Limit.Requests {
			// The slot that frees first is the oldest of the last Requests ones.
			free := live[len(live)-r.Limit.Requests].at.Add(r.Limit.Window).Sub(now)
			wait = max(wait, free, time.Nanosecond)
		}
	}
	if wait > 0 {
		return Reservation{}, wait, false, nil
	}
	var res Reservation
	for _, r := range refs {
		if r.Limit.Requests <= 0 {
			continue
		}
		b := l.buckets[r.Key]
		if b == nil {
			b = &bucket{}
			l.buckets[r.Key] = b
		}
		l.nextID++
		b.slots, b.window = append(b.slots, slot{id: l.nextID, at: now}), r.Limit.Window
		res.IDs = append(res.IDs, l.nextID)
	}
	return res, 0, true, nil
}

// Release gives the slots back (a drip that was surely not sent is not charged).
func (l *MemoryLimiter) Release(_ context.Context, r Reservation) error {
	if len(r.IDs) == 0 {
		return nil
	}
	ids := make(map[int64]bool, len(r.IDs))
	for _, id := range r.IDs {
		ids[id] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, b := range l.buckets {
		b.slots = slices.DeleteFunc(b.slots, func(s slot) bool { return ids[s.id] })
		if len(b.slots) == 0 {
			delete(l.buckets, k)
		}
	}
	return nil
}

// trim drops expired entries of one bucket and returns the live ones.
func (l *MemoryLimiter) trim(key string, now time.Time, window time.Duration) []slot {
	b := l.buckets[key]
	if b == nil {
		return nil
	}
	cut := 0
	for cut < len(b.slots) && !b.slots[cut].at.Add(window).After(now) {
		cut++
	}
	if cut > 0 {
		b.slots = append(b.slots[:0], b.slots[cut:]...)
		if len(b.slots) == 0 {
			delete(l.buckets, key)
		}
	}
	return b.slots
}

// sweep removes buckets whose newest entry has left its window, at most once
// a minute, so memory follows the traffic of the last window and no longer.
func (l *MemoryLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if len(b.slots) == 0 || !b.slots[len(b.slots)-1].at.Add(b.window).After(now) {
			delete(l.buckets, k)
		}
	}
}

// ipBucketKey groups IPv6 clients by /64 (one customer allocation) and keeps
// IPv4 addresses whole; IPv4-mapped IPv6 counts as IPv4.
func ipBucketKey(ip netip.Addr) string {
	ip = ip.Unmap()
	if ip.Is6() {
		p, err := ip.Prefix(64)
		if err == nil {
			return "ip:" + p.String()
		}
	}
	return "ip:" + ip.String()
}
