package guard

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

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
	// Person is the signed-in requester, nil when anonymous: its tier's
	// limit, keyed by the person, replaces the per-address and per-IP
	// limits (a stacking drip keeps its per-address one).
	Person *Person

	// Want is the drip's full amount in the asset's base units: what the
	// asset's budget, if it has one, draws (0 draws nothing).
	Want uint64
	// MaxPercent caps the drip below Want (the treasury's balance
	// scaling, see Budget.BalancePercent); 0 is 100.
	MaxPercent int
	// Floor is the drip's floor in percent of Want (0: the budget's);
	// 100 takes the whole drip or nothing (a stacking drip).
	Floor int
	// Pool names the share of the budget the drip also draws from (a
	// tier: "anonymous" or a sign-in tier's name), and PoolPercent its
	// size in percent of the budget. "" or a share of 100 or more draws
	// from the asset's total only.
	Pool        string
	PoolPercent int
}

// Person is a signed-in requester as the limits count it.
type Person struct {
	// Key identifies the person (a hash of issuer and subject).
	Key string
	// Tier is the name of the person's tier, and Limit its drips per
	// person and asset.
	Tier  string
	Limit Limit
}

// Exhausted is a request refused by the budget: the share it draws from
// cannot pay a drip at its floor now.
type Exhausted struct {
	// RetryAfter is how long until a drip at the floor fits.
	RetryAfter time.Duration
	// Pool is the pool that refused ("" the asset's total), Use each
	// limit's and pool's use as it refused.
	Pool string
	Use  []LimitUse
}

func (e *Exhausted) Error() string {
	return fmt.Sprintf("guard: budget exhausted; a drip fits in %v", e.RetryAfter)
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
	clock  clock.PassiveClock
}

// NewRateLimits returns limits kept in store (nil: in memory) on clk (nil:
// the real clock). Zero limits admit everything.
func NewRateLimits(limits Limits, store Limiter, clk clock.PassiveClock) *RateLimits {
	if store == nil {
		store = NewMemoryLimiter()
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &RateLimits{limits: limits, store: store, clock: clk}
}

// Limits returns the configured limits.
func (r *RateLimits) Limits() Limits { return r.limits }

// Reserve takes a slot in every bucket a counts against and, when its
// asset has a budget, draws its drip from it, all or nothing: it returns a
// *Limited when a bucket is full, an *Exhausted when the budget cannot pay
// the drip at its floor, or the store's error (wrapped). The granted
// amount is Reservation.Amount.
func (r *RateLimits) Reserve(ctx context.Context, a Admission) (Reservation, error) {
	buckets := r.buckets(a)
	d, drawing := r.draw(a)
	if !drawing {
		res, wait, ok, err := r.store.Reserve(ctx, r.clock.Now(), buckets)
		if err != nil {
			return Reservation{}, fmt.Errorf("guard: reserve rate-limit slots: %w", err)
		}
		if !ok {
			return Reservation{}, &Limited{RetryAfter: wait, Use: limitUses(buckets, res.Use)}
		}
		res.Amount = capPercent(a.Want, a.MaxPercent)
		return res, nil
	}
	bl, ok := r.store.(BudgetLimiter)
	if !ok {
		return Reservation{}, fmt.Errorf("guard: the limiter (%T) keeps no budgets", r.store)
	}
	res, wait, v, err := bl.ReserveDraw(ctx, r.clock.Now(), buckets, d)
	switch {
	case err != nil:
		return Reservation{}, fmt.Errorf("guard: reserve rate-limit slots and budget: %w", err)
	case wait > 0:
		return Reservation{}, &Limited{RetryAfter: wait, Use: limitUses(buckets, res.Use)}
	case v.Amount == 0:
		use := append(limitUses(buckets, res.Use), budgetUses(d, v)...)
		return Reservation{}, &Exhausted{RetryAfter: v.Wait, Pool: tightest(d, v), Use: use}
	}
	res.Amount, res.Budget = v.Amount, budgetUses(d, v)
	return res, nil
}

// draw is the budget draw of a, if its asset has a budget and a wants an
// amount.
func (r *RateLimits) draw(a Admission) (Draw, bool) {
	asset := a.Asset
	if asset == "" {
		asset = "stx"
	}
	b, ok := r.limits.Budgets[asset]
	if !ok || !b.On() || a.Want == 0 {
		return Draw{}, false
	}
	floor := b.Floor()
	if a.Floor > 0 {
		floor = min(a.Floor, 100)
	}
	d := Draw{Window: b.Per, Step: b.Step(), Want: a.Want, MaxPercent: a.MaxPercent, FloorPercent: floor, ScaleBelowPercent: b.ScaleBelow(),
		Pools: []Pool{{Key: PoolKey(asset, "", b.Per), Capacity: b.Amount, Policy: PolicyBudget}}}
	if a.Pool != "" && a.PoolPercent > 0 && a.PoolPercent < 100 {
		d.Pools = append(d.Pools, Pool{Key: PoolKey(asset, a.Pool, b.Per), Capacity: mulDiv(b.Amount, uint64(a.PoolPercent), 100),
			Policy: PolicyBudget + "-" + a.Pool})
	}
	if sp, ok := stackingPool(asset, b); ok && a.Stacking {
		d.Pools = append(d.Pools, sp)
	}
	return d, true
}

// stackingPool is the share of b that stacking drips draw from together,
// if asset has one: STX (the only asset with stacking drips) with a share
// below 100 %.
func stackingPool(asset string, b Budget) (Pool, bool) {
	pct := b.Stacking()
	if asset != "stx" || pct >= 100 {
		return Pool{}, false
	}
	return Pool{Key: PoolKey(asset, StackingPool, b.Per), Capacity: mulDiv(b.Amount, uint64(pct), 100), Policy: PolicyStackingBudget}, true
}

// tightest names the pool that refused a draw: the one with the least
// left ("" for the asset's total).
func tightest(d Draw, v Verdict) string {
	best := 0
	for i, u := range v.Use {
		if u.Left < v.Use[best].Left {
			best = i
		}
	}
	if best == 0 {
		return ""
	}
	return d.Pools[best].Key
}

// budgetUses are a draw's pools as RateLimit fields count them: in drips
// of the full amount per window. r is the full drips left, but 1 while a
// drip at the floor still fits and 0 once it does not, so that the
// fields agree with the next drip's answer.
func budgetUses(d Draw, v Verdict) []LimitUse {
	floorAmount := ceilPercent(d.Want, d.floor())
	out := make([]LimitUse, 0, len(v.Use))
	for _, u := range v.Use {
		q := int(min(u.Pool.Capacity/d.Want, math.MaxInt32))
		r := int(min(u.Left/d.Want, math.MaxInt32))
		if u.Left >= floorAmount {
			r = max(r, 1)
		} else {
			r = 0
		}
		lu := LimitUse{Policy: u.Pool.Policy, Limit: Limit{Requests: max(q, 1), Window: d.Window},
			BudgetPool: true, BucketUse: BucketUse{Used: max(q, 1) - r, Reset: u.Reset}}
		if r == 0 {
			// Refused: until a drip fits; granted (its own drip took the
			// rest): until the oldest step leaves.
			lu.Wait = v.Wait
			if v.Amount > 0 {
				lu.Wait = u.Reset
			}
			lu.Wait = max(lu.Wait, time.Nanosecond)
		}
		out = append(out, lu)
	}
	return out
}

// Uses names the use a reservation of a left, by limit and budget pool
// (the RateLimit fields of a granted drip).
func (r *RateLimits) Uses(a Admission, res Reservation) []LimitUse {
	return append(limitUses(r.buckets(a), res.Use), res.Budget...)
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
	PolicyAddress  = "address"
	PolicyStacking = "stacking"
	// PolicyStackingBudget is the stacking drips' share of the STX budget
	// (tier shares are "budget-<tier>").
	PolicyStackingBudget = "stacking-budget"
	PolicyIP             = "ip"
	PolicyToken          = "token"
	PolicyTokenAddress   = "token-address"
	// PolicyPerson is a signed-in person's limit.
	PolicyPerson = "person"
	// PolicyBudget is an asset's budget; a tier's share of it is
	// "budget-<tier>".
	PolicyBudget = "budget"
)

// LimitUse is one limit a request counts against and its use now.
type LimitUse struct {
	Policy string
	Limit  Limit
	// BudgetPool: this is a budget pool, counted in drips (see
	// budgetUses), not a rate limit.
	BudgetPool bool
	BucketUse
}

// Preview is what a drip would meet now, read without reserving.
type Preview struct {
	// Use is every limit's and budget pool's use, in order.
	Use []LimitUse
	// Wait is how long until the tightest limit admits a drip (0: now).
	Wait time.Duration
	// Amount is what the budget would pay (Want without a budget); 0 with
	// BudgetWait when it would refuse.
	Amount     uint64
	BudgetWait time.Duration
	// BudgetPool is the pool that would refuse ("" the asset's total).
	BudgetPool string
}

// Peek reads the use of every limit a counts against (those with
// Requests > 0), in order, and its budget, without reserving: what a drip
// would meet now.
func (r *RateLimits) Peek(ctx context.Context, a Admission) (Preview, error) {
	p := Preview{Amount: capPercent(a.Want, a.MaxPercent)}
	var active []Bucket
	for _, b := range r.buckets(a) {
		if b.Limit.Requests > 0 {
			active = append(active, b)
		}
	}
	now := r.clock.Now()
	if len(active) > 0 {
		use, err := r.store.Peek(ctx, now, active)
		if err != nil {
			return Preview{}, fmt.Errorf("guard: read rate-limit use: %w", err)
		}
		for i, b := range active {
			p.Use = append(p.Use, LimitUse{Policy: b.Policy, Limit: b.Limit, BucketUse: use[i]})
			p.Wait = max(p.Wait, use[i].Wait)
		}
	}
	d, drawing := r.draw(a)
	if !drawing {
		return p, nil
	}
	bl, ok := r.store.(BudgetLimiter)
	if !ok {
		return Preview{}, fmt.Errorf("guard: the limiter (%T) keeps no budgets", r.store)
	}
	use, err := bl.ReadPools(ctx, now, d)
	if err != nil {
		return Preview{}, fmt.Errorf("guard: read budget use: %w", err)
	}
	v := d.Decide(use, now)
	p.Amount, p.BudgetWait = v.Amount, v.Wait
	if v.Amount == 0 {
		p.BudgetPool = tightest(d, v)
	} else {
		// What is left before the drip, as its own answer would show it
		// after: the fields of a granted drip count it.
		for i := range v.Use {
			v.Use[i].Left += v.Amount
		}
	}
	p.Use = append(p.Use, budgetUses(d, v)...)
	return p, nil
}

// Budgets reads what is left of asset's budget now: its total first, then
// each tier's share in the order of pools (tier name and percent), then,
// for STX with a stacking share below 100 %, the stacking drips' share.
func (r *RateLimits) Budgets(ctx context.Context, asset string, pools []TierShare) ([]BudgetUse, error) {
	b, ok := r.limits.Budgets[asset]
	if !ok || !b.On() {
		return nil, nil
	}
	bl, ok := r.store.(BudgetLimiter)
	if !ok {
		return nil, fmt.Errorf("guard: the limiter (%T) keeps no budgets", r.store)
	}
	d := Draw{Window: b.Per, Step: b.Step(), Want: 1, FloorPercent: 100, ScaleBelowPercent: b.ScaleBelow(),
		Pools: []Pool{{Key: PoolKey(asset, "", b.Per), Capacity: b.Amount, Policy: PolicyBudget}}}
	for _, t := range pools {
		pct := min(max(t.Percent, 0), 100)
		d.Pools = append(d.Pools, Pool{Key: PoolKey(asset, t.Tier, b.Per), Capacity: mulDiv(b.Amount, uint64(pct), 100), Policy: PolicyBudget + "-" + t.Tier})
	}
	if sp, ok := stackingPool(asset, b); ok {
		d.Pools = append(d.Pools, sp)
	}
	now := r.clock.Now()
	use, err := bl.ReadPools(ctx, now, d)
	if err != nil {
		return nil, fmt.Errorf("guard: read budget use: %w", err)
	}
	v := d.Decide(use, now)
	if v.Amount > 0 {
		for i := range v.Use {
			v.Use[i].Left += v.Amount
		}
	}
	return v.Use, nil
}

// TierShare is a tier's share of a budget, in percent.
type TierShare struct {
	Tier    string
	Percent int
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
	if p := a.Person; p != nil {
		if a.Stacking {
			refs = append(refs, Bucket{"stacking:" + addr, r.limits.StackingPerAddress, PolicyStacking})
		}
		return append(refs, Bucket{"person:" + p.Key, p.Limit, PolicyPerson})
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
// name so they never share a slot with another asset's (the first token's and BTC's
// keys are those they always had). An API token's quota is one
// for all assets; its per-address allowance is per asset.
func (r *RateLimits) assetBuckets(a Admission, prefix string, lim AssetLimits) []Bucket {
	addr := a.Address
	if addr == "" {
		addr = a.Recipient.Address.String()
	}
	refs := make([]Bucket, 0, 3)
	if p := a.Person; p != nil {
		return append(refs, Bucket{prefix + "person:" + p.Key, p.Limit, PolicyPerson})
	}
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

// capPercent is want capped at pct percent (0: not capped), in whole
// percents as a budget's draw pays.
func capPercent(want uint64, pct int) uint64 {
	if pct <= 0 || pct >= 100 {
		return want
	}
	return PercentOf(want, pct)
}
