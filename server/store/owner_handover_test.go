package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// handingOver is a replica's handler that records HandingOver calls, as
// the faucet's readiness takes them.
type handingOver struct {
	*replica
	mu    sync.Mutex
	turns []bool
}

func (h *handingOver) HandingOver(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.turns = append(h.turns, on)
}

// state is the last HandingOver and every one so far.
func (h *handingOver) state() (on bool, turns []bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.turns) > 0 {
		on = h.turns[len(h.turns)-1]
	}
	return on, slices.Clone(h.turns)
}

// ownedBy is the key c's replica name owns, or "".
func (c *cluster) ownedBy(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, o := range c.owner {
		if o == name {
			return k
		}
	}
	return ""
}

// members counts the live key-ownership members in raw's database.
func members(t *testing.T, raw rawPG) int {
	t.Helper()
	var n int
	if err := raw.c.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
  AND objsubid = 2 AND classid = $1::int4::oid AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		store.NSMember).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Replicas rank youngest first: the one that joined last takes the extra
// key, and with more replicas than keys the oldest is left without one.
func TestPostgresOwnershipYoungestFirst(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	keys := keysN(3)
	c := newCluster()
	start := func(name string) *replica {
		s := openPostgresURI(t, uri, store.Options{ReplicaName: name, OwnershipInterval: 50 * time.Millisecond})
		h := c.replica(name)
		runOwner(t, t.Context(), s, keys, h)
		return h
	}
	r1 := start("r1")
	eventually.True(t, 10*time.Second, "r1 owns the 3 keys", func() bool { return r1.owned() == 3 })
	r2 := start("r2")
	eventually.True(t, 10*time.Second, "r2 (youngest) 2, r1 1", func() bool { return r2.owned() == 2 && r1.owned() == 1 })
	r3 := start("r3")
	eventually.True(t, 10*time.Second, "one each", func() bool { return r1.owned() == 1 && r2.owned() == 1 && r3.owned() == 1 })
	r4 := start("r4")
	eventually.True(t, 10*time.Second, "r4, r3, r2 one each; r1 (oldest) none", func() bool {
		return r4.owned() == 1 && r3.owned() == 1 && r2.owned() == 1 && r1.owned() == 0
	})
	c.check(t)
}

// keys == replicas and a third joins (a surge pod): it takes a key from
// the oldest replica, which drains first — it keeps its key and pays with
// it while it tells its handler it is handing over, for the drain, on its
// clock — and only then releases it. The younger of the two keeps its
// key throughout. A's rounds are an hour apart: notices alone drive it.
func TestPostgresOwnershipOldestDrainsFirst(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	keys := keysN(2)
	const drain = 5 * time.Second
	fake := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	sA := openPostgresURI(t, uri, store.Options{ReplicaName: "A", OwnershipInterval: time.Hour, Clock: fake})
	sB := openPostgresURI(t, uri, store.Options{ReplicaName: "B", OwnershipInterval: 50 * time.Millisecond})
	sC := openPostgresURI(t, uri, store.Options{ReplicaName: "C", OwnershipInterval: 50 * time.Millisecond})
	c := newCluster()
	hA := &handingOver{replica: c.replica("A")}
	hB, hC := c.replica("B"), c.replica("C")
	sess := journal.Session{Drain: drain}

	runOwnerSession(t, t.Context(), sA, keys, hA, sess)
	eventually.True(t, 10*time.Second, "A owns both keys", func() bool { return hA.owned() == 2 })
	runOwnerSession(t, t.Context(), sB, keys, hB, sess)
	// Above quota with a key left: A gives one up at once, no drain.
	eventually.True(t, 10*time.Second, "one key each", func() bool { return hA.owned() == 1 && hB.owned() == 1 })
	if _, turns := hA.state(); len(turns) != 0 {
		t.Fatalf("A handed over %v while keeping a key", turns)
	}
	keyA, keyB := c.ownedBy("A"), c.ownedBy("B")

	runOwnerSession(t, t.Context(), sC, keys, hC, sess)
	eventually.True(t, 10*time.Second, "A handing over", func() bool { on, _ := hA.state(); return on })
	if hA.owned() != 1 || hC.owned() != 0 || c.ownedBy("B") != keyB {
		t.Fatalf("during the drain A owns %d, C %d, B %q; want A its key, C none, B its own", hA.owned(), hC.owned(), c.ownedBy("B"))
	}
	// Still A's during the drain: it pays what still arrives.
	if err := sA.Put(t.Context(), testEntry(keyA, 1, 1)); err != nil {
		t.Fatalf("A's write during the drain: %v", err)
	}

	fake.Step(drain)
	eventually.True(t, 10*time.Second, "C takes A's key after the drain", func() bool {
		return hC.owned() == 1 && hA.owned() == 0 && c.ownedBy("C") == keyA
	})
	if on, turns := hA.state(); on || !slices.Equal(turns, []bool{true, false}) {
		t.Fatalf("A's handing over went %v, want [true false]", turns)
	}
	if hA.lostCount() != 0 {
		t.Fatalf("A lost %d keys; it should have released them", hA.lostCount())
	}
	notOwner(t, "A's write after the handover", sA.Put(t.Context(), testEntry(keyA, 2, 2)))
	put(t, sC, testEntry(keyA, 2, 2))
	if c.ownedBy("B") != keyB {
		t.Fatalf("B's key moved to %q", c.ownedBy("B"))
	}
	c.check(t)
}

// If the replica that took its share away goes before the drain ends, the
// oldest keeps its key and is ready again.
func TestPostgresOwnershipDrainCancelled(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	keys := keysN(1)
	fake := clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))
	sA := openPostgresURI(t, uri, store.Options{ReplicaName: "A", OwnershipInterval: time.Hour, Clock: fake})
	sB := openPostgresURI(t, uri, store.Options{ReplicaName: "B", OwnershipInterval: 50 * time.Millisecond})
	c := newCluster()
	hA := &handingOver{replica: c.replica("A")}
	runOwnerSession(t, t.Context(), sA, keys, hA, journal.Session{Drain: time.Minute})
	eventually.True(t, 10*time.Second, "A owns the key", func() bool { return hA.owned() == 1 })
	runOwnerSession(t, t.Context(), sB, keys, c.replica("B"), journal.Session{Drain: time.Minute})
	eventually.True(t, 10*time.Second, "A handing over", func() bool { on, _ := hA.state(); return on })
	if err := sB.Close(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "A keeps its key", func() bool { on, _ := hA.state(); return !on })
	fake.Step(time.Minute)
	if _, turns := hA.state(); hA.owned() != 1 || !slices.Equal(turns, []bool{true, false}) {
		t.Fatalf("A owns %d keys, handing over went %v; want its key and [true false]", hA.owned(), turns)
	}
	put(t, sA, testEntry(keys[0], 1, 1))
	c.check(t)
}

// At SIGTERM (Leave) a replica leaves the membership at once and keeps its
// keys, still writing with them; when its Run ends it releases them and
// the other replica, whose rounds are an hour apart, takes them at once
// on the notice.
func TestPostgresOwnershipLeaveKeepsKeys(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	raw := openRawPG(t, uri)
	keys := keysN(2)
	sA := openPostgresURI(t, uri, store.Options{ReplicaName: "A", OwnershipInterval: 50 * time.Millisecond})
	sB := openPostgresURI(t, uri, store.Options{ReplicaName: "B", OwnershipInterval: time.Hour})
	c := newCluster()
	hA, hB := c.replica("A"), c.replica("B")
	leave := make(chan struct{})
	ctxA, stopA := context.WithCancel(t.Context())
	errcA := runOwnerSession(t, ctxA, sA, keys, hA, journal.Session{Leave: leave, Drain: time.Hour})
	eventually.True(t, 10*time.Second, "A owns both keys", func() bool { return hA.owned() == 2 })
	runOwner(t, t.Context(), sB, keys, hB)
	eventually.True(t, 10*time.Second, "one key each", func() bool { return hA.owned() == 1 && hB.owned() == 1 })
	keyA := c.ownedBy("A")

	close(leave)
	eventually.True(t, 10*time.Second, "A left the membership", func() bool { return members(t, raw) == 1 })
	if hA.owned() != 1 || hB.owned() != 1 {
		t.Fatalf("after A left: A owns %d, B %d; want 1 and 1 (A keeps its key)", hA.owned(), hB.owned())
	}
	put(t, sA, testEntry(keyA, 1, 1))

	released := time.Now()
	stopA()
	if err := waitRun(t, errcA); err != nil {
		t.Fatalf("A's Run: %v", err)
	}
	eventually.True(t, 10*time.Second, "B takes A's key", func() bool { return hB.owned() == 2 })
	t.Logf("handover after A's Run ended: B owned both keys %s later (B's rounds are an hour apart: the notice woke it)",
		time.Since(released).Round(100*time.Microsecond))
	if hA.lostCount() != 0 {
		t.Fatalf("A lost %d keys; it should have released them", hA.lostCount())
	}
	notOwner(t, "A's write after it released", sA.Put(t.Context(), testEntry(keyA, 2, 2)))
	put(t, sB, testEntry(keyA, 2, 2))
	c.check(t)
}

// stamps records when a replica was told to release a key and when one
// acquired it.
type stamps struct {
	*replica
	mu                 *sync.Mutex
	released, acquired *[]time.Time
}

func (s stamps) Acquired(ctx context.Context, k string) {
	s.mu.Lock()
	*s.acquired = append(*s.acquired, time.Now())
	s.mu.Unlock()
	s.replica.Acquired(ctx, k)
}

func (s stamps) Releasing(ctx context.Context, k string) {
	s.replica.Releasing(ctx, k)
	s.mu.Lock()
	*s.released = append(*s.released, time.Now())
	s.mu.Unlock()
}

// A key changes hands on NOTIFY: every replica's rounds are an hour apart,
// yet each newcomer takes the one key from the previous holder, which
// releases it on the join notice and tells the newcomer it is free. The
// latency, from the holder's Releasing to the newcomer's Acquired, is
// logged.
func TestPostgresOwnershipHandoverLatency(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	keys := keysN(1)
	c := newCluster()
	var mu sync.Mutex
	var released, acquired []time.Time
	const handovers = 20
	for i := range handovers + 1 {
		name := "r" + string(rune('a'+i))
		s := openPostgresURI(t, uri, store.Options{ReplicaName: name, OwnershipInterval: time.Hour})
		h := stamps{replica: c.replica(name), mu: &mu, released: &released, acquired: &acquired}
		runOwner(t, t.Context(), s, keys, h)
		eventually.True(t, 10*time.Second, name+" takes the key", func() bool { return h.owned() == 1 })
	}
	mu.Lock()
	defer mu.Unlock()
	if len(released) != handovers || len(acquired) != handovers+1 {
		t.Fatalf("%d releases and %d acquisitions, want %d and %d", len(released), len(acquired), handovers, handovers+1)
	}
	lat := make([]time.Duration, handovers)
	for i := range lat {
		lat[i] = acquired[i+1].Sub(released[i])
		if lat[i] < 0 {
			t.Fatalf("handover %d: acquired before the release", i)
		}
	}
	slices.Sort(lat)
	t.Logf("handover latency over %d handovers (Releasing returned → Acquired): min %s, median %s, max %s",
		handovers, lat[0].Round(10*time.Microsecond), lat[handovers/2].Round(10*time.Microsecond), lat[handovers-1].Round(10*time.Microsecond))
	c.check(t)
}

// While a replica of an older faucet (a random id, no age) is live, every
// replica ranks by id ascending as it does, so all agree; once it is gone
// they rank youngest first.
func TestPostgresOwnershipRanksAsOlderFaucetsWhileOneIsLive(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	raw := openRawPG(t, uri)
	// An older faucet's member, its id random, holding no key here.
	raw.exec(t, `SELECT pg_advisory_lock($1::int4, $2::int4)`, store.NSMember, int32(2_000_000_000))
	keys := keysN(5)
	c := newCluster()
	s1 := openPostgresURI(t, uri, store.Options{ReplicaName: "n1", OwnershipInterval: 50 * time.Millisecond})
	s2 := openPostgresURI(t, uri, store.Options{ReplicaName: "n2", OwnershipInterval: 50 * time.Millisecond})
	n1, n2 := c.replica("n1"), c.replica("n2")
	runOwner(t, t.Context(), s1, keys, n1)
	eventually.True(t, 10*time.Second, "n1 owns 3 of 5 (ranked before the older member)", func() bool { return n1.owned() == 3 })
	runOwner(t, t.Context(), s2, keys, n2)
	// By id ascending: n1, n2, the older member → 2, 2, 1 (youngest
	// first would give n1 1).
	eventually.True(t, 10*time.Second, "2 and 2 by id ascending", func() bool { return n1.owned() == 2 && n2.owned() == 2 })

	raw.exec(t, `SELECT pg_advisory_unlock($1::int4, $2::int4)`, store.NSMember, int32(2_000_000_000))
	raw.exec(t, `SELECT pg_notify($1, 'leave')`, store.OwnershipChannel)
	eventually.True(t, 10*time.Second, "youngest first: n2 3, n1 2", func() bool { return n2.owned() == 3 && n1.owned() == 2 })
	c.check(t)
}

// A Run told to leave before it joined takes no key.
func TestPostgresOwnershipLeftBeforeJoining(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	s := openPostgresURI(t, uri, store.Options{OwnershipInterval: 50 * time.Millisecond})
	left := make(chan struct{})
	close(left)
	ctx, cancel := context.WithCancel(t.Context())
	h := newCluster().replica("r")
	errc := runOwnerSession(t, ctx, s, keysN(1), h, journal.Session{Leave: left})
	cancel()
	if err := waitRun(t, errc); err != nil || h.owned() != 0 {
		t.Fatalf("Run: %v, %d keys owned; want nil and none", err, h.owned())
	}
	if err := s.Put(t.Context(), testEntry(keysN(1)[0], 1, 1)); !errors.Is(err, journal.ErrNotOwner) {
		t.Fatalf("put: %v, want ErrNotOwner", err)
	}
}
