package devnode

import (
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
)

// The chaining limit's exact edge: on account nonce n, nonce n+26 is the
// last admissible one (max = n + 1 + 25) and n+27 is TooMuchChaining.
func TestChainingLimitEdge(t *testing.T) {
	h := newHarness(t, Config{})
	alice, bob := newWallet(t), newWallet(t)
	h.n.Fund(alice.addr, aliceFunds)
	h.mustAccept(alice.send(t, bob.principal(), 1, 0, 180, ""))
	h.n.Mine() // account nonce 1
	h.mustAccept(alice.send(t, bob.principal(), 1, 1+26, 180, ""))
	_, err := h.n.Submit(alice.send(t, bob.principal(), 1, 1+27, 180, "").Serialize())
	if !isReason(err, node.ReasonTooMuchChaining) {
		t.Fatalf("nonce %d on account nonce 1: %v, want TooMuchChaining", 1+27, err)
	}
}
