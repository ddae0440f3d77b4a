package guard

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
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
		return Reservation{Use: res.Use}, wait, false, nil
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
	// not sent is not charged). Releasing twice or an empty one is a no-op.
	Release(ctx context.Context, r Reservation) error
	// Peek reads each bucket's use at now without taking a slot: what the
	// eligibility endpoint and the RateLimit headers say.
	Peek(ctx context.Context, now time.Time, buckets []Bucket) ([]BucketUse, error)
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

// Reservation identifies reserved slots.
type Reservation struct {
	IDs []int64
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
}

// Admission is a request that passed the checks, as the limits count it.
type Admission struct {
	Recipient stacks.Principal
	// Address is the recipient of an asset paid outside Stacks (BTC), as
	// its canonical address text; Recipient is then zero.
	Address string
	// Asset is "" (or "stx") for STX, or another asset's name: each asset
	// has its own buckets.
	Asset    string
	Stacking bool
	// ClientIP is counted by the per-IP limit unless Grant.SkipIPLimit; the
	// zero Addr skips it.
	ClientIP netip.Addr
	Grant    Grant
}

// Limited is a request refused by a rate limit.
type Limited struct {
	// RetryAfter is how long until the tightest bucket frees a slot.
	RetryAfter time.Duration
	// Use is each limit's use as it refused (nil if the limiter did not
	// say).
	Use []LimitUse
}

func (l *Limited) Error() string {
	return fmt.Sprintf("guard: rate limited; retry in %v", l.RetryAfter)
}

// RateLimits charges admitted requests against the limits, keeping the
// slots in a Limiter (memory, or a store shared by replicas). Safe for
// concurrent use.
type RateLimits struct {
	limits Limits
	store  Limiter
	now    func() time.Time
}

// NewRateLimits returns limits kept in store (nil: in memory) on the clock
// now (nil: time.Now). Zero limits admit everything.
func NewRateLimits(limits Limits, store Limiter, now func() time.Time) *RateLimits {
	if store == nil {
		store = NewMemoryLimiter()
	}
	if now == nil {
		now = time.Now
	}
	return &RateLimits{limits: limits, store: store, now: now}
}

// Limits returns the configured limits.
func (r *RateLimits) Limits() Limits { return r.limits }

// Reserve takes a slot in every bucket a counts against, or none: it
// returns a *Limited when one is full, or the store's error (wrapped).
func (r *RateLimits) Reserve(ctx context.Context, a Admission) (Reservation, error) {
	buckets := r.buckets(a)
	res, wait, ok, err := r.store.Reserve(ctx, r.now(), buckets)
	if err != nil {
		return Reservation{}, fmt.Errorf("guard: reserve rate-limit slots: %w", err)
	}
	if !ok {
		return Reservation{}, &Limited{RetryAfter: wait, Use: limitUses(buckets, res.Use)}
	}
	return res, nil
}

// Uses names the use a reservation of a left, by limit (the RateLimit
// fields of a granted drip).
func (r *RateLimits) Uses(a Admission, res Reservation) []LimitUse {
	return limitUses(r.buckets(a), res.Use)
}

// limitUses pairs the active buckets with their use; nil when the limiter
// reported none.
func limitUses(buckets []Bucket, use []BucketUse) []LimitUse {
	if len(use) != len(buckets) {
		return nil
	}
	var out []LimitUse
	for i, b := range buckets {
		if b.Limit.Requests > 0 {
			out = append(out, LimitUse{Policy: b.Policy, Limit: b.Limit, BucketUse: use[i]})
		}
	}
	return out
}

// The Bucket.Policy names.
const (
	PolicyAddress      = "address"
	PolicyStacking     = "stacking"
	PolicyIP           = "ip"
	PolicyToken        = "token"
	PolicyTokenAddress = "token-address"
)

// LimitUse is one limit a request counts against and its use now.
type LimitUse struct {
	Policy string
	Limit  Limit
	BucketUse
}

// Peek reads the use of every limit a counts against (those with
// Requests > 0), in order, without reserving: what a drip would meet now.
func (r *RateLimits) Peek(ctx context.Context, a Admission) ([]LimitUse, error) {
	var active []Bucket
	for _, b := range r.buckets(a) {
		if b.Limit.Requests > 0 {
			active = append(active, b)
		}
	}
	if len(active) == 0 {
		return nil, nil
	}
	use, err := r.store.Peek(ctx, r.now(), active)
	if err != nil {
		return nil, fmt.Errorf("guard: read rate-limit use: %w", err)
	}
	out := make([]LimitUse, len(active))
	for i, b := range active {
		out[i] = LimitUse{Policy: b.Policy, Limit: b.Limit, BucketUse: use[i]}
	}
	return out, nil
}

// Release gives a reservation back: its drip was certainly not sent.
func (r *RateLimits) Release(ctx context.Context, res Reservation) error {
	if err := r.store.Release(ctx, res); err != nil {
		return fmt.Errorf("guard: release rate-limit slots: %w", err)
	}
	return nil
}

// buckets names the limits a request counts against. A contract principal
// counts as its deployer's address: a fresh contract name must not be a
// fresh allowance.
func (r *RateLimits) buckets(a Admission) []Bucket {
	addr := a.Recipient.Address.String()
	refs := make([]Bucket, 0, 3)
	token := a.Grant.Token
	if a.Asset != "" && a.Asset != "stx" {
		return r.assetBuckets(a, a.Asset+":", r.limits.Of(a.Asset))
	}
	switch {
	case a.Stacking:
		// Stacking drips are large: a token never widens their limit.
		refs = append(refs, Bucket{"stacking:" + addr, r.limits.StackingPerAddress, PolicyStacking})
	case token != nil:
		// The token's own per-address bucket, so its users cannot eat the
		// anonymous allowance of an address and vice versa.
		refs = append(refs, Bucket{"token:" + token.Name + ":address:" + addr, token.PerAddress, PolicyTokenAddress})
	default:
		refs = append(refs, Bucket{"address:" + addr, r.limits.PerAddress, PolicyAddress})
	}
	if token != nil {
		refs = append(refs, Bucket{"token:" + token.Name, token.Quota, PolicyToken})
	}
	if a.ClientIP.IsValid() && !a.Grant.SkipIPLimit {
		refs = append(refs, Bucket{ipBucketKey(a.ClientIP), r.limits.PerIP, PolicyIP})
	}
	return refs
}

// assetBuckets are an asset's buckets, each key prefixed with the asset's
// name so they never share a slot with another asset's (sBTC's and BTC's
// keys are those they always had). An API token's quota is one
// for all assets; its per-address allowance is per asset.
func (r *RateLimits) assetBuckets(a Admission, prefix string, lim AssetLimits) []Bucket {
	addr := a.Address
	if addr == "" {
		addr = a.Recipient.Address.String()
	}
	refs := make([]Bucket, 0, 3)
	if token := a.Grant.Token; token != nil {
		refs = append(refs, Bucket{prefix + "token:" + token.Name + ":address:" + addr, token.PerAddress, PolicyTokenAddress},
			Bucket{"token:" + token.Name, token.Quota, PolicyToken})
	} else {
		refs = append(refs, Bucket{prefix + "address:" + addr, lim.PerAddress, PolicyAddress})
	}
	if a.ClientIP.IsValid() && !a.Grant.SkipIPLimit {
		refs = append(refs, Bucket{prefix + ipBucketKey(a.ClientIP), lim.PerIP, PolicyIP})
	}
	return refs
}
