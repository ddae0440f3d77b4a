package eventually

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
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

// On a fake clock: checked at every interval, given up at the deadline,
// not before, after one last check.
func TestWaitOnTimesOutAtTheDeadline(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- WaitOn(t, clk, time.Minute, time.Second, func() bool { calls.Add(1); return false })
	}()
	if err := Wait(t, 5*time.Second, func() bool { return clk.Waiters() == 2 }); err != nil {
		t.Fatalf("the deadline and the ticker: %v", err)
	}
	clk.Step(time.Second)
	if err := Wait(t, 5*time.Second, func() bool { return calls.Load() == 2 }); err != nil {
		t.Fatalf("no check after an interval: %v", err)
	}
	clk.Step(58 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("gave up a second before the deadline: %v", err)
	default:
	}
	clk.Step(time.Second)
	err := <-done
	var te *TimeoutError
	if !errors.As(err, &te) || te.Within != time.Minute {
		t.Fatalf("err %v, want a TimeoutError for 1m", err)
	}
	if n := calls.Load(); n < 3 {
		t.Fatalf("condition checked %d times, want one at start, one after an interval, one at the deadline", n)
	}
}
