package faucet

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// fencedLedger refuses writes for one sender as a shared store does once
// another replica owns the key.
type fencedLedger struct {
	*MemoryLedger
	fenced stacks.Address
}

func (l *fencedLedger) Put(ctx context.Context, tx PendingTx) error {
	if tx.Sender == l.fenced {
		return fmt.Errorf("put: %w", ErrNotOwner)
	}
	return l.MemoryLedger.Put(ctx, tx)
}

// A write refused because another replica owns the key: nothing is sent
// with it, the drip moves to another key and the key is dropped.
func TestFencedKeyIsDropped(t *testing.T) {
	e := newEnv(t, 2, 100_000_000_000, devnode.Config{}, Config{})
	fenced := e.keys[0].TestnetAddress()
	e.f.cfg.State.Ledger = &fencedLedger{MemoryLedger: NewMemoryLedger(), fenced: fenced}
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

// idleOwner is a KeyOwner that never hands out keys by itself; the test
// drives the handler as the Postgres owner would.
type idleOwner struct{}

func (idleOwner) Run(ctx context.Context, _ []stacks.Address, _ OwnershipHandler) error {
	<-ctx.Done()
	return nil
}

// With a KeyOwner a replica starts with no key: not ready and no drips.
// Acquired makes the key usable; Releasing gives it up.
func TestOwnershipHandoff(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{State: State{Owner: idleOwner{}}})
	ctx := context.Background()
	if err := e.f.Ready(ctx); err == nil || !strings.Contains(err.Error(), "owns no faucet key") {
		t.Fatalf("ready without keys: %v", err)
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: recipient(t)}); ReasonOf(err) != ReasonBusy {
		t.Fatalf("drip without keys: %v, want busy", err)
	}
	addr := e.keys[0].TestnetAddress()
	e.f.Acquired(ctx, addr)
	if err := e.f.Ready(ctx); err != nil {
		t.Fatalf("ready after acquiring: %v", err)
	}
	res, err := e.f.Drip(ctx, Request{Recipient: recipient(t)})
	if err != nil || res.Sender != addr {
		t.Fatalf("drip after acquiring: %+v, %v", res, err)
	}
	e.f.Releasing(ctx, addr)
	if st := e.f.Keys()[0]; st.Owned {
		t.Fatalf("released key still owned: %+v", st)
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: recipient(t)}); ReasonOf(err) != ReasonBusy {
		t.Fatalf("drip after releasing: %v, want busy", err)
	}
	// Re-acquiring reloads the ledger: the in-flight nonce 0 is not reused.
	e.f.Acquired(ctx, addr)
	res, err = e.f.Drip(ctx, Request{Recipient: recipient(t)})
	if err != nil || res.Nonce != 1 {
		t.Fatalf("drip after re-acquiring: %+v, %v; want nonce 1", res, err)
	}
}
