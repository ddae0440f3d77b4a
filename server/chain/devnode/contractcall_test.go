package devnode

import (
	"context"
	"errors"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// A contract call passes the same admission checks as a transfer and is
// then refused with the node's error for a missing contract: the devnode
// deploys none.
func TestContractCallToMissingContract(t *testing.T) {
	w := newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{w.addr: 1_000_000_000}})
	call := func(nonce, fee uint64) *stacks.Transaction {
		t.Helper()
		tx, err := stacks.NewSendMany(stacks.SendManyParams{
			Recipients: []stacks.SendManyEntry{{To: newWallet(t).principal(), Amount: 1_000}},
			Nonce:      nonce, Fee: fee,
		}, w.key)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	reason := func(tx *stacks.Transaction) string {
		t.Helper()
		_, err := h.c.Broadcast(context.Background(), tx.Serialize())
		var rej *node.RejectionError
		if !errors.As(err, &rej) {
			t.Fatalf("broadcast: %v, want a rejection", err)
		}
		return rej.Reason
	}
	if got := reason(call(0, 10_000)); got != node.ReasonNoSuchContract {
		t.Errorf("send-many: reason %q, want %q", got, node.ReasonNoSuchContract)
	}
	// The earlier checks still come first, as in the node's admission order.
	if got := reason(call(0, 1)); got != node.ReasonFeeTooLow {
		t.Errorf("low fee: reason %q, want FeeTooLow", got)
	}
	if got := reason(call(40, 10_000)); got != node.ReasonTooMuchChaining {
		t.Errorf("far nonce: reason %q, want TooMuchChaining", got)
	}
	if got := reason(call(0, 2_000_000_000)); got != node.ReasonNotEnoughFunds {
		t.Errorf("fee above the balance: reason %q, want NotEnoughFunds", got)
	}
	if n := h.n.MempoolSize(); n != 0 {
		t.Errorf("mempool holds %d txs", n)
	}
}
