package eventually

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	if err := Wait(t, 5*time.Second, func() bool { return calls.Add(1) >= 3 }); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("condition checked %d times, want 3", n)
	}
}

func TestWaitTimesOut(t *testing.T) {
	start := time.Now()
	err := WaitEvery(t, 30*time.Millisecond, time.Millisecond, func() bool { return false })
	var te *TimeoutError
	if !errors.As(err, &te) || te.Within != 30*time.Millisecond {
		t.Fatalf("err %v, want a TimeoutError for 30ms", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", d)
	}
}
