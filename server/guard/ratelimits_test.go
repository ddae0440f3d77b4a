package guard

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func reserveErr(t *testing.T, r *RateLimits, a Admission) error {
	t.Helper()
	_, err := r.Reserve(context.Background(), a)
	return err
}

func isLimited(err error) bool {
	var l *Limited
	return errors.As(err, &l)
}

// Contract principals count against their deployer's address: otherwise
// every new contract name would be a fresh per-address allowance.
func TestContractPrincipalsShareTheAddressBucket(t *testing.T) {
	r := NewRateLimits(Limits{PerAddress: Limit{Requests: 1, Window: time.Hour}}, nil, nil)
	to := testPrincipal(1)
	if err := reserveErr(t, r, Admission{Recipient: to}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		c := stacks.Principal{Address: to.Address, ContractName: name}
		if err := reserveErr(t, r, Admission{Recipient: c}); !isLimited(err) {
			t.Fatalf("reserve for %s: %v, want limited", c, err)
		}
	}
}

// A refusal says when the tightest bucket frees a slot; stacking drips have
// a bucket of their own; a release gives the slot back.
func TestRateLimitsRetryAfterStackingAndRelease(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	r := NewRateLimits(Limits{PerAddress: Limit{Requests: 1, Window: time.Hour},
		StackingPerAddress: Limit{Requests: 1, Window: 48 * time.Hour}}, nil, clk)
	to := testPrincipal(2)
	res, err := r.Reserve(context.Background(), Admission{Recipient: to})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Release(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	if err := reserveErr(t, r, Admission{Recipient: to}); err != nil {
		t.Fatalf("slot not released: %v", err)
	}
	clk.Step(10 * time.Minute)
	err = reserveErr(t, r, Admission{Recipient: to})
	var l *Limited
	if !errors.As(err, &l) || l.RetryAfter != 50*time.Minute {
		t.Fatalf("err %v, want limited with RetryAfter 50m", err)
	}
	if err := reserveErr(t, r, Admission{Recipient: to, Stacking: true}); err != nil {
		t.Fatalf("stacking drip blocked by the default bucket: %v", err)
	}
}

// An API token's drips count in the token's buckets, not the anonymous
// per-address one, and skip the per-IP limit when the grant says so.
func TestRateLimitsTokenBuckets(t *testing.T) {
	r := NewRateLimits(Limits{PerAddress: Limit{Requests: 1, Window: time.Hour}, PerIP: Limit{Requests: 1, Window: time.Hour}}, nil, nil)
	to := testPrincipal(3)
	ip := netip.MustParseAddr("198.51.100.7")
	tok := &TokenQuota{Name: "ci", Quota: Limit{Requests: 3, Window: time.Hour}, PerAddress: Limit{Requests: 2, Window: time.Hour}}
	g := Grant{Token: tok, SkipIPLimit: true, Bypassed: bypassToken}
	for i := range 2 {
		if err := reserveErr(t, r, Admission{Recipient: to, ClientIP: ip, Grant: g}); err != nil {
			t.Fatalf("token drip %d: %v", i, err)
		}
	}
	if err := reserveErr(t, r, Admission{Recipient: to, ClientIP: ip, Grant: g}); !isLimited(err) {
		t.Fatalf("third token drip to one address: %v, want limited", err)
	}
	if err := reserveErr(t, r, Admission{Recipient: testPrincipal(4), ClientIP: ip, Grant: g}); err != nil {
		t.Fatalf("token drip to another address: %v", err)
	}
	if err := reserveErr(t, r, Admission{Recipient: testPrincipal(5), ClientIP: ip, Grant: g}); !isLimited(err) {
		t.Fatalf("fourth token drip: %v, want the token's quota to refuse it", err)
	}
	// The anonymous allowance of the address and the IP are untouched.
	if err := reserveErr(t, r, Admission{Recipient: to, ClientIP: ip}); err != nil {
		t.Fatalf("anonymous drip after token drips: %v", err)
	}
}

// Exactly the limit passes under concurrency, per address and per client
// (IPv6 grouped by /64).
func TestRateLimitsExactUnderConcurrency(t *testing.T) {
	r := NewRateLimits(Limits{PerAddress: Limit{Requests: 5, Window: time.Hour}, PerIP: Limit{Requests: 30, Window: time.Hour}}, nil, nil)
	count := func(n int, adm func(i int) Admission) (ok, limited int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range n {
			wg.Go(func() {
				err := reserveErr(t, r, adm(i))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case isLimited(err):
					limited++
				default:
					t.Errorf("unexpected %v", err)
				}
			})
		}
		wg.Wait()
		return ok, limited
	}
	to := testPrincipal(6)
	if ok, limited := count(200, func(i int) Admission {
		return Admission{Recipient: to, ClientIP: netip.AddrFrom4([4]byte{10, 0, byte(i % 2), 1})}
	}); ok != 5 || limited != 195 {
		t.Fatalf("ok=%d limited=%d, want exactly 5 and 195", ok, limited)
	}
	if ok, limited := count(40, func(i int) Admission {
		// Vary the host part inside one /64: still one client.
		return Admission{Recipient: testPrincipal(byte(100 + i)), ClientIP: netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)})}
	}); ok != 30 || limited != 10 {
		t.Fatalf("per-IP ok=%d limited=%d, want 30/10", ok, limited)
	}
}

// Limits kept in a store outlive the process: a restarted faucet over the
// same store still refuses the drip over the limit.
func TestRateLimitsSurviveARestart(t *testing.T) {
	store := NewMemoryLimiter()
	lim := Limits{PerAddress: Limit{Requests: 5, Window: 5 * time.Minute}}
	to := testPrincipal(7)
	before := NewRateLimits(lim, store, nil)
	for i := range 5 {
		if err := reserveErr(t, before, Admission{Recipient: to}); err != nil {
			t.Fatalf("drip %d: %v", i, err)
		}
	}
	after := NewRateLimits(lim, store, nil)
	if err := reserveErr(t, after, Admission{Recipient: to}); !isLimited(err) {
		t.Fatalf("6th drip after restart: %v, want limited", err)
	}
}

// A store that cannot answer is an error, never a refusal or a pass.
func TestRateLimitsStoreFailure(t *testing.T) {
	r := NewRateLimits(Limits{PerAddress: Limit{Requests: 1, Window: time.Hour}}, failingLimiter{}, nil)
	err := reserveErr(t, r, Admission{Recipient: testPrincipal(8)})
	if err == nil || isLimited(err) || !errors.Is(err, errLimiterDown) {
		t.Fatalf("err %v, want the store's error", err)
	}
}

var errLimiterDown = errors.New("store down")

type failingLimiter struct{}

func (failingLimiter) Reserve(context.Context, time.Time, []Bucket) (Reservation, time.Duration, bool, error) {
	return Reservation{}, 0, false, errLimiterDown
}

func (failingLimiter) Peek(context.Context, time.Time, []Bucket) ([]BucketUse, error) {
	return nil, errLimiterDown
}

func (failingLimiter) Release(context.Context, Reservation) error { return errLimiterDown }

// sBTC drips count in buckets of their own, per address and per IP: an
// address that used its STX allowance still gets sBTC and the other way
// round, while an API token's quota counts both.
func TestRateLimitsPerAsset(t *testing.T) {
	hour := Limit{Requests: 1, Window: time.Hour}
	r := NewRateLimits(Limits{PerAddress: hour, PerIP: Limit{Requests: 5, Window: time.Hour},
		Assets: map[string]AssetLimits{"sbtc": {PerAddress: hour, PerIP: Limit{Requests: 2, Window: time.Hour}}}}, nil, nil)
	to := testPrincipal(6)
	ip := netip.MustParseAddr("198.51.100.9")
	stx, sbtc := Admission{Recipient: to, ClientIP: ip}, Admission{Recipient: to, Asset: "sbtc", ClientIP: ip}
	if err := reserveErr(t, r, stx); err != nil {
		t.Fatal(err)
	}
	if err := reserveErr(t, r, sbtc); err != nil {
		t.Fatalf("sBTC drip after an STX drip: %v", err)
	}
	if err := reserveErr(t, r, sbtc); !isLimited(err) {
		t.Fatalf("second sBTC drip to one address: %v, want limited", err)
	}
	if err := reserveErr(t, r, stx); !isLimited(err) {
		t.Fatalf("second STX drip to one address: %v, want limited", err)
	}
	// The sBTC per-IP bucket (2) is its own: one more address passes, the
	// next is refused although STX's IP bucket (5) has room.
	if err := reserveErr(t, r, Admission{Recipient: testPrincipal(7), Asset: "sbtc", ClientIP: ip}); err != nil {
		t.Fatal(err)
	}
	if err := reserveErr(t, r, Admission{Recipient: testPrincipal(8), Asset: "sbtc", ClientIP: ip}); !isLimited(err) {
		t.Fatalf("third sBTC drip from one IP: %v, want limited", err)
	}
	if err := reserveErr(t, r, Admission{Recipient: testPrincipal(8), ClientIP: ip}); err != nil {
		t.Fatalf("STX drip refused by sBTC's IP bucket: %v", err)
	}
	tok := &TokenQuota{Name: "ci", Quota: Limit{Requests: 2, Window: time.Hour}, PerAddress: Limit{Requests: 5, Window: time.Hour}}
	g := Grant{Token: tok, SkipIPLimit: true, Bypassed: bypassToken}
	if err := reserveErr(t, r, Admission{Recipient: to, Grant: g}); err != nil {
		t.Fatal(err)
	}
	if err := reserveErr(t, r, Admission{Recipient: to, Asset: "sbtc", Grant: g}); err != nil {
		t.Fatal(err)
	}
	if err := reserveErr(t, r, Admission{Recipient: to, Asset: "sbtc", Grant: g}); !isLimited(err) {
		t.Fatalf("third token drip across assets: %v, want the shared quota to refuse it", err)
	}
}

// BTC drips have their own buckets too, keyed by the Bitcoin address: two
// addresses never share a slot, and neither STX nor sBTC drips use one up.
func TestRateLimitsBTC(t *testing.T) {
	hour := Limit{Requests: 1, Window: time.Hour}
	r := NewRateLimits(Limits{PerAddress: hour, PerIP: hour,
		Assets: map[string]AssetLimits{"sbtc": {PerAddress: hour, PerIP: hour},
			"btc": {PerAddress: hour, PerIP: Limit{Requests: 2, Window: time.Hour}}}}, nil, nil)
	ip := netip.MustParseAddr("198.51.100.10")
	btc := func(addr string) Admission { return Admission{Address: addr, Asset: "btc", ClientIP: ip} }
	if err := reserveErr(t, r, Admission{Recipient: testPrincipal(9), ClientIP: ip}); err != nil {
		t.Fatal(err)
	}
	if err := reserveErr(t, r, btc("bcrt1qexampleaddressone")); err != nil {
		t.Fatalf("BTC drip after an STX drip from the same IP: %v", err)
	}
	if err := reserveErr(t, r, btc("bcrt1qexampleaddressone")); !isLimited(err) {
		t.Fatalf("second BTC drip to one address: %v, want limited", err)
	}
	if err := reserveErr(t, r, btc("bcrt1qexampleaddresstwo")); err != nil {
		t.Fatalf("BTC drip to another address: %v", err)
	}
	if err := reserveErr(t, r, btc("bcrt1qexampleaddressthree")); !isLimited(err) {
		t.Fatalf("third BTC drip from one IP: %v, want BTC's IP bucket to refuse it", err)
	}
	if err := reserveErr(t, r, Admission{Recipient: testPrincipal(9), Asset: "sbtc", ClientIP: ip}); err != nil {
		t.Fatalf("sBTC drip refused by BTC's buckets: %v", err)
	}
}

// Any asset by name: each token has buckets of its own, keyed by its name,
// so two tokens never share a slot.
func TestRateLimitsAnyAsset(t *testing.T) {
	one := Limit{Requests: 1, Window: time.Hour}
	r := NewRateLimits(DefaultLimits().With("tusd", AssetLimits{PerAddress: one}).With("lp", DefaultAssetLimits()), nil, nil)
	to := testPrincipal(10)
	if err := reserveErr(t, r, Admission{Recipient: to, Asset: "tusd"}); err != nil {
		t.Fatal(err)
	}
	if err := reserveErr(t, r, Admission{Recipient: to, Asset: "tusd"}); !isLimited(err) {
		t.Fatalf("second tUSD drip: %v, want limited", err)
	}
	def := DefaultAssetLimits().PerAddress.Requests
	for i := range def {
		if err := reserveErr(t, r, Admission{Recipient: to, Asset: "lp"}); err != nil {
			t.Fatalf("drip %d of an asset with default limits: %v", i, err)
		}
	}
	if err := reserveErr(t, r, Admission{Recipient: to, Asset: "lp"}); !isLimited(err) {
		t.Fatalf("drip %d of an asset with default limits: %v, want limited", def+1, err)
	}
	if lim := r.Limits().Of("other"); lim != (AssetLimits{}) {
		t.Fatalf("Of(other) = %+v, want no limits", lim)
	}
}

// Stacking drips draw from a share of the STX budget of their own as well
// as from the total; default drips and other assets never touch it.
func TestStackingShareOfTheBudget(t *testing.T) {
	ctx := context.Background()
	r := NewRateLimits(Limits{Budgets: map[string]Budget{
		"stx": {Amount: 1000, Per: time.Hour, StackingPercent: 30, FloorPercent: 100},
		"btc": {Amount: 1000, Per: time.Hour},
	}}, nil, nil)
	stacking := Admission{Recipient: testPrincipal(3), Stacking: true, Want: 200, Floor: 100}
	res, err := r.Reserve(ctx, stacking)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Budget) != 2 || res.Budget[1].Policy != PolicyStackingBudget || !res.Budget[1].BudgetPool {
		t.Fatalf("a stacking drip's pools: %+v, want the total and a 30 %% share", res.Budget)
	}
	var ex *Exhausted
	if err := reserveErr(t, r, stacking); !errors.As(err, &ex) || ex.Pool != PoolKey("stx", StackingPool, time.Hour) {
		t.Fatalf("a second stacking drip of 200 with 100 of the share left: %v", err)
	}
	for range 3 {
		if res, err := r.Reserve(ctx, Admission{Recipient: testPrincipal(4), Want: 200}); err != nil || len(res.Budget) != 1 {
			t.Fatalf("a default drip beside the spent share: %+v, %v", res.Budget, err)
		}
	}
	use, err := r.Budgets(ctx, "stx", nil)
	if err != nil || len(use) != 2 || use[0].Left != 200 || use[1].Left != 100 || use[1].Pool.Policy != PolicyStackingBudget || use[1].Pool.Capacity != 300 {
		t.Fatalf("STX budgets: %+v, %v; want 200 of the total and 100 of the share left", use, err)
	}
	if use, err := r.Budgets(ctx, "btc", nil); err != nil || len(use) != 1 {
		t.Fatalf("BTC budgets: %+v, %v; want the total only", use, err)
	}
	if err := (Budget{Amount: 1, Per: time.Hour, StackingPercent: 101}).Validate("b"); err == nil || err.Error() != "b: stacking must be a percent, 0 to 100" {
		t.Errorf("a share above 100: %v", err)
	}
}
