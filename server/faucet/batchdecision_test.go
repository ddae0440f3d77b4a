package faucet

import (
	"testing"
	"time"
)

func TestDecideBatch(t *testing.T) {
	const s = time.Second
	ms := time.Millisecond
	// A key pool of 4 keys × 25 slots, a fifth of each kept for calls.
	idle := slotView{Free: 100, Kept: 20, UntilRelease: 5 * s, BusyWait: 5 * s}
	with := func(v slotView, f func(*slotView)) slotView { f(&v); return v }
	for _, tc := range []struct {
		name string
		v    slotView
		want batchDecision
	}{
		{"a quiet faucet sends a lone drip at once", idle,
			batchDecision{Action: leaveAlone}},
		{"demand that would take the spare slots before the block queues the drip",
			with(idle, func(v *slotView) { v.Demand = 16 }), // 80 spare ≤ 16/s × 5 s
			batchDecision{Action: joinQueue}},
		{"demand just below the spare slots still leaves alone",
			with(idle, func(v *slotView) { v.Demand = 15.9 }),
			batchDecision{Action: leaveAlone}},
		{"lone drips on their way count as taken",
			with(idle, func(v *slotView) { v.Leaving = 80 }),
			batchDecision{Action: joinQueue}},
		{"only kept slots free: the drip queues",
			with(idle, func(v *slotView) { v.Free = 20 }),
			batchDecision{Action: joinQueue}},
		{"a fixed window always queues an arriving drip", with(idle, func(v *slotView) { v.Window = 250 * ms }),
			batchDecision{Action: joinQueue}},

		{"a queue leaves at once when a block made slots plentiful",
			with(idle, func(v *slotView) { v.Queued = 30; v.Demand = 1 }),
			batchDecision{Action: sendQueue}},
		{"with 4 slots free the queue waits a fifth of the time to the block",
			slotView{Queued: 10, Free: 4, Kept: 4, Demand: 50, UntilRelease: 5 * s, BusyWait: 5 * s},
			batchDecision{Action: review, Wait: s}},
		{"time since the last slot counts towards the pace",
			slotView{Queued: 10, Free: 4, Kept: 4, Demand: 50, UntilRelease: 5 * s, SinceSlot: 600 * ms, BusyWait: 5 * s},
			batchDecision{Action: review, Wait: 400 * ms}},
		{"a pace already passed sends the queue",
			slotView{Queued: 10, Free: 4, Kept: 4, Demand: 50, UntilRelease: 5 * s, SinceSlot: 2 * s, BusyWait: 5 * s},
			batchDecision{Action: sendQueue}},
		{"no slot free: wait for a block, up to the busy wait",
			slotView{Queued: 10, Demand: 50, UntilRelease: 5 * s, Waited: 2 * s, BusyWait: 5 * s},
			batchDecision{Action: review, Wait: 3 * s}},
		{"the busy wait spent, the queue leaves to be answered",
			slotView{Queued: 10, Demand: 50, UntilRelease: 5 * s, Waited: 5 * s, BusyWait: 5 * s},
			batchDecision{Action: sendQueue}},
		{"the busy wait caps the pace",
			slotView{Queued: 10, Free: 1, Kept: 1, Demand: 50, UntilRelease: 10 * s, Waited: 4500 * ms, BusyWait: 5 * s},
			batchDecision{Action: review, Wait: 500 * ms}},

		{"a window that ends with a slot free sends",
			slotView{Window: 250 * ms, Queued: 3, Free: 1, Waited: 250 * ms, BusyWait: 5 * s},
			batchDecision{Action: sendQueue}},
		{"a window that ends with no slot keeps gathering",
			slotView{Window: 250 * ms, Queued: 3, Waited: 250 * ms, BusyWait: 5 * s},
			batchDecision{Action: review, Wait: 250 * ms}},
		{"a window past the busy wait sends anyway",
			slotView{Window: 250 * ms, Queued: 3, Waited: 5 * s, BusyWait: 5 * s},
			batchDecision{Action: sendQueue}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideBatch(tc.v); got != tc.want {
				t.Fatalf("decideBatch(%+v) = %+v, want %+v", tc.v, got, tc.want)
			}
		})
	}
}
