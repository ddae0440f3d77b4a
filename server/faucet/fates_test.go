package faucet

import (
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func TestTxFates(t *testing.T) {
	f := &Faucet{fates: &txFates{}}
	a, b, c, d := stacks.TxID{1}, stacks.TxID{2}, stacks.TxID{3}, stacks.TxID{4}
	f.fates.replaced(a, b)
	f.fates.replaced(b, c) // a second bump
	f.fates.dropped(d)
	if got, ok := f.ReplacementOf(a.Hex0x()); !ok || got != c.String() {
		t.Errorf("ReplacementOf(a) = %q %v, want the last bump %s", got, ok, c)
	}
	if _, ok := f.ReplacementOf(c.String()); ok {
		t.Error("the live replacement reads as replaced")
	}
	if !f.Dropped(d.String()) || f.Dropped(a.String()) || f.Dropped("nonsense") {
		t.Error("Dropped")
	}
	// Bounded: the oldest entries go first.
	g := &Faucet{fates: &txFates{}}
	g.fates.capacity = 2
	g.fates.dropped(a)
	g.fates.dropped(b)
	g.fates.dropped(c)
	if g.Dropped(a.String()) || !g.Dropped(b.String()) || !g.Dropped(c.String()) {
		t.Error("eviction did not drop the oldest entry")
	}
}
