package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// cluster watches the handlers of several replicas and records any moment
// at which two of them believed they owned the same key.
type cluster struct {
	mu         sync.Mutex
	owner      map[string]string
	violations []string
}

func newCluster() *cluster { return &cluster{owner: map[string]string{}} }

// replica is one replica's journal.Handler.
type replica struct {
	c        *cluster
	name     string
	lost     int
	acquired map[string]int // times each key was acquired
}

func (c *cluster) replica(name string) *replica { return &replica{c: c, name: name} }

func (r *replica) Acquired(_ context.Context, k string) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if o, ok := r.c.owner[k]; ok && o != r.name {
		r.c.violations = append(r.c.violations, fmt.Sprintf("%s acquired %s still owned by %s", r.name, k, o))
	}
	r.c.owner[k] = r.name
	if r.acquired == nil {
		r.acquired = map[string]int{}
	}
	r.acquired[k]++
}

// acquiredCount is how many times r was told it acquired k.
func (r *replica) acquiredCount(k string) int {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.acquired[k]
}

func (r *replica) Releasing(_ context.Context, k string) { r.drop(k, false) }
func (r *replica) Lost(k string)                         { r.drop(k, true) }

func (r *replica) drop(k string, lost bool) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.c.owner[k] == r.name {
		delete(r.c.owner, k)
		if lost {
			r.lost++
		}
	}
}

// owned counts the keys r owns.
func (r *replica) owned() int {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	n := 0
	for _, o := range r.c.owner {
		if o == r.name {
			n++
		}
	}
	return n
}

// lostCount is how many keys r lost without notice.
func (r *replica) lostCount() int {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.lost
}

func (c *cluster) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Error(v)
	}
}

// runOwner runs s's key ownership until the test ends; the channel yields
// Run's result.
func runOwner(t *testing.T, ctx context.Context, s *store.Postgres, keys []string, h journal.Handler) <-chan error {
	return runOwnerSession(t, ctx, s, keys, h, journal.Session{})
}

// runOwnerSession is runOwner by sess's rules.
func runOwnerSession(t *testing.T, ctx context.Context, s *store.Postgres, keys []string, h journal.Handler, sess journal.Session) <-chan error {
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- s.Run(ctx, keys, h, sess)
	}()
	t.Cleanup(func() { _ = s.Close(); <-done })
	return errc
}

// keysN is n Stacks keys.
func keysN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = stxKey(byte(100 + i))
	}
	return out
}

func waitRun(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// Two replicas split four keys two and two; when one closes, the other
// takes all four; a key never has two owners.
func TestPostgresOwnershipBalance(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	opts := store.Options{OwnershipInterval: 50 * time.Millisecond}
	s1, s2 := openPostgresURI(t, uri, opts), openPostgresURI(t, uri, opts)
	keys := keysN(4)
	c := newCluster()
	h1, h2 := c.replica("r1"), c.replica("r2")
	errc1 := runOwner(t, t.Context(), s1, keys, h1)
	runOwner(t, t.Context(), s2, keys, h2)
	eventually.True(t, 10*time.Second, "a 2/2 split", func() bool { return h1.owned() == 2 && h2.owned() == 2 })

	// Each replica writes with its own keys and is refused the others'.
	for _, k := range keys {
		tx := testEntry(k, 1, 1)
		e1, e2 := s1.Put(t.Context(), tx), s2.Put(t.Context(), tx)
		if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), journal.ErrNotOwner) {
			t.Fatalf("key %s: r1 put %v, r2 put %v; want exactly one refused with ErrNotOwner", k, e1, e2)
		}
	}

	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := waitRun(t, errc1); err != nil {
		t.Fatalf("Run after Close: %v, want nil", err)
	}
	eventually.True(t, 10*time.Second, "r2 owns all four keys", func() bool { return h2.owned() == 4 && h1.owned() == 0 })
	for _, k := range keys {
		if err := s2.Put(t.Context(), testEntry(k, 2, 2)); err != nil {
			t.Fatalf("r2 put with taken-over key %s: %v", k, err)
		}
	}
	c.check(t)
}

// Fencing: once another replica has bumped a key's epoch, this replica's
// writes for it fail with ErrNotOwner and change nothing.
func TestPostgresFencing(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	s := openPostgresURI(t, uri, store.Options{OwnershipInterval: 50 * time.Millisecond})
	plain := openPostgresURI(t, uri, store.Options{})
	raw := openRawPG(t, uri)
	keys := keysN(2)
	k0, k1 := keys[0], keys[1]
	ctx, cancel := context.WithCancel(t.Context())
	h := newCluster().replica("r")
	errc := runOwner(t, ctx, s, keys, h)
	eventually.True(t, 10*time.Second, "owning both keys", func() bool { return h.owned() == 2 })

	putSeq := func(st journal.Store, k string, seq uint64) error {
		return st.Put(t.Context(), testEntry(k, seq, byte(seq)))
	}
	if err := putSeq(s, k0, 1); err != nil {
		t.Fatal(err)
	}
	if err := putSeq(s, stxKey(7), 1); !errors.Is(err, journal.ErrNotOwner) {
		t.Fatalf("put with a key not owned: %v, want ErrNotOwner", err)
	}
	// Another replica took k0 (its Run bumped the epoch).
	raw.exec(t, "UPDATE key_owners SET epoch = epoch + 1, owner = 'elsewhere' WHERE key = $1", k0)
	if err := putSeq(s, k0, 2); !errors.Is(err, journal.ErrNotOwner) {
		t.Fatalf("put with a stale epoch: %v, want ErrNotOwner", err)
	}
	if err := s.Delete(t.Context(), k0, testTxID(1).String()); !errors.Is(err, journal.ErrNotOwner) {
		t.Fatalf("delete with a stale epoch: %v, want ErrNotOwner", err)
	}
	if err := s.DeleteBelow(t.Context(), k0, 9); !errors.Is(err, journal.ErrNotOwner) {
		t.Fatalf("delete below with a stale epoch: %v, want ErrNotOwner", err)
	}
	if got, err := s.List(t.Context(), k0); err != nil || len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("journal after refused writes: %+v, %v; want seq 1 only", got, err)
	}
	// The other key is unaffected.
	if err := putSeq(s, k1, 1); err != nil {
		t.Fatal(err)
	}
	if err := putSeq(s, k1, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), k1, testTxID(1).String()); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBelow(t.Context(), k1, 3); err != nil {
		t.Fatal(err)
	}
	if got, err := s.List(t.Context(), k1); err != nil || len(got) != 0 {
		t.Fatalf("journal of the owned key after its deletes: %+v, %v", got, err)
	}
	// The fenced statements keep every field as the plain ones do: a fee
	// bump beyond int64, and DeleteBelow comparing as uint64.
	rich := []journal.Entry{
		{Key: k1, TxID: testTxID(20).String(), Seq: 1<<63 - 1, Raw: []byte{0, 1, 0xff}, State: journal.Pending,
			SentAt: time.Unix(1_700_000_000, 1), Meta: []byte(`{"a": 1}`)},
		{Key: k1, TxID: testTxID(21).String(), Seq: 1 << 63, Raw: []byte{0}, State: journal.Pending,
			SentAt: time.Unix(1_700_000_000, 2), Meta: []byte(`{"b": 2}`)},
		{Key: k1, TxID: testTxID(22).String(), Seq: 1 << 63, Raw: []byte{1}, State: journal.Broadcasting,
			SentAt: time.Unix(1_700_000_000, 3), Replaces: testTxID(21).String(), Meta: []byte(`{"c": "\u00e9"}`)},
	}
	put(t, s, rich[2], rich[0], rich[1])
	sameEntries(t, "fenced round trip", list(t, s, k1), rich...)
	if err := s.DeleteBelow(t.Context(), k1, 1<<63); err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "fenced delete below 2^63", list(t, s, k1), rich[1:]...)
	if err := s.Delete(t.Context(), k1, rich[1].TxID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBelow(t.Context(), k1, 1<<63+1); err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "fenced deletes at the end", list(t, s, k1))
	// A store that does not run ownership is not fenced.
	if err := putSeq(plain, k0, 3); err != nil {
		t.Fatalf("unfenced put: %v", err)
	}
	// After Run ends, nothing is owned: writes stay fenced.
	cancel()
	if err := waitRun(t, errc); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if h.owned() != 0 {
		t.Fatal("keys still owned after Run returned")
	}
	if err := putSeq(s, k1, 2); !errors.Is(err, journal.ErrNotOwner) {
		t.Fatalf("put after Run ended: %v, want ErrNotOwner", err)
	}
	if err := s.DeleteBelow(t.Context(), k1, 3); !errors.Is(err, journal.ErrNotOwner) {
		t.Fatalf("delete below after Run ended: %v, want ErrNotOwner", err)
	}
}

// A stopped server: every call fails with ErrStoreUnavailable (and no
// password), ownership ends with every key lost; when the server is back
// the same stores work again.
func TestPostgresOutage(t *testing.T) {
	srv := pgtest.Start(t)
	uri := srv.CreateDB(t)
	data := openPostgresURI(t, uri, store.Options{ConnectTimeout: 3 * time.Second})
	owner := openPostgresURI(t, uri, store.Options{ConnectTimeout: 3 * time.Second, OwnershipInterval: 50 * time.Millisecond})
	keys := keysN(2)
	h := newCluster().replica("r")
	errc := runOwner(t, t.Context(), owner, keys, h)
	eventually.True(t, 10*time.Second, "owning both keys", func() bool { return h.owned() == 2 })
	tx := testEntry(stxKey(1), 1, 1)
	if err := data.Put(t.Context(), tx); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	_, _, _, reserveErr := data.Reserve(ctx, t0, []guard.Bucket{bucket("k", 1, time.Minute)})
	_, listErr := data.List(ctx, tx.Key)
	for name, err := range map[string]error{
		"put":     data.Put(ctx, tx),
		"delete":  data.Delete(ctx, tx.Key, tx.TxID),
		"below":   data.DeleteBelow(ctx, tx.Key, 1),
		"list":    listErr,
		"reserve": reserveErr,
		"release": data.Release(ctx, guard.Reservation{IDs: []int64{1}}),
		"record":  data.Record(ctx, faucet.DripRecord{At: t0}),
		"ping":    data.Ping(ctx),
	} {
		if !errors.Is(err, faucet.ErrStoreUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrStoreUnavailable", name, err)
		} else if strings.Contains(err.Error(), pgtest.Password) {
			t.Errorf("%s: error shows the password: %v", name, err)
		}
	}
	if err := waitRun(t, errc); !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Errorf("Run with the server down: %v, want ErrStoreUnavailable", err)
	}
	if h.owned() != 0 || h.lostCount() != 2 {
		t.Errorf("after the outage: %d keys owned, %d lost; want 0 and 2", h.owned(), h.lostCount())
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 20*time.Second, "the store works again", func() bool {
		_, _, ok, err := data.Reserve(t.Context(), t0, []guard.Bucket{bucket("k", 1, time.Minute)})
		return err == nil && ok && data.Put(t.Context(), tx) == nil
	})
	if got, err := data.List(t.Context(), tx.Key); err != nil || len(got) != 1 {
		t.Fatalf("list after the outage: %+v, %v", got, err)
	}
	// The owner's caller restarts Run; the keys come back.
	runOwner(t, t.Context(), owner, keys, h)
	eventually.True(t, 10*time.Second, "owning both keys again", func() bool { return h.owned() == 2 })
	if err := owner.Put(t.Context(), testEntry(keys[0], 1, 1)); err != nil {
		t.Fatalf("fenced put after the outage: %v", err)
	}
}

// router is one replica's handlers as a faucet process wires them: the
// Stacks engine's for its keys, the BTC payer's for the Bitcoin key, one
// journal.Router in one Run.
func router(stx, btc journal.Handler, stxKeys []string, btcKey string) *journal.Router {
	r := &journal.Router{}
	r.Add(stx, stxKeys...)
	r.Add(btc, btcKey)
	return r
}

// A Bitcoin key and Stacks keys in one Run are spread like any keys: two
// replicas split three Stacks keys and the Bitcoin key two and two, each
// key's changes reach the handler it was routed to, each replica writes
// the journal with its own keys (the Bitcoin key too) and is refused the
// others'; when one replica closes, the other takes all four.
func TestPostgresOwnershipBTCAndStacksKeys(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	opts := store.Options{OwnershipInterval: 50 * time.Millisecond}
	s1, s2 := openPostgresURI(t, uri, opts), openPostgresURI(t, uri, opts)
	stx, btc := keysN(3), btcKey(t, 1)
	keys := append(slices.Clone(stx), btc)
	c := newCluster()
	// Each replica's Stacks and BTC handlers count under its name.
	h1s, h1b, h2s, h2b := c.replica("r1"), c.replica("r1"), c.replica("r2"), c.replica("r2")
	r1, r2 := router(h1s, h1b, stx, btc), router(h2s, h2b, stx, btc)
	if got := r1.Keys(); !slices.Equal(got, keys) {
		t.Fatalf("router keys %v, want %v", got, keys)
	}
	errc1 := runOwner(t, t.Context(), s1, r1.Keys(), r1)
	runOwner(t, t.Context(), s2, r2.Keys(), r2)
	eventually.True(t, 10*time.Second, "a 2/2 split", func() bool { return h1s.owned() == 2 && h2s.owned() == 2 })
	c.mu.Lock()
	btcOwner := c.owner[btc]
	c.mu.Unlock()
	if btcOwner != "r1" && btcOwner != "r2" {
		t.Fatalf("the Bitcoin key is owned by %q, want one replica", btcOwner)
	}
	// The Bitcoin key reached the BTC handler only, the Stacks keys the
	// Stacks handler only.
	for _, h := range []*replica{h1s, h2s} {
		if h.acquiredCount(btc) != 0 {
			t.Errorf("%s's Stacks handler was told of the Bitcoin key", h.name)
		}
	}
	for _, h := range []*replica{h1b, h2b} {
		for _, k := range stx {
			if h.acquiredCount(k) != 0 {
				t.Errorf("%s's BTC handler was told of Stacks key %s", h.name, k)
			}
		}
	}
	if n := h1b.acquiredCount(btc) + h2b.acquiredCount(btc); n < 1 {
		t.Fatal("no BTC handler was told of the Bitcoin key")
	}

	// Each replica writes with its own keys and is refused the others'.
	for _, k := range keys {
		tx := testEntry(k, 1, 1)
		e1, e2 := s1.Put(t.Context(), tx), s2.Put(t.Context(), tx)
		if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), journal.ErrNotOwner) {
			t.Fatalf("key %s: r1 put %v, r2 put %v; want exactly one refused with ErrNotOwner", k, e1, e2)
		}
		c.mu.Lock()
		owner := c.owner[k]
		c.mu.Unlock()
		if (owner == "r1") != (e1 == nil) {
			t.Fatalf("key %s owned by %s, yet r1 put %v and r2 put %v", k, owner, e1, e2)
		}
	}

	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := waitRun(t, errc1); err != nil {
		t.Fatalf("Run after Close: %v, want nil", err)
	}
	eventually.True(t, 10*time.Second, "r2 owns all four keys", func() bool { return h2s.owned() == 4 && h1s.owned() == 0 })
	if h2b.acquiredCount(btc) < 1 {
		t.Fatal("r2's BTC handler was not told it holds the Bitcoin key")
	}
	for _, k := range keys {
		if err := s2.Put(t.Context(), testEntry(k, 2, 2)); err != nil {
			t.Fatalf("r2 put with taken-over key %s: %v", k, err)
		}
		if err := s1.Put(t.Context(), testEntry(k, 3, 3)); err == nil {
			t.Fatalf("the closed r1 wrote for %s", k)
		}
		if got, err := s2.List(t.Context(), k); err != nil || len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 {
			t.Fatalf("journal of %s: %+v, %v; want seq 1 (its first owner's) and 2", k, got, err)
		}
	}
	c.check(t)
}

// killOwnership ends every key-ownership connection to raw's database
// from the server side, as when a replica's pod or network dies: its
// locks go with it, and the replica does not notice until its next round.
func killOwnership(t *testing.T, raw rawPG) {
	t.Helper()
	var n int
	if err := raw.c.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = 'faucet key-ownership'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no key-ownership connection to end")
	}
}

func notOwner(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, journal.ErrNotOwner) {
		t.Fatalf("%s: %v, want ErrNotOwner", what, err)
	}
}

// gated is a handler whose Acquired, once it owns every key, waits until
// open is closed (or Run ends): the replica is busy and reads nothing from
// its lock connection meanwhile, as one paused or cut off by the network.
type gated struct {
	*replica
	keys int
	open chan struct{}
}

func (g gated) Acquired(ctx context.Context, k string) {
	g.replica.Acquired(ctx, k)
	if g.owned() == g.keys {
		select {
		case <-g.open:
		case <-ctx.Done():
		}
	}
}

// Fencing by a real takeover, for the Bitcoin key as for a Stacks key: the
// first replica's lock connection dies while the replica is busy, and a
// second replica takes both keys; the first has not noticed and still
// believes it owns them, yet the store refuses its journal writes (the
// epoch in the statement is stale) and keeps the new owner's.
func TestPostgresFencingBTCKeyTakeover(t *testing.T) {
	ctx := t.Context()
	uri := pgtest.Shared(t).CreateDB(t)
	s1 := openPostgresURI(t, uri, store.Options{ReplicaName: "r1", OwnershipInterval: time.Hour})
	s2 := openPostgresURI(t, uri, store.Options{ReplicaName: "r2", OwnershipInterval: 50 * time.Millisecond})
	raw := openRawPG(t, uri)
	stx, btc := stxKey(100), btcKey(t, 1)
	keys := []string{stx, btc}
	h1, h2 := newCluster().replica("r1"), newCluster().replica("r2")
	busy := gated{replica: h1, keys: len(keys), open: make(chan struct{})}

	errc1 := runOwner(t, ctx, s1, keys, busy)
	eventually.True(t, 10*time.Second, "r1 owns both keys", func() bool { return h1.owned() == 2 })
	notOwner(t, "a put for a Bitcoin key outside the Run", s1.Put(ctx, testEntry(btcKey(t, 2), 1, 1)))
	for _, k := range keys {
		put(t, s1, testEntry(k, 1, 1), testEntry(k, 2, 2))
	}

	killOwnership(t, raw)
	runOwner(t, ctx, s2, keys, h2)
	eventually.True(t, 10*time.Second, "r2 takes both keys", func() bool { return h2.owned() == 2 })
	if h1.owned() != 2 || h1.lostCount() != 0 {
		t.Fatalf("r1 owns %d keys and lost %d: it should not have noticed yet", h1.owned(), h1.lostCount())
	}
	for _, k := range keys {
		notOwner(t, "the stale replica's put for "+k, s1.Put(ctx, testEntry(k, 3, 3)))
		notOwner(t, "the stale replica's delete for "+k, s1.Delete(ctx, k, testTxID(1).String()))
		notOwner(t, "the stale replica's delete below for "+k, s1.DeleteBelow(ctx, k, 2))
		// The new owner's writes land; the stale one changed nothing.
		put(t, s2, testEntry(k, 4, 4))
		if err := s2.Delete(ctx, k, testTxID(2).String()); err != nil {
			t.Fatal(err)
		}
		got := list(t, s2, k)
		if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 4 {
			t.Fatalf("journal of %s: %s; want seq 1 (the first owner's) and 4, not the stale 3", k, entryIDs(got))
		}
		var owner string
		if err := raw.c.QueryRow(ctx, `SELECT owner FROM key_owners WHERE key = $1`, k).Scan(&owner); err != nil || owner != "r2" {
			t.Fatalf("key_owners says %s is %q's (%v), want r2's", k, owner, err)
		}
	}
	// r1 learns it at last, once no longer busy: it loses both keys, and
	// its writes stay refused.
	close(busy.open)
	if err := waitRun(t, errc1); err == nil {
		t.Fatal("r1's Run went on with its lock connection gone")
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if h1.owned() != 0 || h1.lostCount() != 2 {
		t.Fatalf("after closing r1: %d keys owned, %d lost; want 0 and 2", h1.owned(), h1.lostCount())
	}
	notOwner(t, "put after the stale replica closed", s1.Put(ctx, testEntry(btc, 5, 5)))
}
