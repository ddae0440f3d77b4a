package faucet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// gatedUpdates holds the journal write a repair makes after a resend (an
// entry whose resend count has risen) until released: a slow store.
type gatedUpdates struct {
	*journal.MemoryStore
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func newGatedUpdates() *gatedUpdates {
	return &gatedUpdates{MemoryStore: journal.NewMemoryStore(), entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedUpdates) Put(ctx context.Context, e journal.Entry) error {
	g.mu.Lock()
	hold := false
	if p, err := pendingOf(e); err == nil && g.armed && p.Rebroadcasts > 0 {
		hold, g.armed = true, false
	}
	g.mu.Unlock()
	if hold {
		close(g.entered)
		<-g.release
	}
	return g.MemoryStore.Put(ctx, e)
}

// inDoubtDrip answers one drip whose broadcast reached the node with the
// answer lost: the next poll resolves it by resending, and then records
// its new state in the journal (repairer.updatePending).
func inDoubtDrip(t *testing.T, store journal.Store) (*env, *Result) {
	t.Helper()
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{State: State{Journal: store}})
	n := e.f.cfg.Node
	e.f.setNode(lostAnswer(n))
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err != nil || !res.InDoubt {
		t.Fatalf("drip %+v, %v; want it in doubt", res, err)
	}
	e.f.setNode(n)
	return e, res
}

// A slow journal write of a repaired entry holds no key lock: while it is
// under way, a drip from the same key gets its nonce and is sent.
func TestSlowJournalWriteDoesNotStallTheKey(t *testing.T) {
	store := newGatedUpdates()
	e, first := inDoubtDrip(t, store)
	store.mu.Lock()
	store.armed = true
	store.mu.Unlock()
	synced := make(chan error, 1)
	go func() { synced <- e.f.Sync(context.Background()) }()
	<-store.entered // the resolved entry's write is under way

	to := recipient(t)
	dripped := make(chan dripOutcome, 1)
	go func() {
		res, err := e.f.Drip(context.Background(), Request{Recipient: to})
		dripped <- dripOutcome{to, res, err}
	}()
	var res *Result
	select {
	case out := <-dripped:
		if out.err != nil {
			t.Fatalf("drip while a journal write of its key was under way: %v", out.err)
		}
		res = out.res
	case <-time.After(10 * time.Second):
		t.Fatal("a drip waited for the journal write of its key")
	}
	if res.Sender != first.Sender || res.Nonce != first.Nonce+1 {
		t.Fatalf("drip %+v, want the same key at nonce %d", res, first.Nonce+1)
	}
	close(store.release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	rows := listPending(t, store.MemoryStore, first.Sender)
	if len(rows) != 2 || rows[0].State != TxPending || rows[0].Rebroadcasts != 1 {
		t.Fatalf("journal %+v, want the resolved entry pending beside the new drip", rows)
	}
}

// The write after the lock lands late: a sync confirmed the entry's nonce
// and forgot its row meanwhile. The late write must not leave that row
// behind, and a restarted engine pays nothing again.
func TestLateJournalWriteOfAConfirmedNonceIsForgotten(t *testing.T) {
	store := newGatedUpdates()
	e, first := inDoubtDrip(t, store)
	store.mu.Lock()
	store.armed = true
	store.mu.Unlock()
	synced := make(chan error, 1)
	go func() { synced <- e.f.Sync(context.Background()) }()
	<-store.entered

	e.dn.Mine() // the resolved drip confirms
	if err := e.f.accounts.syncKey(context.Background(), e.f.pool.keys[0]); err != nil {
		t.Fatal(err)
	}
	if rows := listPending(t, store.MemoryStore, first.Sender); len(rows) != 0 {
		t.Fatalf("the sync left %d rows of the confirmed nonce", len(rows))
	}
	close(store.release) // the held write lands now
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if rows := listPending(t, store.MemoryStore, first.Sender); len(rows) != 0 {
		t.Fatalf("the late write left %+v in the journal for a confirmed nonce", rows)
	}

	// A restart resumes nothing and sends nothing: the drip is paid once.
	f := e.restart(t)
	if st := f.Keys()[0]; st.InFlight != 0 || st.ConfirmedNonce != first.Nonce+1 {
		t.Fatalf("after the restart %+v, want nothing in flight", st)
	}
	if n := e.dn.MempoolSize(); n != 0 {
		t.Fatalf("mempool %d after the restart, want nothing sent again", n)
	}
	e.mine()
	if bal, _ := e.dn.Account(first.Recipient(t)); bal != DefaultAmount {
		t.Fatalf("recipient has %d, want one drip of %d", bal, DefaultAmount)
	}
}
