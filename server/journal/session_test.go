package journal

import (
	"context"
	"slices"
	"testing"
	"time"
)

// drainingHandler is a handler that takes part in draining.
type drainingHandler struct {
	handler
	turns []bool
}

func (h *drainingHandler) HandingOver(on bool) { h.turns = append(h.turns, on) }

// HandingOver reaches every routed handler that takes part, and no other.
func TestRouterHandingOver(t *testing.T) {
	stx, btc := &drainingHandler{}, &handler{}
	var r Router
	r.Add(stx, "ST1", "ST2")
	r.Add(btc, "bcrt1q")
	var h Handler = &r
	d, ok := h.(Handover)
	if !ok {
		t.Fatal("a Router does not pass HandingOver on")
	}
	d.HandingOver(true)
	d.HandingOver(false)
	if !slices.Equal(stx.turns, []bool{true, false}) {
		t.Fatalf("the Stacks handler heard %v, want [true false]", stx.turns)
	}
	if len(btc.calls) != 0 {
		t.Fatalf("the BTC handler was called: %v", btc.calls)
	}
}

// sessionOwner records the Session each Run gets and fails at once.
type sessionOwner struct {
	runs     int
	sessions []Session
}

func (o *sessionOwner) Run(_ context.Context, _ []string, _ Handler, s Session) error {
	o.runs++
	o.sessions = append(o.sessions, s)
	return context.DeadlineExceeded
}

// KeepSession hands its Session to the owner, and once the replica has
// left it does not start a failed Run again: it waits for its context.
func TestKeepSessionLeft(t *testing.T) {
	var r Router
	r.Add(&handler{}, "ST1")
	o := &sessionOwner{}
	leave := make(chan struct{})
	close(leave)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		KeepSession(ctx, nil, o, &r, Session{Leave: leave, Drain: 3 * time.Second}, time.Nanosecond, nil)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("KeepSession returned before its context ended")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	<-done
	if o.runs != 1 || o.sessions[0].Drain != 3*time.Second || o.sessions[0].Leave == nil {
		t.Fatalf("%d runs with sessions %+v; want one with the session given", o.runs, o.sessions)
	}
}
