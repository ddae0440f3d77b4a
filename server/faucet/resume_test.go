package faucet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// restart builds a second engine over the same node, keys and state, as a
// restarted process with a durable store would be.
func (e *env) restart(t *testing.T) *Faucet {
	t.Helper()
	cfg := e.f.cfg
	f, err := New(Config{Keys: cfg.Keys, Node: cfg.Node, State: State{Journal: cfg.State.Journal, History: cfg.State.History}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.f = f
	return f
}

// Unconfirmed drips survive a restart: the new engine's nonces continue
// after the stored in-flight ones (no ConflictingNonceInMempool, no busy).
// (That the limits survive too is the store's: guard's
// TestRateLimitsSurviveARestart and the store contract.)
func TestRestartResumesNonces(t *testing.T) {
	e := newEnv(t, 2, 100_000_000_000, devnode.Config{}, Config{State: State{Journal: journal.NewMemoryStore()}})
	ctx := context.Background()
	a := recipient(t)
	paid := map[stacks.Principal]uint64{}
	var fees uint64
	drip := func(to stacks.Principal) error {
		res, err := e.f.Drip(ctx, Request{Recipient: to})
		if err == nil {
			paid[to] += res.Amount
			fees += res.Fee
		}
		return err
	}
	for i := range 20 {
		to := recipient(t)
		if i < 5 {
			to = a
		}
		if err := drip(to); err != nil {
			t.Fatalf("drip %d before restart: %v", i, err)
		}
	}
	e.restart(t)
	for i := range 20 {
		if err := drip(recipient(t)); err != nil {
			t.Fatalf("drip %d after restart: %v", i, err)
		}
	}
	if n := e.dn.MempoolSize(); n != 40 {
		t.Fatalf("mempool %d, want 40", n)
	}
	for e.dn.MempoolSize() > 0 {
		e.mine()
	}
	var total uint64
	for to, want := range paid {
		if got, _ := e.dn.Account(to.Address); got != want {
			t.Errorf("%s balance %d, want %d", to, got, want)
		}
		total += want
	}
	var left uint64
	for _, k := range e.keys {
		b, _ := e.dn.Account(k.TestnetAddress())
		left += b
	}
	if left != 2*100_000_000_000-total-fees {
		t.Errorf("faucet keys hold %d, want %d", left, 2*100_000_000_000-total-fees)
	}
}

// A crash between recording a tx and sending it, or between sending it and
// marking it, leaves a "broadcasting" entry. Resuming rebroadcasts the same
// bytes: a tx the node never saw is delivered, one it already holds is not
// paid twice, and the next drip takes the following nonce.
func TestResumeResolvesEntriesInDoubt(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{State: State{Journal: journal.NewMemoryStore()}})
	ctx := context.Background()
	key := e.keys[0]
	sender := key.TestnetAddress()
	unsent, sent := recipient(t), recipient(t)
	record := func(nonce uint64, to stacks.Principal, submit bool) {
		tx, err := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: to, Amount: 7_000_000, Nonce: nonce, Fee: 300, Memo: e.f.drips.memo, ChainID: stacks.ChainIDTestnet}, key)
		if err != nil {
			t.Fatal(err)
		}
		raw := tx.Serialize()
		putPending(t, e.f.cfg.State.Journal, PendingTx{Sender: sender, Nonce: nonce, TxID: tx.TxID(), Raw: raw, Recipient: to, Amount: 7_000_000, Fee: 300, State: TxBroadcasting})
		if submit {
			if _, err := e.dn.Submit(raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(0, unsent, false) // crashed before the send
	record(1, sent, true)    // crashed before the mark
	f := e.restart(t)
	if n := e.dn.MempoolSize(); n != 2 {
		t.Fatalf("mempool %d after resume, want both txs", n)
	}
	entries := listPending(t, f.cfg.State.Journal, sender)
	for _, p := range entries {
		if p.State != TxPending {
			t.Errorf("nonce %d still %s after resolution", p.Nonce, p.State)
		}
	}
	res, err := f.Drip(ctx, Request{Recipient: recipient(t)})
	if err != nil || res.Nonce != 2 {
		t.Fatalf("next drip %+v, %v; want nonce 2", res, err)
	}
	for e.dn.MempoolSize() > 0 {
		e.mine()
	}
	for _, to := range []stacks.Principal{unsent, sent} {
		if b, _ := e.dn.Account(to.Address); b != 7_000_000 {
			t.Errorf("%s got %d, want exactly one payment of 7000000", to, b)
		}
	}
	if entries := listPending(t, f.cfg.State.Journal, sender); len(entries) != 0 {
		t.Errorf("ledger keeps %d confirmed entries", len(entries))
	}
}

// recordingHistory keeps records in memory.
type recordingHistory struct {
	mu   sync.Mutex
	recs []DripRecord
}

func (h *recordingHistory) Record(_ context.Context, d DripRecord) error {
	h.mu.Lock()
	h.recs = append(h.recs, d)
	h.mu.Unlock()
	return nil
}

func (h *recordingHistory) Prune(context.Context, time.Time) (int64, error) { return 0, nil }

// Every answered drip recorded lands in the history, also those queued
// while Run writes it in the background: Run flushes the queue before it
// returns. RecordOf says what was paid, or why not.
func TestHistoryRecordsEveryDrip(t *testing.T) {
	hist := &recordingHistory{}
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{State: State{History: hist}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.f.Run(ctx) }()
	to := recipient(t)
	req := Request{Recipient: to}
	res, err := e.f.Drip(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	e.f.Record(ctx, RecordOf(time.Now(), req, res, nil))
	e.dn.SetDown(true)
	req = Request{Recipient: recipient(t), Stacking: true}
	_, err = e.f.Drip(context.Background(), req)
	if err == nil {
		t.Fatal("stacking drip with the node down succeeded")
	}
	e.f.Record(ctx, RecordOf(time.Now(), req, nil, err))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	hist.mu.Lock()
	defer hist.mu.Unlock()
	if len(hist.recs) != 2 {
		t.Fatalf("history has %d records, want 2: %+v", len(hist.recs), hist.recs)
	}
	got := hist.recs[0]
	if got.Outcome != OutcomeSent || got.TxID != res.TxID.String() || got.Recipient != to.String() || got.Amount != res.Amount || got.Nonce != res.Nonce {
		t.Errorf("sent record %+v", got)
	}
	if hist.recs[1].Outcome == OutcomeSent || hist.recs[1].Outcome == "" {
		t.Errorf("failed drip recorded as %q", hist.recs[1].Outcome)
	}
}
