package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// cluster watches the handlers of several replicas and records any moment
// at which two of them believed they owned the same key.
type cluster struct {
	mu         sync.Mutex
	owner      map[stacks.Address]string
	violations []string
}

func newCluster() *cluster { return &cluster{owner: map[stacks.Address]string{}} }

// replica is one replica's faucet.OwnershipHandler.
type replica struct {
	c    *cluster
	name string
	lost int
}

func (c *cluster) replica(name string) *replica { return &replica{c: c, name: name} }

func (r *replica) Acquired(_ context.Context, k stacks.Address) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if o, ok := r.c.owner[k]; ok && o != r.name {
		r.c.violations = append(r.c.violations, fmt.Sprintf("%s acquired %s still owned by %s", r.name, k, o))
	}
	r.c.owner[k] = r.name
}

func (r *replica) Releasing(_ context.Context, k stacks.Address) { r.drop(k, false) }
func (r *replica) Lost(k stacks.Address)                         { r.drop(k, true) }

func (r *replica) drop(k stacks.Address, lost bool) {
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
func runOwner(t *testing.T, ctx context.Context, s *store.Postgres, keys []stacks.Address, h faucet.OwnershipHandler) <-chan error {
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		errc <- s.Run(ctx, keys, h)
	}()
	t.Cleanup(func() { _ = s.Close(); <-done })
	return errc
}

func keysN(n int) []stacks.Address {
	out := make([]stacks.Address, n)
	for i := range out {
		out[i] = testAddr(byte(100 + i))
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
		tx := faucet.PendingTx{Sender: k, Nonce: 1, TxID: testTxID(1), State: faucet.TxPending}
		e1, e2 := s1.Put(t.Context(), tx), s2.Put(t.Context(), tx)
		if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), faucet.ErrNotOwner) {
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
		if err := s2.Put(t.Context(), faucet.PendingTx{Sender: k, Nonce: 2, TxID: testTxID(2), State: faucet.TxPending}); err != nil {
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

	put := func(st faucet.Ledger, k stacks.Address, nonce uint64) error {
		return st.Put(t.Context(), faucet.PendingTx{Sender: k, Nonce: nonce, TxID: testTxID(byte(nonce)), State: faucet.TxPending})
	}
	if err := put(s, k0, 1); err != nil {
		t.Fatal(err)
	}
	if err := put(s, testAddr(7), 1); !errors.Is(err, faucet.ErrNotOwner) {
		t.Fatalf("put with a key not owned: %v, want ErrNotOwner", err)
	}
	// Another replica took k0 (its Run bumped the epoch).
	raw.exec(t, "UPDATE key_owners SET epoch = epoch + 1, owner = 'elsewhere' WHERE key = $1", k0.String())
	if err := put(s, k0, 2); !errors.Is(err, faucet.ErrNotOwner) {
		t.Fatalf("put with a stale epoch: %v, want ErrNotOwner", err)
	}
	if err := s.Delete(t.Context(), k0, 1); !errors.Is(err, faucet.ErrNotOwner) {
		t.Fatalf("delete with a stale epoch: %v, want ErrNotOwner", err)
	}
	if got, err := s.List(t.Context(), k0); err != nil || len(got) != 1 || got[0].Nonce != 1 {
		t.Fatalf("ledger after refused writes: %+v, %v; want nonce 1 only", got, err)
	}
	// The other key is unaffected.
	if err := put(s, k1, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), k1, 1); err != nil {
		t.Fatal(err)
	}
	// A store that does not run ownership is not fenced.
	if err := put(plain, k0, 3); err != nil {
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
	if err := put(s, k1, 2); !errors.Is(err, faucet.ErrNotOwner) {
		t.Fatalf("put after Run ended: %v, want ErrNotOwner", err)
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
	tx := faucet.PendingTx{Sender: testAddr(1), Nonce: 1, TxID: testTxID(1), State: faucet.TxPending}
	if err := data.Put(t.Context(), tx); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	_, _, _, reserveErr := data.Reserve(ctx, t0, []guard.Bucket{bucket("k", 1, time.Minute)})
	_, listErr := data.List(ctx, tx.Sender)
	for name, err := range map[string]error{
		"put":     data.Put(ctx, tx),
		"delete":  data.Delete(ctx, tx.Sender, 1),
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
	if got, err := data.List(t.Context(), tx.Sender); err != nil || len(got) != 1 {
		t.Fatalf("list after the outage: %+v, %v", got, err)
	}
	// The owner's caller restarts Run; the keys come back.
	runOwner(t, t.Context(), owner, keys, h)
	eventually.True(t, 10*time.Second, "owning both keys again", func() bool { return h.owned() == 2 })
	if err := owner.Put(t.Context(), faucet.PendingTx{Sender: keys[0], Nonce: 1, TxID: testTxID(1), State: faucet.TxPending}); err != nil {
		t.Fatalf("fenced put after the outage: %v", err)
	}
}
