package faucet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// crashingJournal stops taking writes once crashed: the process died, and
// nothing it would have written after that point is durable.
type crashingJournal struct {
	*journal.MemoryStore
	crashed atomic.Bool
}

var errCrashed = errors.New("the process is gone")

func (c *crashingJournal) Put(ctx context.Context, e journal.Entry) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.MemoryStore.Put(ctx, e)
}

func (c *crashingJournal) Delete(ctx context.Context, key, txid string) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.MemoryStore.Delete(ctx, key, txid)
}

func (c *crashingJournal) DeleteBelow(ctx context.Context, key string, seq uint64) error {
	if c.crashed.Load() {
		return errCrashed
	}
	return c.MemoryStore.DeleteBelow(ctx, key, seq)
}

// crashAfterBroadcast is a node whose process dies right after one
// broadcast that passes when returns true has reached it.
type crashAfterBroadcast struct {
	NodeClient
	when    func(raw []byte) bool
	journal *crashingJournal
	mu      sync.Mutex
	sent    []byte // the bytes that crashed it
}

func (n *crashAfterBroadcast) Broadcast(ctx context.Context, raw []byte) (string, error) {
	id, err := n.NodeClient.Broadcast(ctx, raw)
	if err == nil && n.when(raw) && !n.journal.crashed.Load() {
		n.mu.Lock()
		n.sent = raw
		n.mu.Unlock()
		n.journal.crashed.Store(true)
	}
	return id, err
}

// A fee bump is recorded before it is broadcast: a crash right after the
// node took the replacement leaves the journal holding the transaction the
// node holds, so the restarted faucet follows (and reports) the drip under
// the txid that will be mined. Recording after the broadcast, the journal
// kept only the replaced transaction, which the node no longer has.
func TestFeeBumpCrashLeavesJournalConsistent(t *testing.T) {
	const stuck = 2
	const funding = 100_000_000_000
	store := &crashingJournal{MemoryStore: journal.NewMemoryStore()}
	e := newEnv(t, 1, funding, devnode.Config{}, Config{Timing: Timing{StuckBlocks: stuck}, State: State{Journal: store}})
	ctx := context.Background()
	e.dn.SetDropRate(1) // the node answers 200 and forgets the drip
	res, err := e.f.Drip(ctx, Request{Recipient: recipient(t)})
	if err != nil {
		t.Fatal(err)
	}
	for range stuck {
		e.mine() // the rebroadcast is dropped as well
	}
	e.dn.SetDropRate(0)
	node := &crashAfterBroadcast{NodeClient: e.f.cfg.Node, journal: store, when: func(raw []byte) bool {
		tx, err := stacks.DecodeTransaction(raw)
		return err == nil && tx.TxID() != res.TxID // the replacement
	}}
	e.f.setNode(node)
	for range stuck + 1 {
		e.dn.Mine()
		_ = e.f.Sync(ctx) // writes fail once crashed
		if store.crashed.Load() {
			break
		}
	}
	if !store.crashed.Load() {
		t.Fatal("no fee bump was broadcast")
	}
	rep, err := stacks.DecodeTransaction(node.sent)
	if err != nil {
		t.Fatal(err)
	}
	if st := e.dn.TxStatus(rep.TxID()); st.State != devnode.TxPending {
		t.Fatalf("the replacement is %v at the node, want pending", st.State)
	}
	sender := e.keys[0].TestnetAddress()
	held := map[stacks.TxID]bool{}
	for _, p := range listPending(t, store.MemoryStore, sender) {
		held[p.TxID] = true
	}
	if !held[rep.TxID()] {
		t.Fatalf("after the crash the journal holds %v, not the replacement %s the node holds", held, rep.TxID().Hex0x())
	}

	// The next process resumes it: the drip is followed under the txid the
	// node holds, paid once, and nothing is left once it confirms.
	store.crashed.Store(false)
	e.f.setNode(node.NodeClient)
	f := e.restart(t)
	if p, ok := f.PendingAt(sender.String(), res.Nonce); !ok || p.TxID != rep.TxID() {
		t.Fatalf("after the restart nonce %d is %+v (%v), want the replacement %s", res.Nonce, p.TxID, ok, rep.TxID().Hex0x())
	}
	e.mine()
	if bal, _ := e.dn.Account(res.Recipient(t)); bal != DefaultAmount {
		t.Fatalf("recipient has %d, want one drip of %d", bal, DefaultAmount)
	}
	if left := listPending(t, store.MemoryStore, sender); len(left) != 0 {
		t.Fatalf("the journal keeps %d entries after the nonce confirmed", len(left))
	}
}
