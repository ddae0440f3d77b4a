package journal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// fakeChain answers every send with err, judged by verdict, and records
// what the store held at each send.
type fakeChain struct {
	err     error
	verdict Verdict
	store   Store
	sawHeld []bool
}

func (c *fakeChain) Send(ctx context.Context, raw []byte) error {
	es, _ := c.store.List(ctx, "ST1")
	c.sawHeld = append(c.sawHeld, slices.ContainsFunc(es, func(e Entry) bool { return string(e.Raw) == string(raw) }))
	return c.err
}

func (c *fakeChain) Judge(error) Verdict { return c.verdict }

func entry(txid string, seq uint64) Entry {
	return Entry{Key: "ST1", TxID: txid, Seq: seq, Raw: []byte("raw-" + txid), Meta: []byte(`{"a":1}`)}
}

func list(t *testing.T, s Store) map[string]Entry {
	t.Helper()
	es, err := s.List(context.Background(), "ST1")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Entry{}
	for _, e := range es {
		out[e.TxID] = e
	}
	return out
}

// Every send is recorded first; then the verdict decides: accepted is
// committed, in doubt stays broadcasting, not sent is forgotten.
func TestSendRecordsFirstThenSettles(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		name      string
		err       error
		verdict   Verdict
		wantState State // empty when the entry is forgotten
	}{
		{"accepted", nil, Accepted, Pending},
		{"in doubt", errors.New("answer lost"), InDoubt, Broadcasting},
		{"refused", errors.New("refused"), NotSent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewMemoryStore()
			j := New(s, clocktesting.NewFakeClock(now))
			c := &fakeChain{err: tc.err, verdict: tc.verdict, store: s}
			e := entry("aa", 3)
			sent, err := j.Send(context.Background(), &e, c)
			if err != nil {
				t.Fatal(err)
			}
			if sent.Verdict != tc.verdict || !errors.Is(sent.Err, tc.err) {
				t.Fatalf("sent %+v", sent)
			}
			if !slices.Equal(c.sawHeld, []bool{true}) {
				t.Fatalf("the store held the entry at send: %v", c.sawHeld)
			}
			got, ok := list(t, s)["aa"]
			switch {
			case tc.wantState == "" && ok:
				t.Fatalf("a refused entry is still recorded: %+v", got)
			case tc.wantState != "" && (!ok || got.State != tc.wantState || !got.SentAt.Equal(now)):
				t.Fatalf("recorded %+v (%v), want state %s sent at %s", got, ok, tc.wantState, now)
			}
		})
	}
}

// failingStore refuses writes: another replica owns the key.
type failingStore struct{ *MemoryStore }

func (failingStore) Put(context.Context, Entry) error {
	return fmt.Errorf("put: %w", ErrNotOwner)
}

// A record that fails sends nothing.
func TestSendWithoutRecordSendsNothing(t *testing.T) {
	s := failingStore{NewMemoryStore()}
	c := &fakeChain{store: s}
	e := entry("aa", 0)
	if _, err := New(s, nil).Send(context.Background(), &e, c); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("send on a fenced store: %v, want ErrNotOwner", err)
	}
	if len(c.sawHeld) != 0 {
		t.Fatal("sent without a record")
	}
}

// A replacement is recorded beside the entry it replaces before it is
// sent; both stay until the caller forgets one.
func TestReplaceKeepsBoth(t *testing.T) {
	s := NewMemoryStore()
	j := New(s, nil)
	c := &fakeChain{store: s}
	old := entry("aa", 5)
	if _, err := j.Send(context.Background(), &old, c); err != nil {
		t.Fatal(err)
	}
	rep := entry("bb", 5)
	if _, err := j.Replace(context.Background(), old, &rep, c); err != nil {
		t.Fatal(err)
	}
	got := list(t, s)
	if len(got) != 2 || got["bb"].Replaces != "aa" || !slices.Equal(c.sawHeld, []bool{true, true}) {
		t.Fatalf("after the replacement: %+v, held at send %v", got, c.sawHeld)
	}
	other := Entry{Key: "ST2", TxID: "cc", Raw: []byte{1}}
	if _, err := j.Replace(context.Background(), old, &other, c); err == nil {
		t.Fatal("a replacement from another key was taken")
	}
	if err := j.ForgetBelow(context.Background(), "ST1", 6); err != nil || len(list(t, s)) != 0 {
		t.Fatalf("ForgetBelow(6): %v, left %+v", err, list(t, s))
	}
}

// A resend leaves the entry to the caller unless the node took it.
func TestResend(t *testing.T) {
	s := NewMemoryStore()
	j := New(s, nil)
	e := entry("aa", 1)
	if _, err := j.Send(context.Background(), &e, &fakeChain{store: s, err: errors.New("lost"), verdict: InDoubt}); err != nil {
		t.Fatal(err)
	}
	sent := j.Resend(context.Background(), &e, &fakeChain{store: s, err: errors.New("refused"), verdict: NotSent})
	if sent.Verdict != NotSent || list(t, s)["aa"].State != Broadcasting {
		t.Fatalf("a refused resend: %+v, store %+v", sent, list(t, s))
	}
	if sent := j.Resend(context.Background(), &e, &fakeChain{store: s}); sent.Verdict != Accepted {
		t.Fatalf("an accepted resend: %+v", sent)
	}
}

// heldBack is an error of a client that knows whether it sent the
// request (a node client waiting out a 429 does not).
type heldBack bool

func (heldBack) Error() string   { return "held back" }
func (h heldBack) NotSent() bool { return bool(h) }

func TestNeverSentAndCut(t *testing.T) {
	dial := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Err: errors.New("reset")}
	for _, tc := range []struct {
		err        error
		never, cut bool
	}{
		{dial, true, false},
		{fmt.Errorf("post: %w", dial), true, false},
		{read, false, false},
		{context.DeadlineExceeded, false, true},
		{fmt.Errorf("%w: %w", context.Canceled, dial), true, false},
		{fmt.Errorf("broadcast: %w", heldBack(true)), true, false},
		{heldBack(false), false, false},
	} {
		if NeverSent(tc.err) != tc.never || Cut(tc.err) != tc.cut {
			t.Errorf("%v: NeverSent %v Cut %v", tc.err, NeverSent(tc.err), Cut(tc.err))
		}
	}
}

// handler records the calls it gets.
type handler struct {
	mu    sync.Mutex
	calls []string
}

func (h *handler) note(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, s)
}

func (h *handler) Acquired(_ context.Context, k string)  { h.note("acquired " + k) }
func (h *handler) Releasing(_ context.Context, k string) { h.note("releasing " + k) }
func (h *handler) Lost(k string)                         { h.note("lost " + k) }

// failingOwner hands every key out and then fails, as a store outage
// ends an ownership session.
type failingOwner struct{ runs int }

func (o *failingOwner) Run(ctx context.Context, keys []string, h Handler, _ Session) error {
	o.runs++
	for _, k := range keys {
		h.Acquired(ctx, k)
	}
	if o.runs >= 2 {
		<-ctx.Done()
		return nil
	}
	return errors.New("store down")
}

// One owner for every payer: each key's changes go to its payer, and a
// failed session is started again with every key lost in between.
func TestRouterAndKeep(t *testing.T) {
	stx, btc := &handler{}, &handler{}
	var r Router
	r.Add(stx, "ST1", "ST2")
	r.Add(btc, "bcrt1q")
	if got := r.Keys(); !slices.Equal(got, []string{"ST1", "ST2", "bcrt1q"}) {
		t.Fatalf("keys %v", got)
	}
	o := &failingOwner{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Keep(ctx, nil, o, &r, time.Millisecond, nil); close(done) }()
	for {
		btc.mu.Lock()
		n := len(btc.calls)
		btc.mu.Unlock()
		if n >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	want := []string{"acquired bcrt1q", "lost bcrt1q", "acquired bcrt1q", "lost bcrt1q"}
	if !slices.Equal(btc.calls, want) {
		t.Fatalf("btc handler saw %v, want %v", btc.calls, want)
	}
	if len(stx.calls) != 8 || stx.calls[0] != "acquired ST1" {
		t.Fatalf("stx handler saw %v", stx.calls)
	}
}
