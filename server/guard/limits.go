package guard

import (
	"context"
	"maps"
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

// Limits are the independent buckets drips count against: STX drips the
// first three, every other asset (a token, BTC) two of its own (a drip of
// one asset never uses up another's, as on the incumbent, whose limits
// are per currency).
type Limits struct {
	PerAddress         Limit // default drips per recipient
	StackingPerAddress Limit // stacking drips per recipient, a bucket of its own
	PerIP              Limit // all STX drips per client IP (IPv6 grouped by /64)
	// Assets are the other assets' limits by name. An asset without an
	// entry is not limited, as zero Limits limit nothing: whoever
	// configures an asset gives it its limits (DefaultAssetLimits unless
	// told otherwise).
	Assets map[string]AssetLimits
	// Budgets are the assets' outflow budgets by name ("stx" for STX); an
	// asset without one (or with Amount 0) has no budget.
	Budgets map[string]Budget
}

// AssetLimits are the buckets of an asset's drips.
type AssetLimits struct {
	PerAddress Limit // drips per recipient
	PerIP      Limit // drips per client IP (IPv6 grouped by /64)
}

// DefaultLimits are the incumbent's per-address figures plus a per-IP cap.
func DefaultLimits() Limits {
	return Limits{
		PerAddress:         Limit{Requests: 5, Window: 5 * time.Minute},
		StackingPerAddress: Limit{Requests: 1, Window: 48 * time.Hour},
		PerIP:              Limit{Requests: 30, Window: 5 * time.Minute},
	}
}

// DefaultAssetLimits are an asset's limits when its configuration names
// none: STX's default ones.
func DefaultAssetLimits() AssetLimits {
	d := DefaultLimits()
	return AssetLimits{PerAddress: d.PerAddress, PerIP: d.PerIP}
}

// Of is the limits of asset, a name other than STX's (none without an
// entry).
func (l Limits) Of(asset string) AssetLimits { return l.Assets[asset] }

// With returns l with asset's limits set (its Assets map copied).
func (l Limits) With(asset string, a AssetLimits) Limits {
	m := make(map[string]AssetLimits, len(l.Assets)+1)
	maps.Copy(m, l.Assets)
	m[asset] = a
	l.Assets = m
	return l
}

// MemoryLimiter is a Limiter in process memory: an exact sliding-window log,
// each bucket keeping its reserved slots. State is lost at exit; package
// store keeps it durably and across replicas.
type MemoryLimiter struct {
	mu        sync.Mutex
	buckets   map[string]*bucket
	pools     map[string]*pool
	lastSweep time.Time
	nextID    int64
}

// pool is a budget pool's amounts by step, and the window they count in.
type pool struct {
	steps  map[int64]uint64
	window time.Duration
	step   time.Duration
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
	return &MemoryLimiter{buckets: map[string]*bucket{}, pools: map[string]*pool{}}
}

// Reserve takes one slot in every bucket or none; when refused it returns how
// long until the tightest bucket frees a slot.
func (l *MemoryLimiter) Reserve(ctx context.Context, now time.Time, refs []Bucket) (Reservation, time.Duration, bool, error) {
	res, wait, _, err := l.ReserveDraw(ctx, now, refs, Draw{})
	return res, wait, wait == 0, err
}

// ReserveDraw is Reserve with a draw from a budget, both or neither.
func (l *MemoryLimiter) ReserveDraw(_ context.Context, now time.Time, refs []Bucket, d Draw) (Reservation, time.Duration, Verdict, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	var wait time.Duration
	res := Reservation{Use: make([]BucketUse, len(refs))}
	for i, r := range refs {
		if r.Limit.Requests <= 0 {
			continue
		}
		live := l.trim(r.Key, now, r.Limit.Window)
		var oldest time.Time
		if len(live) > 0 {
			oldest = live[0].at
		}
		res.Use[i] = UseBefore(len(live), oldest, r.Limit.Window, now)
		if len(live) >= r.Limit.Requests {
			// The slot that frees first is the oldest of the last Requests ones.
			free := live[len(live)-r.Limit.Requests].at.Add(r.Limit.Window).Sub(now)
			res.Use[i].Wait = max(free, time.Nanosecond)
			wait = max(wait, res.Use[i].Wait)
		}
	}
	if wait > 0 {
		return Reservation{Use: res.Use}, wait, Verdict{}, nil
	}
	var v Verdict
	if d.Active() {
		if v = d.Decide(l.readPools(now, d), now); v.Amount == 0 {
			return Reservation{Use: res.Use}, 0, v, nil
		}
		res.Drawn = l.draw(now, d, v.Amount)
	}
	res.Use = Reserved(refs, res.Use, now)
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
	return res, 0, v, nil
}

// ReadPools reads the steps of d's pools within the window at now.
func (l *MemoryLimiter) ReadPools(_ context.Context, now time.Time, d Draw) ([]PoolUse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.readPools(now, d), nil
}

func (l *MemoryLimiter) readPools(now time.Time, d Draw) []PoolUse {
	first := FirstStep(now, d.Window, d.Step)
	out := make([]PoolUse, len(d.Pools))
	for i, p := range d.Pools {
		pl := l.pools[p.Key]
		if pl == nil {
			continue
		}
		for idx, amt := range pl.steps {
			if idx < first {
				delete(pl.steps, idx)
				continue
			}
			out[i].Steps = append(out[i].Steps, StepAmount{Index: idx, Amount: amt})
		}
		slices.SortFunc(out[i].Steps, func(a, b StepAmount) int { return cmpInt64(a.Index, b.Index) })
	}
	return out
}

// draw adds amount to the current step of every pool of d.
func (l *MemoryLimiter) draw(now time.Time, d Draw, amount uint64) *Drawn {
	idx := StepIndex(now, d.Step)
	dr := &Drawn{Index: idx, Amount: amount}
	for _, p := range d.Pools {
		pl := l.pools[p.Key]
		if pl == nil {
			pl = &pool{steps: map[int64]uint64{}}
			l.pools[p.Key] = pl
		}
		pl.window, pl.step = d.Window, d.Step
		pl.steps[idx] = satAdd(pl.steps[idx], amount)
		dr.Pools = append(dr.Pools, p.Key)
	}
	return dr
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Release gives the slots back (a drip that was surely not sent is not charged).
func (l *MemoryLimiter) Release(_ context.Context, r Reservation) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d := r.Drawn; d != nil {
		for _, k := range d.Pools {
			if pl := l.pools[k]; pl != nil {
				pl.steps[d.Index] = sub(pl.steps[d.Index], d.Amount)
			}
		}
	}
	if len(r.IDs) == 0 {
		return nil
	}
	ids := make(map[int64]bool, len(r.IDs))
	for _, id := range r.IDs {
		ids[id] = true
	}
	for k, b := range l.buckets {
		b.slots = slices.DeleteFunc(b.slots, func(s slot) bool { return ids[s.id] })
		if len(b.slots) == 0 {
			delete(l.buckets, k)
		}
	}
	return nil
}

// Peek reads each bucket's use without reserving.
func (l *MemoryLimiter) Peek(_ context.Context, now time.Time, refs []Bucket) ([]BucketUse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]BucketUse, len(refs))
	for i, r := range refs {
		if r.Limit.Requests <= 0 {
			continue
		}
		live := l.trim(r.Key, now, r.Limit.Window)
		out[i].Used = len(live)
		if len(live) > 0 {
			out[i].Reset = max(live[0].at.Add(r.Limit.Window).Sub(now), time.Nanosecond)
		}
		if len(live) >= r.Limit.Requests {
			out[i].Wait = max(live[len(live)-r.Limit.Requests].at.Add(r.Limit.Window).Sub(now), time.Nanosecond)
		}
	}
	return out, nil
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
	for k, p := range l.pools {
		first := FirstStep(now, p.window, p.step)
		for idx := range p.steps {
			if idx < first {
				delete(p.steps, idx)
			}
		}
		if len(p.steps) == 0 {
			delete(l.pools, k)
		}
	}
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

// Limiter keeps rate-limit slots: an exact sliding-window log per bucket.
// Implementations must make Reserve atomic against concurrent callers,
// across processes when the store is shared.
type Limiter interface {
	// Reserve takes one slot at now in every bucket with Requests > 0, or
	// none. When a bucket is full it returns ok=false and how long until the
	// slot that frees first leaves its window.
	Reserve(ctx context.Context, now time.Time, buckets []Bucket) (r Reservation, wait time.Duration, ok bool, err error)
	// Release gives a reservation's slots back (a drip that was certainly
	// not sent is not charged). Releasing an empty one is a no-op, and so
	// is releasing slots twice; a draw is given back each time, so a
	// reservation with a draw is released once.
	Release(ctx context.Context, r Reservation) error
	// Peek reads each bucket's use at now without taking a slot: what the
	// eligibility endpoint and the RateLimit headers say.
	Peek(ctx context.Context, now time.Time, buckets []Bucket) ([]BucketUse, error)
}

// BudgetLimiter is a Limiter that also keeps budgets (see Budget): a drip's
// slots and its draw are taken in one atomic step, across processes when
// the store is shared. Release gives a reservation's draw back with its
// slots.
type BudgetLimiter interface {
	Limiter
	// ReserveDraw takes a slot in every bucket and, with an active draw,
	// the amount d.Decide grants from each of its pools, or nothing. A
	// full bucket refuses with its wait (> 0, the verdict zero); else a
	// draw that does not fit refuses with v.Amount == 0 and v.Wait.
	ReserveDraw(ctx context.Context, now time.Time, buckets []Bucket, d Draw) (r Reservation, wait time.Duration, v Verdict, err error)
	// ReadPools reads each pool's steps within the window at now, without
	// drawing (eligibility, the page's budget).
	ReadPools(ctx context.Context, now time.Time, d Draw) ([]PoolUse, error)
}

// BucketUse is a bucket's state at a moment.
type BucketUse struct {
	// Used is the number of live slots.
	Used int
	// Reset is how long until the oldest live slot leaves the window (0
	// when the bucket is empty): the next time a slot frees.
	Reset time.Duration
	// Wait is how long until the bucket admits a drip (0 unless it is full).
	Wait time.Duration
}

// Bucket names one limit a request counts against.
type Bucket struct {
	Key   string
	Limit Limit
	// Policy names the kind of limit for clients (RateLimit headers):
	// address, stacking, ip, token, token-address. Stores ignore it.
	Policy string
}

// Reservation identifies reserved slots and what was drawn from a budget.
type Reservation struct {
	IDs []int64
	// Drawn is the budget draw to give back with the slots (nil: none).
	Drawn *Drawn
	// Amount is what the drip pays: its Want, scaled by the budget.
	Amount uint64
	// Budget is each budget pool's use after the draw (RateLimits).
	Budget []LimitUse
	// Use is each bucket's use as the reservation left it (its own slot
	// counted), or as it refused, in the order of the buckets given: what
	// the answer's RateLimit fields say. A limiter may leave it nil.
	Use []BucketUse
}

// UseBefore is a bucket's use from its n live slots, the oldest at
// oldest (ignored when n is 0), before a reservation; Wait is the
// caller's.
func UseBefore(n int, oldest time.Time, window time.Duration, now time.Time) BucketUse {
	u := BucketUse{Used: n}
	if n > 0 {
		u.Reset = max(oldest.Add(window).Sub(now), time.Nanosecond)
	}
	return u
}

// Reserved turns the use of buckets before a granted reservation into the
// use after it: one slot more in each active bucket, the new slot the
// oldest of an empty one. A grant found every bucket below its limit, so
// one it fills holds exactly Requests slots and frees one when its oldest
// leaves: its Wait is its Reset.
func Reserved(buckets []Bucket, before []BucketUse, _ time.Time) []BucketUse {
	after := make([]BucketUse, len(buckets))
	for i, b := range buckets {
		if b.Limit.Requests <= 0 || i >= len(before) {
			continue
		}
		after[i] = BucketUse{Used: before[i].Used + 1, Reset: before[i].Reset}
		if before[i].Used == 0 {
			after[i].Reset = b.Limit.Window
		}
		if after[i].Used >= b.Limit.Requests {
			after[i].Wait = after[i].Reset
		}
	}
	return after
}

// ClientBucket is the rate-limit group of a client IP, as the drip history
// keeps it: the IPv4 address or IPv6 /64; "" when unknown.
func ClientBucket(ip netip.Addr) string {
	if !ip.IsValid() {
		return ""
	}
	return ipBucketKey(ip)[len("ip:"):]
}

// TokenQuota is an API token's allowance; it replaces the per-address limit
// for the token's drips.
type TokenQuota struct {
	Name       string
	Quota      Limit // all drips made with the token
	PerAddress Limit // drips per recipient address with the token
	// From and Until bound when the token is accepted (zero: no bound):
	// a workshop's code that turns itself off when the event ends.
	From, Until time.Time
}

// activeAt reports whether the token is accepted at now.
func (q TokenQuota) activeAt(now time.Time) bool {
	return (q.From.IsZero() || !now.Before(q.From)) && (q.Until.IsZero() || now.Before(q.Until))
}
