// Package eventually is the one way tests wait for something that happens
// in the background: poll a condition until it holds or a deadline passes,
// instead of hand-rolled deadline loops and bare sleeps.
package eventually

import (
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// Poll is how often a condition is checked.
const Poll = 5 * time.Millisecond

// True polls cond until it returns true, failing t (with what) if it has
// not within the given time or when the test ends first.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Wait(t, within, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Wait polls cond until it returns true; it returns an error if it has not
// within the given time or when the test ends first. For callers that
// report the failure themselves (a helper returning an error).
func Wait(t testing.TB, within time.Duration, cond func() bool) error {
	t.Helper()
	return WaitEvery(t, within, Poll, cond)
}

// WaitEvery is Wait checking cond every interval: for conditions that do
// real work each time (a request to a server under test).
func WaitEvery(t testing.TB, within, interval time.Duration, cond func() bool) error {
	t.Helper()
	return WaitOn(t, nil, within, interval, cond)
}

// WaitOn is WaitEvery with the deadline and the checks on clk (nil: the
// real clock). The waits above are on the real clock, since what they
// wait for (a server, a node, a goroutine) runs on it; a clock of the
// test's own only moves when the test steps it.
func WaitOn(t testing.TB, clk clock.WithTicker, within, interval time.Duration, cond func() bool) error {
	t.Helper()
	if clk == nil {
		clk = clock.RealClock{}
	}
	deadline := clk.NewTimer(within)
	defer deadline.Stop()
	tick := clk.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C():
			if cond() {
				return nil
			}
			return &TimeoutError{Within: within}
		case <-t.Context().Done():
			return t.Context().Err()
		case <-tick.C():
		}
	}
	return nil
}

// TimeoutError is Wait's error when the condition did not hold in time.
type TimeoutError struct{ Within time.Duration }

func (e *TimeoutError) Error() string { return "not within " + e.Within.String() }
