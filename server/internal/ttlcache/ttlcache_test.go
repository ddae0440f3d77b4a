package ttlcache

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestWaiterOutlivesStarter: the caller that starts a fetch gives up (its
// short deadline), yet a caller waiting on the same fetch gets the value, and
// the fetch itself was never cancelled.
func TestWaiterOutlivesStarter(t *testing.T) {
	v := &Value[int]{TTL: time.Minute}
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	var fetchErr atomic.Value
	fetch := func(ctx context.Context) (int, error) {
		calls.Add(1)
		close(started)
		<-release
		if err := ctx.Err(); err != nil {
			fetchErr.Store(err)
		}
		return 42, nil
	}
	shortCtx, cancelShort := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := v.Get(shortCtx, fetch)
		first <- err
	}()
	<-started
	second := make(chan int, 1)
	go func() {
		got, err := v.Get(context.Background(), fetch)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		second <- got
	}()
	cancelShort()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("starter: err = %v, want context.Canceled", err)
	}
	close(release)
	if got := <-second; got != 42 {
		t.Fatalf("waiter got %d, want 42", got)
	}
	if e := fetchErr.Load(); e != nil {
		t.Fatalf("shared fetch saw its context end: %v", e)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("fetches = %d, want 1", n)
	}
	// The value is cached now.
	if got, err := v.Get(context.Background(), fetch); err != nil || got != 42 || calls.Load() != 1 {
		t.Fatalf("cached read = %d, %v (fetches %d)", got, err, calls.Load())
	}
}

// TestTTL: a value is reused within its TTL and refetched after, on an
// injected clock.
func TestTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	v := &Value[int]{TTL: 30 * time.Millisecond, Clock: clk}
	var calls atomic.Int32
	fetch := func(context.Context) (int, error) { return int(calls.Add(1)), nil }
	for range 5 {
		if got, _ := v.Get(context.Background(), fetch); got != 1 {
			t.Fatalf("within TTL: got %d, want 1", got)
		}
	}
	clk.Step(29 * time.Millisecond)
	if !v.Fresh() {
		t.Fatal("not fresh 1 ms before the TTL ends")
	}
	clk.Step(time.Millisecond)
	if v.Fresh() {
		t.Fatal("still fresh at the TTL")
	}
	if got, _ := v.Get(context.Background(), fetch); got != 2 {
		t.Fatalf("after TTL: got %d, want 2", got)
	}
}

// TestErrorsNotCached: a failed fetch is returned to its callers but the next
// Get tries again; the last good value stays peekable.
func TestErrorsNotCached(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	v := &Value[string]{TTL: time.Second, Clock: clk}
	v.Set("old")
	clk.Step(2 * time.Second)
	boom := errors.New("boom")
	if _, err := v.Get(context.Background(), func(context.Context) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if !errors.Is(v.LastErr(), boom) || v.Peek() != "old" {
		t.Fatalf("after failure: lastErr %v, peek %q", v.LastErr(), v.Peek())
	}
	got, err := v.Get(context.Background(), func(context.Context) (string, error) { return "new", nil })
	if err != nil || got != "new" || v.LastErr() != nil {
		t.Fatalf("retry: %q, %v, lastErr %v", got, err, v.LastErr())
	}
}

// TestFetchTimeout: the detached fetch still has a deadline of its own.
func TestFetchTimeout(t *testing.T) {
	v := &Value[int]{TTL: time.Second, FetchTimeout: time.Millisecond}
	_, err := v.Get(context.Background(), func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

// TestFailEndsFreshness: a read that failed elsewhere (the engine's poll)
// makes the next Get ask the source again instead of serving the value
// for the rest of its TTL, and a Get that succeeds clears the error.
func TestFailEndsFreshness(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	v := &Value[string]{TTL: time.Minute, Clock: clk}
	v.Set("old")
	boom := errors.New("boom")
	v.Fail(boom)
	if v.Fresh() || !errors.Is(v.LastErr(), boom) || v.Peek() != "old" {
		t.Fatalf("after Fail: fresh %v, last error %v, peek %q", v.Fresh(), v.LastErr(), v.Peek())
	}
	var calls atomic.Int32
	got, err := v.Get(context.Background(), func(context.Context) (string, error) { calls.Add(1); return "new", nil })
	if err != nil || got != "new" || calls.Load() != 1 {
		t.Fatalf("Get after Fail = %q, %v (fetches %d), want a fresh read", got, err, calls.Load())
	}
	if v.LastErr() != nil || !v.Fresh() {
		t.Fatalf("after a good read: last error %v, fresh %v", v.LastErr(), v.Fresh())
	}
}
