package faucet

import (
	"net/netip"
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

// limiter is an exact sliding-window log: each bucket keeps the times of its
// reserved slots. Reservations across several buckets are all-or-nothing.
type limiter struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	now       func() time.Time
	lastSweep time.Time
}

// bucket is one key's reserved slots, oldest first, and the window they
// count in.
type bucket struct {
	times  []time.Time
	window time.Duration
}

func newLimiter(now func() time.Time) *limiter {
	return &limiter{buckets: map[string]*bucket{}, now: now}
}

// bucketRef names one bucket and its limit.
type bucketRef struct {
	key   string
	limit Limit
}

// reservation is a set of reserved slots, released when a drip fails.
type reservation struct {
	l     *limiter
	slots []bucketSlot
}

type bucketSlot struct {
	key string
	at  time.Time
}

// reserve takes one slot in every bucket or none; when refused it returns how
// long until the tightest bucket frees a slot.
func (l *limiter) reserve(refs []bucketRef) (*reservation, time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	var wait time.Duration
	for _, r := range refs {
		if r.limit.Requests <= 0 {
			continue
		}
		live := l.trim(r.key, now, r.limit.Window)
		if len(live) >= r.limit.Requests {
			// The slot that frees first is the oldest of the last Requests ones.
			free := live[len(live)-r.limit.Requests].Add(r.limit.Window).Sub(now)
			wait = max(wait, free)
		}
	}
	if wait > 0 {
		return nil, wait, false
	}
	res := &reservation{l: l}
	for _, r := range refs {
		if r.limit.Requests <= 0 {
			continue
		}
		b := l.buckets[r.key]
		if b == nil {
			b = &bucket{}
			l.buckets[r.key] = b
		}
		b.times, b.window = append(b.times, now), r.limit.Window
		res.slots = append(res.slots, bucketSlot{key: r.key, at: now})
	}
	return res, 0, true
}

// release gives the slots back (a failed drip is not charged).
func (r *reservation) release() {
	if r == nil {
		return
	}
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range r.slots {
		b := l.buckets[s.key]
		if b == nil {
			continue // swept meanwhile
		}
		for i := len(b.times) - 1; i >= 0; i-- {
			if b.times[i].Equal(s.at) {
				b.times = append(b.times[:i], b.times[i+1:]...)
				break
			}
		}
		if len(b.times) == 0 {
			delete(l.buckets, s.key)
		}
	}
	r.slots = nil
}

// trim drops expired entries of one bucket and returns the live ones.
func (l *limiter) trim(key string, now time.Time, window time.Duration) []time.Time {
	b := l.buckets[key]
	if b == nil {
		return nil
	}
	cut := 0
	for cut < len(b.times) && !b.times[cut].Add(window).After(now) {
		cut++
	}
	if cut > 0 {
		b.times = append(b.times[:0], b.times[cut:]...)
		if len(b.times) == 0 {
			delete(l.buckets, key)
		}
	}
	return b.times
}

// sweep removes buckets whose newest entry has left its window, at most once
// a minute, so memory follows the traffic of the last window and no longer.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if len(b.times) == 0 || !b.times[len(b.times)-1].Add(b.window).After(now) {
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
