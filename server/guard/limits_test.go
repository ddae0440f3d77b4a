package guard

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestLimiterSlidingWindow(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := NewMemoryLimiter()
	lim := Limit{Requests: 2, Window: time.Minute}
	refs := []Bucket{{Key: "address:A", Limit: lim}}
	if _, _, ok := reserve(l, clk.Now(), refs); !ok {
		t.Fatal("first refused")
	}
	clk.Step(20 * time.Second)
	if _, _, ok := reserve(l, clk.Now(), refs); !ok {
		t.Fatal("second refused")
	}
	_, wait, ok := reserve(l, clk.Now(), refs)
	if ok || wait != 40*time.Second {
		t.Fatalf("third: ok=%v wait=%v, want refused with 40s", ok, wait)
	}
	clk.Step(40 * time.Second)
	if _, _, ok := reserve(l, clk.Now(), refs); !ok {
		t.Fatal("slot should free exactly one window after the first")
	}
}

func TestLimiterAllOrNothingAndRelease(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := NewMemoryLimiter()
	ip := Bucket{Key: "ip:1.2.3.4", Limit: Limit{Requests: 1, Window: time.Hour}}
	a := Bucket{Key: "address:A", Limit: Limit{Requests: 5, Window: time.Hour}}
	b := Bucket{Key: "address:B", Limit: Limit{Requests: 5, Window: time.Hour}}
	r, _, ok := reserve(l, clk.Now(), []Bucket{a, ip})
	if !ok {
		t.Fatal("first refused")
	}
	if _, _, ok := reserve(l, clk.Now(), []Bucket{b, ip}); ok {
		t.Fatal("IP bucket full, must refuse")
	}
	// The refused reservation must not have charged B.
	if b := l.buckets["address:B"]; b != nil && len(b.slots) != 0 {
		t.Fatalf("refused reservation charged B %d times", len(b.slots))
	}
	_ = l.Release(context.Background(), r)
	if _, _, ok := reserve(l, clk.Now(), []Bucket{b, ip}); !ok {
		t.Fatal("released slot not reusable")
	}
}

func TestLimiterExactUnderConcurrency(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := NewMemoryLimiter()
	refs := []Bucket{{Key: "address:A", Limit: Limit{Requests: 7, Window: time.Hour}}}
	var granted atomic.Int32
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if _, _, ok := reserve(l, clk.Now(), refs); ok {
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	if granted.Load() != 7 {
		t.Fatalf("granted %d, want exactly 7", granted.Load())
	}
}

func TestIPBucketKey(t *testing.T) {
	tests := []struct{ a, b string }{
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2:ffff::9"}, // same /64
		{"::ffff:192.0.2.1", "192.0.2.1"},                // mapped IPv4
	}
	for _, tt := range tests {
		if ipBucketKey(netip.MustParseAddr(tt.a)) != ipBucketKey(netip.MustParseAddr(tt.b)) {
			t.Errorf("%s and %s should share a bucket", tt.a, tt.b)
		}
	}
	if ipBucketKey(netip.MustParseAddr("2001:db8:1:2::1")) == ipBucketKey(netip.MustParseAddr("2001:db8:1:3::1")) {
		t.Error("different /64s must not share a bucket")
	}
	if ipBucketKey(netip.MustParseAddr("192.0.2.1")) == ipBucketKey(netip.MustParseAddr("192.0.2.2")) {
		t.Error("IPv4 addresses are not grouped")
	}
}

// A window longer than a week still holds: sweeping must not forget it.
func TestLimiterLongWindowSurvivesSweep(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := NewMemoryLimiter()
	long := []Bucket{{Key: "stacking:A", Limit: Limit{Requests: 1, Window: 30 * 24 * time.Hour}}}
	if _, _, ok := reserve(l, clk.Now(), long); !ok {
		t.Fatal("first refused")
	}
	clk.Step(8 * 24 * time.Hour)
	reserve(l, clk.Now(), []Bucket{{Key: "address:B", Limit: Limit{Requests: 1, Window: time.Minute}}}) // sweeps
	if _, _, ok := reserve(l, clk.Now(), long); ok {
		t.Fatal("30-day limit forgotten after 8 days")
	}
}

// Memory follows the windows: expired buckets are swept, not kept for a week.
func TestLimiterSweepsExpiredBuckets(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := NewMemoryLimiter()
	for i := range 1000 {
		if _, _, ok := reserve(l, clk.Now(), []Bucket{{Key: fmt.Sprintf("address:%d", i), Limit: Limit{Requests: 5, Window: 5 * time.Minute}}}); !ok {
			t.Fatal("refused")
		}
	}
	clk.Step(10 * time.Minute)
	reserve(l, clk.Now(), nil) // sweeps
	l.mu.Lock()
	n := len(l.buckets)
	l.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d expired buckets kept", n)
	}
}

// reserve is Reserve without a context or an error (the memory limiter never fails).
func reserve(l *MemoryLimiter, now time.Time, refs []Bucket) (Reservation, time.Duration, bool) {
	r, wait, ok, err := l.Reserve(context.Background(), now, refs)
	if err != nil {
		panic(err)
	}
	return r, wait, ok
}
