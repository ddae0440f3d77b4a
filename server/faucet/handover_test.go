package faucet

import (
	"context"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

var _ journal.Handover = (*Faucet)(nil)

// While the replica hands its keys over (its share fell to none and the
// owner keeps them for the drain), Ready fails, saying so, and drips that
// still arrive are paid with the key; once over, Ready says what follows.
func TestHandingOverIsNotReadyButPays(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{State: State{Shared: true}})
	ctx := context.Background()
	addr := e.keys[0].TestnetAddress()
	e.f.Acquired(ctx, addr.String())
	if err := e.f.Ready(ctx); err != nil {
		t.Fatalf("ready after acquiring: %v", err)
	}
	e.f.HandingOver(true)
	if err := e.f.Ready(ctx); err == nil || !strings.Contains(err.Error(), "handing its keys over") {
		t.Fatalf("ready while handing over: %v, want the handing over", err)
	}
	res, err := e.f.Drip(ctx, Request{Recipient: recipient(t)})
	if err != nil || res.Sender != addr {
		t.Fatalf("drip while handing over: %+v, %v; want paid with the key", res, err)
	}
	// The share came back: ready again.
	e.f.HandingOver(false)
	if err := e.f.Ready(ctx); err != nil {
		t.Fatalf("ready once no longer handing over: %v", err)
	}
	// Handed over: the key released, not ready for want of a key.
	e.f.HandingOver(true)
	e.f.Releasing(ctx, addr.String())
	e.f.HandingOver(false)
	if err := e.f.Ready(ctx); err == nil || !strings.Contains(err.Error(), "owns no faucet key") {
		t.Fatalf("ready after handing over: %v, want no key", err)
	}
}
