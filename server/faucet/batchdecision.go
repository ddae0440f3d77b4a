package faucet

import "time"

// The batching decision: whether a drip leaves alone, and when the queued
// drips leave together as one send-many call. It is one pure function of
// what the batcher sees, so that the rule reads in one place and its table
// test covers it; the batcher (batcher.go) only gathers the view and
// applies the answer.
//
// Adaptive (no window), Nagle's rule: a drip arriving at an empty queue
// leaves at once, alone, while slots are plentiful: more are free, beyond
// the last fifth of each key's kept for calls and those lone drips are
// about to take, than the current demand would take before the next block
// frees more. Otherwise it queues. The queue leaves at once when slots are
// plentiful again; else the free slots are paced over the time left until
// that block (with k free, the queue leaves once a (k+1)-th of it has
// passed since the batcher last took a slot); with none free it waits for
// a block, up to BusyWait from its oldest drip, and then leaves anyway,
// to be answered busy.
//
// A fixed window: a drip arriving at an empty queue opens a window; when
// it ends the queue leaves if a slot is free or it has waited BusyWait,
// and otherwise keeps gathering for another window (a nonce is the scarce
// thing, so it should carry as many drips as possible once one frees).

// slotView is what the batcher knows when it decides.
type slotView struct {
	// Window is the fixed gathering time; 0 is adaptive.
	Window time.Duration
	// Queued is how many drips wait. 0: a drip arrives at an empty queue,
	// and the decision is whether it leaves alone.
	Queued int
	// Free counts the in-flight slots free on keys that could send now;
	// Kept how many of them are kept for calls; Leaving the lone drips
	// that chose to leave and have no key yet.
	Free, Kept, Leaving int
	// Demand is the arrival rate of batchable drips, per second.
	Demand float64
	// UntilRelease is how long until a block is expected to free slots.
	UntilRelease time.Duration
	// SinceSlot is the time since the batcher last took a slot.
	SinceSlot time.Duration
	// Waited is how long the oldest queued drip has waited; BusyWait how
	// long a drip may wait for a slot.
	Waited, BusyWait time.Duration
}

// batchAction is what the batcher does.
type batchAction int

const (
	// joinQueue: the arriving drip queues (it opens a window, or the
	// queue is reviewed at once).
	joinQueue batchAction = iota
	// leaveAlone: the arriving drip leaves now as a plain transfer.
	leaveAlone
	// sendQueue: the queue leaves now as one call.
	sendQueue
	// review: look at the queue again after Wait, or when a block frees
	// slots, whichever comes first.
	review
)

// batchDecision is decideBatch's answer.
type batchDecision struct {
	Action batchAction
	Wait   time.Duration // for review
}

// decideBatch is the rule above.
func decideBatch(v slotView) batchDecision {
	if v.Queued == 0 {
		if v.Window == 0 && v.plentiful() {
			return batchDecision{Action: leaveAlone}
		}
		return batchDecision{Action: joinQueue}
	}
	if v.Window > 0 {
		if v.Free > 0 || v.Waited >= v.BusyWait {
			return batchDecision{Action: sendQueue}
		}
		return batchDecision{Action: review, Wait: v.Window}
	}
	if v.plentiful() {
		return batchDecision{Action: sendQueue}
	}
	wait := v.BusyWait - v.Waited
	if v.Free > 0 {
		pace := v.UntilRelease / time.Duration(v.Free+1)
		wait = min(wait, pace-v.SinceSlot)
	}
	if wait <= 0 {
		return batchDecision{Action: sendQueue}
	}
	return batchDecision{Action: review, Wait: wait}
}

// plentiful: more slots are spare (free, not kept, not about to be taken
// by lone drips) than the demand would take before the next release.
func (v slotView) plentiful() bool {
	spare := v.Free - v.Kept - v.Leaving
	return spare > 0 && float64(spare) > v.Demand*v.UntilRelease.Seconds()
}
