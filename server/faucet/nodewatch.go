package faucet

import (
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Back-off of the "still unreachable" reminders while the node is down.
const (
	nodeDownFirstReminder = time.Second
	nodeDownMaxReminder   = time.Minute
)

// nodeWatch logs the poll loop's view of the node. The loop polls every
// second, so a line per failed poll would bury everything else during an
// outage: the first failure is a warning, then a reminder comes after 1 s,
// 2 s, 4 s… (at most a minute apart) with the failures so far, and one info
// line says when the node answers again and how long it was gone.
type nodeWatch struct {
	log *slog.Logger
	clk clock.PassiveClock

	mu        sync.Mutex
	downSince time.Time // zero while the node answers
	failures  int       // failed polls since downSince
	nextLog   time.Time
	backoff   time.Duration
}

func (w *nodeWatch) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clk.Now()
	w.failures++
	if w.downSince.IsZero() {
		w.downSince, w.backoff = now, nodeDownFirstReminder
		w.nextLog = now.Add(w.backoff)
		w.log.Warn("stacks node unreachable; drips fail until it answers", "err", err)
		return
	}
	if now.Before(w.nextLog) {
		return
	}
	w.log.Warn("stacks node still unreachable", "down_for", roundDuration(now.Sub(w.downSince)).String(),
		"failed_polls", w.failures, "err", err)
	w.backoff = min(2*w.backoff, nodeDownMaxReminder)
	w.nextLog = now.Add(w.backoff)
}

func (w *nodeWatch) answered() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.downSince.IsZero() {
		return
	}
	w.log.Info("stacks node reachable again", "down_for", roundDuration(w.clk.Since(w.downSince)).String(),
		"failed_polls", w.failures)
	w.downSince, w.failures = time.Time{}, 0
}

// roundDuration keeps a logged duration readable ("1m2.5s", not
// "1m2.534817291s").
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
