package faucet

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// fencedJournal refuses writes for one sender as a shared store does once
// another replica owns the key.
type fencedJournal struct {
	*journal.MemoryStore
	fenced stacks.Address
}

func (l *fencedJournal) Put(ctx context.Context, e journal.Entry) error {
	if e.Key == l.fenced.String() {
		return fmt.Errorf("put: %w", journal.ErrNotOwner)
	}
	return l.MemoryStore.Put(ctx, e)
}

// useJournal points the engine at s, as New would have.
func (f *Faucet) useJournal(s journal.Store) {
	f.cfg.State.Journal = s
	*f.journal = *journal.New(s, f.cfg.Clock)
}

// listPending reads back the engine's entries of sender in s.
func listPending(t testing.TB, s journal.Store, sender stacks.Address) []PendingTx {
	t.Helper()
	entries, err := s.List(context.Background(), sender.String())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]PendingTx, len(entries))
	for i, e := range entries {
		if out[i], err = pendingOf(e); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// putPending records p in s as the engine would.
func putPending(t testing.TB, s journal.Store, p PendingTx) {
	t.Helper()
	if err := s.Put(context.Background(), p.entry()); err != nil {
		t.Fatal(err)
	}
}

// A write refused because another replica owns the key: nothing is sent
// with it, the drip moves to another key and the key is dropped.
func TestFencedKeyIsDropped(t *testing.T) {
	e := newEnv(t, 2, 100_000_000_000, devnode.Config{}, Config{})
	fenced := e.keys[0].TestnetAddress()
	e.f.useJournal(&fencedJournal{MemoryStore: journal.NewMemoryStore(), fenced: fenced})
	for range 4 {
		res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sender == fenced {
			t.Fatal("sent with a key owned elsewhere")
		}
	}
	if st := e.f.Keys()[0]; st.Owned {
		t.Fatalf("fenced key still owned: %+v", st)
	}
	if n := e.dn.MempoolSize(); n != 4 {
		t.Fatalf("mempool %d, want 4", n)
	}
}

// With a shared store a replica starts with no key: not ready and no drips.
// Acquired makes the key usable; Releasing gives it up. (The test drives
// the handler as the Postgres owner would.)
func TestOwnershipHandoff(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{State: State{Shared: true}})
	ctx := context.Background()
	if err := e.f.Ready(ctx); err == nil || !strings.Contains(err.Error(), "owns no faucet key") {
		t.Fatalf("ready without keys: %v", err)
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: recipient(t)}); ReasonOf(err) != ReasonBusy {
		t.Fatalf("drip without keys: %v, want busy", err)
	}
	addr := e.keys[0].TestnetAddress()
	e.f.Acquired(ctx, addr.String())
	if err := e.f.Ready(ctx); err != nil {
		t.Fatalf("ready after acquiring: %v", err)
	}
	res, err := e.f.Drip(ctx, Request{Recipient: recipient(t)})
	if err != nil || res.Sender != addr {
		t.Fatalf("drip after acquiring: %+v, %v", res, err)
	}
	e.f.Releasing(ctx, addr.String())
	if st := e.f.Keys()[0]; st.Owned {
		t.Fatalf("released key still owned: %+v", st)
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: recipient(t)}); ReasonOf(err) != ReasonBusy {
		t.Fatalf("drip after releasing: %v, want busy", err)
	}
	// Re-acquiring reloads the ledger: the in-flight nonce 0 is not reused.
	e.f.Acquired(ctx, addr.String())
	res, err = e.f.Drip(ctx, Request{Recipient: recipient(t)})
	if err != nil || res.Nonce != 1 {
		t.Fatalf("drip after re-acquiring: %+v, %v; want nonce 1", res, err)
	}
}
