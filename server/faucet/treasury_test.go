package faucet

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// Small drips keep the numbers readable: a drip is 1 STX plus a 180 µSTX
// fee, the refill threshold 20 × (1 STX + 1000 µSTX) = 20_020_000 and a
// refill 200_200_000 µSTX.
const (
	tDrip        uint64 = 1_000_000
	tRefillBelow        = 20 * (tDrip + DefaultFeeFallback)
	tRefillAmt          = 10 * tRefillBelow
)

func treasuryConfig(c Config) Config {
	c.Amounts.Default = tDrip
	if c.Fees.Max == 0 {
		c.Fees.Max = 1000
	}
	return c
}

// newTreasuryEnv is newEnv with a treasury key funded with treasuryFunding.
func newTreasuryEnv(t *testing.T, nKeys int, funding, treasuryFunding uint64, dcfg devnode.Config, fcfg Config) *env {
	t.Helper()
	tk, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if dcfg.Genesis == nil {
		dcfg.Genesis = map[stacks.Address]uint64{}
	}
	dcfg.Genesis[tk.TestnetAddress()] = treasuryFunding
	fcfg.Refills.Treasury = tk
	return newEnv(t, nKeys, funding, dcfg, treasuryConfig(fcfg))
}

func (e *env) treasury() TreasuryStatus {
	e.t.Helper()
	s, ok := e.f.Treasury()
	if !ok {
		e.t.Fatal("no treasury")
	}
	return s
}

// treasuryTxs lists the treasury's transactions waiting in the mempool.
func treasuryTxs(t *testing.T, sent *[][]byte, sender stacks.Address) []*stacks.Transaction {
	t.Helper()
	var out []*stacks.Transaction
	for _, raw := range *sent {
		tx, err := stacks.DecodeTransaction(raw)
		if err != nil {
			t.Fatal(err)
		}
		if tx.SenderAddress() == sender {
			out = append(out, tx)
		}
	}
	return out
}

// recordingBroadcast keeps every raw tx broadcast through it.
type recordingBroadcast struct {
	NodeClient
	mu   sync.Mutex
	raws [][]byte
}

func (r *recordingBroadcast) Broadcast(ctx context.Context, raw []byte) (string, error) {
	r.mu.Lock()
	r.raws = append(r.raws, bytes.Clone(raw))
	r.mu.Unlock()
	return r.NodeClient.Broadcast(ctx, raw)
}

// from returns the recorded txs whose sender is addr.
func (r *recordingBroadcast) from(t *testing.T, addr stacks.Address) []*stacks.Transaction {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	return treasuryTxs(t, &r.raws, addr)
}

// drain drips from the faucet until key i's available balance is below
// the refill threshold.
func (e *env) drain(i int) {
	e.t.Helper()
	for e.f.Keys()[i].Available >= tRefillBelow {
		if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(e.t)}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// A distributor drained below the threshold is refilled from the treasury
// at the next block; the refill is logged in the history, drips go on, and
// the treasury never pays a drip.
func TestTreasuryRefillsDrainedKey(t *testing.T) {
	hist := &recordingHistory{}
	const funding = 25_000_000
	e := newTreasuryEnv(t, 1, funding, 10_000_000_000, devnode.Config{}, Config{State: State{History: hist}})
	rb := &recordingBroadcast{NodeClient: e.f.cfg.Node}
	e.f.setNode(rb)
	ctx := context.Background()
	dist := e.keys[0].TestnetAddress()
	tAddr := e.f.cfg.Refills.Treasury.TestnetAddress()
	if s := e.treasury(); s.Address != tAddr.String() || s.RefillBelow != tRefillBelow || s.RefillAmount != tRefillAmt || !s.Owned || !s.Synced {
		t.Fatalf("treasury status %+v", s)
	}
	if n := len(rb.from(t, tAddr)); n != 0 {
		t.Fatalf("%d refills of a funded key", n)
	}
	e.drain(0)
	if n := len(rb.from(t, tAddr)); n != 0 {
		t.Fatalf("refill before the next block: %d", n)
	}
	e.mine() // the drips confirm; the poll sees the key low and refills it
	refills := rb.from(t, tAddr)
	if len(refills) != 1 {
		t.Fatalf("%d refills after the block, want 1", len(refills))
	}
	tx := refills[0]
	if tx.Payload.Recipient.Address != dist || tx.Payload.Amount != tRefillAmt || tx.Payload.Memo.String() != RefillMemo {
		t.Fatalf("refill tx %+v", tx.Payload)
	}
	if s := e.treasury(); s.InFlightRefills != 1 || s.RefillsSent != 1 || s.RefillsFailed != 0 {
		t.Fatalf("treasury after sending %+v", s)
	}
	if p, ok := e.f.PendingByTxID(tx.TxID().String()); !ok || p.Sender != tAddr {
		t.Fatalf("refill not findable by txid: %+v %v", p, ok)
	}
	before, _ := e.dn.Account(dist)
	e.mine()
	if after, _ := e.dn.Account(dist); after != before+tRefillAmt {
		t.Fatalf("distributor %d → %d, want +%d", before, after, tRefillAmt)
	}
	if s := e.treasury(); s.InFlightRefills != 0 || s.InFlight != 0 || s.ConfirmedNonce != 1 || s.Balance != 10_000_000_000-tRefillAmt-tx.Auth.Fee {
		t.Fatalf("treasury after confirmation %+v", s)
	}
	if st := e.f.Keys()[0]; st.Available < tRefillBelow {
		t.Fatalf("key still low after the refill: %+v", st)
	}
	// Drips go on, never from the treasury.
	for range 20 {
		res, err := e.f.Drip(ctx, Request{Recipient: recipient(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sender != dist {
			t.Fatalf("drip sent by %s", res.Sender)
		}
	}
	e.mine()
	if n := len(rb.from(t, tAddr)); n != 1 {
		t.Fatalf("%d refills of a key well above the threshold", n)
	}
	hist.mu.Lock()
	defer hist.mu.Unlock()
	i := slices.IndexFunc(hist.recs, func(d DripRecord) bool { return d.Outcome == OutcomeRefill })
	if i < 0 {
		t.Fatalf("no refill in the history: %+v", hist.recs)
	}
	r := hist.recs[i]
	if r.Sender != tAddr.String() || r.Recipient != dist.String() || r.Amount != tRefillAmt || r.TxID != tx.TxID().String() || r.Nonce != 0 || r.Fee != tx.Auth.Fee {
		t.Fatalf("refill record %+v", r)
	}
}

// armedAccount mines a block right after the next read of one address: a
// block that lands between the treasury's read and the distributors'.
type armedAccount struct {
	NodeClient
	dn    *devnode.Node
	mu    sync.Mutex
	armed stacks.Address
}

func (a *armedAccount) Account(ctx context.Context, p string) (*node.Account, error) {
	acct, err := a.NodeClient.Account(ctx, p)
	a.mu.Lock()
	fire := a.armed != (stacks.Address{}) && a.armed.String() == p
	if fire {
		a.armed = stacks.Address{}
	}
	a.mu.Unlock()
	if fire {
		a.dn.Mine()
	}
	return acct, err
}

// Never two refills in flight to one key: not across many polls before a
// block, not with the engine's own loop polling, and not when the block
// that confirms the refill lands in the middle of a poll.
func TestRefillNeverTwiceInFlight(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	e := newTreasuryEnv(t, 2, 25_000_000, 10_000_000_000, devnode.Config{}, Config{Clock: clk, Timing: Timing{PollInterval: time.Millisecond}})
	aa := &armedAccount{NodeClient: e.f.cfg.Node, dn: e.dn}
	rb := &recordingBroadcast{NodeClient: aa}
	e.f.setNode(rb)
	tAddr := e.f.cfg.Refills.Treasury.TestnetAddress()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	e.drain(0)
	e.drain(1)
	e.mine()
	for range 50 {
		if err := e.f.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Millisecond) // the loop polls too, meanwhile
	}
	for range 20 { // and on its own
		waitTimer(t, clk)
		clk.Step(time.Millisecond)
	}
	refills := rb.from(t, tAddr)
	if len(refills) != 2 || refills[0].Payload.Recipient == refills[1].Payload.Recipient {
		t.Fatalf("refills before the block: %d, want one per key", len(refills))
	}
	if s := e.treasury(); s.InFlightRefills != 2 || s.RefillsSent != 2 {
		t.Fatalf("treasury %+v", s)
	}
	// The block confirming the refills lands in the middle of a poll, right
	// after key 0's account read: the poll must not see "refill done" for
	// the treasury and "still low" for key 0.
	aa.mu.Lock()
	aa.armed = e.keys[0].TestnetAddress()
	aa.mu.Unlock()
	for range 20 {
		if err := e.f.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	e.mine()
	for range 20 {
		if err := e.f.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(rb.from(t, tAddr)); n != 2 {
		t.Fatalf("%d refills in all, want 2", n)
	}
	for _, k := range e.keys {
		b, _ := e.dn.Account(k.TestnetAddress())
		if b < tRefillAmt || b > tRefillAmt+25_000_000 {
			t.Errorf("key %s holds %d: refilled %s", k.TestnetAddress(), b, "other than once")
		}
	}
}

// A restart between recording a refill (state broadcasting) and the node's
// answer: the new engine rebroadcasts the same bytes and sends no second
// refill, whether or not the node got the first request.
func TestRefillResumedAfterRestart(t *testing.T) {
	for _, reached := range []bool{false, true} {
		name := "never-sent"
		if reached {
			name = "node-has-it"
		}
		t.Run(name, func(t *testing.T) {
			ledger := journal.NewMemoryStore()
			e := newTreasuryEnv(t, 1, 25_000_000, 10_000_000_000, devnode.Config{}, Config{State: State{Journal: ledger}})
			tAddr := e.f.cfg.Refills.Treasury.TestnetAddress()
			dist := e.keys[0].TestnetAddress()
			e.drain(0)
			e.dn.Mine()
			ctx, cancel := context.WithCancel(context.Background())
			var recorded PendingTx
			e.f.treasury.onRecorded = func(p PendingTx) {
				recorded = p
				if reached {
					if _, err := e.dn.Submit(p.Raw); err != nil {
						t.Error(err)
					}
				}
				cancel() // the process dies before the node answers
			}
			_ = e.f.Sync(ctx)
			if recorded.Raw == nil {
				t.Fatal("no refill recorded")
			}
			rows := listPending(t, ledger, tAddr)
			if len(rows) != 1 || rows[0].State != TxBroadcasting || !bytes.Equal(rows[0].Raw, recorded.Raw) {
				t.Fatalf("ledger after the crash: %+v", rows)
			}

			cfg := e.f.cfg
			rb := &recordingBroadcast{NodeClient: cfg.Node}
			f2, err := New(Config{
				Keys: cfg.Keys, Node: rb,
				Amounts: Amounts{Default: tDrip}, Fees: Fees{Max: 1000},
				Refills: Refills{Treasury: cfg.Refills.Treasury},
				State:   State{Journal: ledger, History: cfg.State.History},
			})
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				if err := f2.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			sent := rb.from(t, tAddr)
			if len(sent) != 1 || !bytes.Equal(sent[0].Serialize(), recorded.Raw) {
				t.Fatalf("after restart the treasury broadcast %d txs; want exactly the recorded bytes once", len(sent))
			}
			if s, _ := f2.Treasury(); s.InFlightRefills != 1 || s.RefillsSent != 0 {
				t.Fatalf("restarted treasury %+v", s)
			}
			rows = listPending(t, ledger, tAddr)
			if len(rows) != 1 || rows[0].State != TxPending {
				t.Fatalf("ledger after resolution: %+v", rows)
			}
			before, _ := e.dn.Account(dist)
			e.dn.Mine()
			for range 3 {
				if err := f2.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				e.dn.Mine()
			}
			if after, _ := e.dn.Account(dist); after != before+tRefillAmt {
				t.Fatalf("distributor %d → %d, want exactly one refill of %d", before, after, tRefillAmt)
			}
			if n := len(rb.from(t, tAddr)); n != 1 {
				t.Fatalf("%d treasury broadcasts, want 1", n)
			}
		})
	}
}

// countingHandler counts log records by message.
type countingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Level >= slog.LevelWarn {
		h.msgs = append(h.msgs, r.Message)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

// A treasury short of a refill is marked dry: no refill attempts while it
// stays so, at most one warning per block, drips go on from the
// distributors, and refills resume once it is funded.
func TestDryTreasury(t *testing.T) {
	logs := &countingHandler{}
	e := newTreasuryEnv(t, 1, 25_000_000, tRefillAmt/2, devnode.Config{}, Config{Logger: slog.New(logs)})
	rb := &recordingBroadcast{NodeClient: e.f.cfg.Node}
	e.f.setNode(rb)
	tAddr := e.f.cfg.Refills.Treasury.TestnetAddress()
	e.drain(0)
	e.mine()
	if s := e.treasury(); !s.Dry || s.RefillsFailed != 1 || s.RefillsSent != 0 {
		t.Fatalf("short treasury %+v", s)
	}
	for range 20 { // polls within one block
		if err := e.f.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.count("treasury"); n != 1 {
		t.Fatalf("%d treasury warnings within one block, want 1", n)
	}
	for range 3 {
		e.mine()
		if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
			t.Fatalf("drip with a dry treasury: %v", err)
		}
	}
	if n := logs.count("treasury"); n > 4 {
		t.Fatalf("%d treasury warnings over 4 blocks", n)
	}
	if s := e.treasury(); !s.Dry || s.RefillsFailed != 1 {
		t.Fatalf("dry treasury retried: %+v", s)
	}
	if n := len(rb.from(t, tAddr)); n != 0 {
		t.Fatalf("a dry treasury broadcast %d txs", n)
	}
	// Funded again: the next block refills the key.
	e.dn.Fund(tAddr, 10*tRefillAmt)
	e.mine()
	if s := e.treasury(); s.Dry || s.RefillsSent != 1 {
		t.Fatalf("funded treasury %+v", s)
	}
	if n := len(rb.from(t, tAddr)); n != 1 {
		t.Fatalf("%d refills after funding, want 1", n)
	}
}

// The node saying NotEnoughFunds (the engine's view of the treasury is
// wrong) marks it dry too; the same balance does not bring it back.
func TestTreasuryNotEnoughFundsFromNode(t *testing.T) {
	e := newTreasuryEnv(t, 1, 25_000_000, 10_000_000_000, devnode.Config{}, Config{})
	tAddr := e.f.cfg.Refills.Treasury.TestnetAddress()
	e.drain(0)
	sb := &scriptedBroadcast{NodeClient: e.f.cfg.Node, script: []func(context.Context, []byte) (string, error){
		func(context.Context, []byte) (string, error) {
			return "", &node.RejectionError{Reason: node.ReasonNotEnoughFunds}
		},
	}}
	rb := &recordingBroadcast{NodeClient: sb}
	e.f.setNode(rb)
	e.mine()
	if s := e.treasury(); !s.Dry || s.RefillsFailed != 1 || s.InFlight != 0 {
		t.Fatalf("treasury after NotEnoughFunds %+v", s)
	}
	rows := listPending(t, e.f.cfg.State.Journal, tAddr)
	if len(rows) != 0 {
		t.Fatalf("refused refill left in the ledger: %+v", rows)
	}
	for range 3 {
		e.mine()
	}
	if n := len(rb.from(t, tAddr)); n != 1 {
		t.Fatalf("%d refill attempts, want the one refused", n)
	}
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatal(err)
	}
	e.dn.Fund(tAddr, tRefillAmt)
	e.mine()
	if s := e.treasury(); s.Dry || s.RefillsSent != 1 {
		t.Fatalf("funded treasury %+v", s)
	}
}

func TestTreasuryConfigErrors(t *testing.T) {
	k, _ := stacks.GeneratePrivateKey()
	other, _ := stacks.GeneratePrivateKey()
	same, err := stacks.ParsePrivateKey(k.Hex())
	if err != nil {
		t.Fatal(err)
	}
	nc := &recordingBroadcast{}
	for name, c := range map[string]Config{
		"treasury is a distributor": {Keys: []*stacks.PrivateKey{other, k}, Refills: Refills{Treasury: same}},
		"refill below threshold":    {Keys: []*stacks.PrivateKey{other}, Refills: Refills{Treasury: k, Below: 100, Amount: 99}},
		"refill without treasury":   {Keys: []*stacks.PrivateKey{other}, Refills: Refills{Below: 100}},
	} {
		c.Node = nc
		if _, err := New(c); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	f, err := New(Config{Keys: []*stacks.PrivateKey{other}, Node: nc, Refills: Refills{Treasury: k}})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := f.Treasury()
	wantBelow := 20 * (DefaultAmount + DefaultFeeFallback)
	if !ok || s.RefillBelow != wantBelow || s.RefillAmount != 10*wantBelow {
		t.Fatalf("defaults %+v", s)
	}
	if slices.Contains(f.Addresses(), k.TestnetAddress().String()) {
		t.Fatal("the treasury is listed as a sending address")
	}
	if _, ok := (&Faucet{}).Treasury(); ok {
		t.Fatal("Treasury reported without one")
	}
}

// With a shared store the treasury is a key of its own: only the replica
// that holds it sends refills, to every distributor (also those another replica
// owns), and a replica taking it over resumes its in-flight refills rather
// than sending new ones.
func TestTreasuryOwnedByOneReplica(t *testing.T) {
	ledger := journal.NewMemoryStore()
	e := newTreasuryEnv(t, 2, 10_000_000, 10_000_000_000, devnode.Config{}, Config{State: State{Shared: true, Journal: ledger}})
	cfg := e.f.cfg
	tAddr := cfg.Refills.Treasury.TestnetAddress()
	k0, k1 := e.keys[0].TestnetAddress(), e.keys[1].TestnetAddress()

	// The owner is asked for the treasury beside the distributors.
	if keys := e.f.JournalKeys(); len(keys) != 3 || !slices.Contains(keys, tAddr.String()) ||
		!slices.Contains(keys, k0.String()) || !slices.Contains(keys, k1.String()) {
		t.Fatalf("the engine's keys are %v", keys)
	}

	// Replica A holds the treasury and key 0, replica B key 1; both keys
	// are below the threshold from genesis.
	a, b := e.f, mustNew(t, Config{
		Keys: cfg.Keys, Node: cfg.Node,
		Amounts: Amounts{Default: tDrip}, Fees: Fees{Max: 1000},
		Refills: Refills{Treasury: cfg.Refills.Treasury},
		State:   State{Journal: ledger, Shared: true},
	})
	bg := context.Background()
	a.Acquired(bg, tAddr.String())
	a.Acquired(bg, k0.String())
	b.Acquired(bg, k1.String())
	for range 10 {
		if err := b.Sync(bg); err != nil {
			t.Fatal(err)
		}
		if err := a.Sync(bg); err != nil {
			t.Fatal(err)
		}
	}
	sa, _ := a.Treasury()
	sb, _ := b.Treasury()
	if sa.RefillsSent != 2 || sa.InFlightRefills != 2 || !sa.Owned {
		t.Fatalf("treasury owner %+v", sa)
	}
	if sb.RefillsSent != 0 || sb.Owned {
		t.Fatalf("other replica %+v", sb)
	}
	if n := e.dn.MempoolSize(); n != 2 {
		t.Fatalf("mempool %d, want the 2 refills", n)
	}
	// Hand the treasury over before the refills confirm: B resumes them.
	a.Releasing(bg, tAddr.String())
	b.Acquired(bg, tAddr.String())
	for range 5 {
		if err := b.Sync(bg); err != nil {
			t.Fatal(err)
		}
		if err := a.Sync(bg); err != nil {
			t.Fatal(err)
		}
	}
	if sb, _ := b.Treasury(); sb.RefillsSent != 0 || sb.InFlightRefills != 2 {
		t.Fatalf("new treasury owner %+v", sb)
	}
	e.dn.Mine()
	for range 3 {
		_ = a.Sync(bg)
		_ = b.Sync(bg)
		e.dn.Mine()
	}
	for _, k := range []stacks.Address{k0, k1} {
		if bal, _ := e.dn.Account(k); bal != 10_000_000+tRefillAmt {
			t.Errorf("key %s holds %d, want one refill", k, bal)
		}
	}
	if sb, _ := b.Treasury(); sb.RefillsSent != 0 || sb.InFlight != 0 || sb.ConfirmedNonce != 2 {
		t.Fatalf("treasury after the blocks %+v", sb)
	}
}

func mustNew(t *testing.T, c Config) *Faucet {
	t.Helper()
	f, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// racingPoll stages a second poll inside the first: right after the first
// poll's read of one distributor's account, the block confirming the
// refills lands and a second poll reads the treasury, seeing them
// confirmed, while the first goes on with its older reading. The second
// poll's own reads of that distributor wait until the first poll is done.
type racingPoll struct {
	NodeClient
	f       *Faucet
	dn      *devnode.Node
	watch   stacks.Address
	fired   atomic.Bool
	release chan struct{}
	second  chan error
}

type secondPollKey struct{}

func (r *racingPoll) Account(ctx context.Context, p string) (*node.Account, error) {
	acct, err := r.NodeClient.Account(ctx, p)
	if p != r.watch.String() {
		return acct, err
	}
	if ctx.Value(secondPollKey{}) != nil {
		<-r.release
		return acct, err
	}
	if !r.fired.CompareAndSwap(false, true) {
		return acct, err
	}
	r.dn.Mine()
	go func() { r.second <- r.f.Sync(context.WithValue(ctx, secondPollKey{}, true)) }()
	// On until the second poll has applied its treasury read.
	for deadline := time.Now().Add(5 * time.Second); r.f.pool.refillInFlight(r.watch, AssetSTX); {
		if time.Now().After(deadline) {
			return nil, errors.New("the second poll never read the treasury")
		}
		time.Sleep(time.Millisecond)
	}
	return acct, err
}

// Two polls at once (the loop and Sync; or any treasury read newer than a
// distributor's, like a resync after BadNonce): the poll holding a
// distributor reading from before the block that confirmed its refill must
// not refill it again, whether this replica owns the distributor or reads
// it from the node.
func TestRefillRacingPolls(t *testing.T) {
	for _, owned := range []bool{true, false} {
		name := "owned"
		if !owned {
			name = "other-replica"
		}
		t.Run(name, func(t *testing.T) {
			const funding = 10_000_000 // below the threshold from genesis
			var fcfg Config
			if !owned {
				fcfg.State.Shared = true
			}
			e := newTreasuryEnv(t, 2, funding, 10_000_000_000, devnode.Config{}, fcfg)
			tAddr := e.f.cfg.Refills.Treasury.TestnetAddress()
			bg := context.Background()
			if !owned {
				e.f.Acquired(bg, tAddr.String()) // the distributors are another replica's
			}
			if err := e.f.Sync(bg); err != nil {
				t.Fatal(err)
			}
			if s := e.treasury(); s.RefillsSent != 2 || s.InFlightRefills != 2 {
				t.Fatalf("treasury %+v", s)
			}
			rp := &racingPoll{NodeClient: e.f.cfg.Node, f: e.f, dn: e.dn, watch: e.keys[0].TestnetAddress(),
				release: make(chan struct{}), second: make(chan error, 1)}
			rb := &recordingBroadcast{NodeClient: rp}
			e.f.setNode(rb)
			err := e.f.Sync(bg)
			close(rp.release)
			if rp.fired.Load() {
				if err2 := <-rp.second; err == nil {
					err = err2
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := len(rb.from(t, tAddr)); n != 0 {
				t.Fatalf("%d more refills after the block that confirmed them", n)
			}
			e.mine()
			for _, k := range e.keys {
				if b, _ := e.dn.Account(k.TestnetAddress()); b != funding+tRefillAmt {
					t.Errorf("key %s holds %d, want one refill", k.TestnetAddress(), b)
				}
			}
		})
	}
}
