package faucet

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// batchDevnode is a devnode with send-many-memo deployed at its testnet id.
func batchDevnode() devnode.Config {
	return devnode.Config{SendManyContract: stacks.SendManyMemoTestnet}
}

type dripOutcome struct {
	to  stacks.Principal
	res *Result
	err error
}

// dripAll sends one default drip to each recipient, all at once.
func dripAll(f *Faucet, to []stacks.Principal) []dripOutcome {
	out := make([]dripOutcome, len(to))
	var wg sync.WaitGroup
	for i, r := range to {
		wg.Go(func() {
			res, err := f.Drip(context.Background(), Request{Recipient: r})
			out[i] = dripOutcome{r, res, err}
		})
	}
	wg.Wait()
	return out
}

func recipients(t testing.TB, n int) []stacks.Principal {
	out := make([]stacks.Principal, n)
	for i := range out {
		out[i] = recipient(t)
	}
	return out
}

// byTx groups successful outcomes by txid.
func byTx(t *testing.T, outs []dripOutcome) map[stacks.TxID][]dripOutcome {
	t.Helper()
	m := map[stacks.TxID][]dripOutcome{}
	for _, o := range outs {
		if o.err != nil {
			t.Fatalf("drip to %s: %v", o.to, o.err)
		}
		m[o.res.TxID] = append(m[o.res.TxID], o)
	}
	return m
}

// Concurrent default drips share send-many calls: every recipient is paid
// exactly once, each call carries a post-condition on its exact total, the
// fee shares add up to the fee, and the key pays amounts plus fees, nothing
// else.
func TestBatchPaysEveryRecipientExactly(t *testing.T) {
	const funding = 1_000_000_000_000
	e := newEnv(t, 1, funding, batchDevnode(), Config{Batching: Batching{Max: 50, Window: 100 * time.Millisecond}})
	to := recipients(t, 120)
	groups := byTx(t, dripAll(e.f, to))
	if len(groups) > 6 {
		t.Errorf("120 drips took %d transactions; batching should need about 3", len(groups))
	}
	if e.dn.MempoolSize() != len(groups) {
		t.Fatalf("mempool holds %d txs, want %d", e.dn.MempoolSize(), len(groups))
	}
	var fees uint64
	for txid, g := range groups {
		res := g[0].res
		tx, err := stacks.DecodeTransaction(res.TxRaw)
		if err != nil || tx.TxID() != txid {
			t.Fatalf("decode %s: %v", txid, err)
		}
		if len(g) > 50 {
			t.Errorf("%d recipients in one batch, max 50", len(g))
		}
		for _, o := range g {
			if o.res.TxRawHex() != hex.EncodeToString(res.TxRaw) {
				t.Fatalf("a drip of %s answers with other bytes in hex", txid)
			}
		}
		if len(g) == 1 && res.Batch == 0 {
			if tx.ContractCall != nil {
				t.Errorf("a single drip sent as a contract call")
			}
			fees += res.Fee
			continue
		}
		cc := tx.ContractCall
		if cc == nil || cc.Contract.String() != stacks.SendManyMemoTestnet || cc.Function != stacks.SendManyFunction {
			t.Fatalf("batch tx is not a send-many call: %+v", cc)
		}
		total := DefaultAmount * uint64(len(g))
		sender := stacks.Principal{Address: e.keys[0].TestnetAddress()}
		if len(tx.PostConditions) != 1 || tx.PostConditions[0] != stacks.PrincipalSendsExactly(sender, total) ||
			tx.PostConditionMode != stacks.PostConditionModeDeny {
			t.Errorf("post-conditions %+v mode %d, want the sender sends exactly %d, deny", tx.PostConditions, tx.PostConditionMode, total)
		}
		if p, ok := e.f.PendingByTxID(txid.String()); !ok || p.BatchSize() != len(g) || p.Amount != DefaultAmount*uint64(len(g)) {
			t.Errorf("in-flight entry of %s: %+v (batch size %d), want %d recipients", txid, ok, p.BatchSize(), len(g))
		} else if !p.Pays(g[len(g)-1].to.String(), DefaultAmount) || p.Pays(g[0].to.String(), DefaultAmount+1) || p.Pays(recipient(t).String(), DefaultAmount) {
			t.Errorf("Pays of %s disagrees with its recipients", txid)
		}
		var shares uint64
		for _, o := range g {
			if o.res.Batch != len(g) || o.res.Amount != DefaultAmount || o.res.Nonce != res.Nonce {
				t.Errorf("result %+v in a batch of %d", o.res, len(g))
			}
			shares += o.res.Fee
		}
		if shares != tx.Auth.Fee {
			t.Errorf("fee shares add up to %d, the tx pays %d", shares, tx.Auth.Fee)
		}
		if tx.Auth.Fee < uint64(tx.EncodedLen()) {
			t.Errorf("fee %d below the tx length %d", tx.Auth.Fee, tx.EncodedLen())
		}
		fees += tx.Auth.Fee
	}
	e.mine()
	for _, r := range to {
		if bal, _ := e.dn.PrincipalAccount(r); bal != DefaultAmount {
			t.Errorf("%s has %d µSTX, want %d", r, bal, DefaultAmount)
		}
	}
	bal, nonce := e.dn.Account(e.keys[0].TestnetAddress())
	if want := funding - 120*DefaultAmount - fees; bal != want || nonce != uint64(len(groups)) {
		t.Errorf("faucet key: balance %d nonce %d, want %d and %d", bal, nonce, want, len(groups))
	}
	for txid := range groups {
		if e.dn.TxAborted(txid) {
			r, _ := e.dn.TxResult(txid)
			t.Errorf("batch %s aborted: %s", txid, r)
		}
	}
	if st := e.f.BatchStats(); st.Txs == 0 || st.Drips < 100 {
		t.Errorf("batch stats %+v", st)
	}
}

// The batch fee is the node's estimate for the real payload (the middle
// one), clamped to the configured range.
func TestBatchFeeFollowsTheNodeEstimate(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 10, Window: time.Hour}})
	e.dn.SetFeeRate(3)
	outs := dripAll(e.f, recipients(t, 10)) // a full batch leaves without waiting for the window
	groups := byTx(t, outs)
	if len(groups) != 1 {
		t.Fatalf("%d txs, want one full batch", len(groups))
	}
	tx, err := stacks.DecodeTransaction(outs[0].res.TxRaw)
	if err != nil {
		t.Fatal(err)
	}
	est, err := e.f.cfg.Node.TransactionFeeEstimate(context.Background(), tx.PayloadBytes(), uint64(tx.EncodedLen()))
	if err != nil {
		t.Fatal(err)
	}
	if tx.Auth.Fee != est.Middle() {
		t.Errorf("fee %d, the node's middle estimate is %d", tx.Auth.Fee, est.Middle())
	}

	// Clamped: FeeMax, scaled from a transfer's length to the batch's,
	// wins over the estimate; the length (the node's minimum) over both.
	unit := transferLen(stacks.Principal{})
	for _, feeMax := range []uint64{200, 100} {
		e2 := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Fees: Fees{Min: 1, Max: feeMax}, Batching: Batching{Max: 10, Window: time.Hour}})
		outs = dripAll(e2.f, recipients(t, 10))
		byTx(t, outs)
		tx, _ = stacks.DecodeTransaction(outs[0].res.TxRaw)
		length := uint64(tx.EncodedLen())
		scaled := (feeMax*length + unit - 1) / unit
		if want := max(scaled, length); tx.Auth.Fee != want {
			t.Errorf("FeeMax %d: fee %d for %d bytes, want %d", feeMax, tx.Auth.Fee, length, want)
		}
	}
}

// Stacking drips and drips to a faucet key never join a batch.
func TestBatchOnlyDefaultDrips(t *testing.T) {
	e := newEnv(t, 2, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 10, Window: 20 * time.Millisecond}})
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t), Stacking: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Batch != 0 || !res.Stacking {
		t.Errorf("stacking drip %+v joined a batch", res)
	}
	res, err = e.f.Drip(context.Background(), Request{Recipient: stacks.Principal{Address: e.keys[1].TestnetAddress()}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Batch != 0 || res.Sender != e.keys[0].TestnetAddress() {
		t.Errorf("drip to a faucet key: %+v", res)
	}
}

// rejectRecipient refuses every send-many call that pays bad, the way a
// node refuses a call whose argument it cannot accept.
type rejectRecipient struct {
	NodeClient
	bad   stacks.Principal
	mu    sync.Mutex
	sizes []int // recipients of each broadcast call
}

func (r *rejectRecipient) Broadcast(ctx context.Context, raw []byte) (string, error) {
	tx, err := stacks.DecodeTransaction(raw)
	if err != nil {
		return "", err
	}
	n := 1
	pays := tx.Payload.Recipient == r.bad
	if tx.ContractCall != nil {
		list := tx.ContractCall.Args[0].(stacks.List)
		n = len(list)
		for _, v := range list {
			if v.(stacks.Tuple)[1].Value == r.bad {
				pays = true
			}
		}
	}
	r.mu.Lock()
	r.sizes = append(r.sizes, n)
	r.mu.Unlock()
	if pays {
		return "", &node.RejectionError{Reason: node.ReasonBadFunctionArgument, TxID: tx.TxID().String(), Message: "transaction rejected"}
	}
	return r.NodeClient.Broadcast(ctx, raw)
}

// A batch the node refuses is retried in halves until the one recipient it
// refuses is alone: the others are paid, only that drip fails.
func TestRefusedBatchIsSplit(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 16, Window: time.Hour}})
	to := recipients(t, 16)
	rr := &rejectRecipient{NodeClient: e.f.cfg.Node, bad: to[5]}
	e.f.setNode(rr)
	outs := dripAll(e.f, to)
	failed := 0
	for _, o := range outs {
		if o.err == nil {
			continue
		}
		failed++
		if o.to != rr.bad || ReasonOf(o.err) != ReasonRejected {
			t.Errorf("drip to %s failed: %v", o.to, o.err)
		}
	}
	if failed != 1 {
		t.Fatalf("%d drips failed, want only the refused recipient's", failed)
	}
	if len(rr.sizes) > 2*5+1 || slices.Max(rr.sizes) != 16 {
		t.Errorf("broadcast sizes %v: want 16, then halves", rr.sizes)
	}
	e.mine()
	for _, r := range to {
		want := DefaultAmount
		if r == rr.bad {
			want = 0
		}
		if bal, _ := e.dn.PrincipalAccount(r); bal != want {
			t.Errorf("%s has %d, want %d", r, bal, want)
		}
	}
	if st := e.f.BatchStats(); st.Splits == 0 {
		t.Errorf("no split counted: %+v", st)
	}
}

// Without the contract on the node (NoSuchContract), every drip of the batch
// is still paid, as a plain transfer, and batching pauses.
func TestMissingContractFallsBackToTransfers(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, devnode.Config{}, Config{Batching: Batching{Max: 8, Window: time.Hour}})
	to := recipients(t, 8)
	groups := byTx(t, dripAll(e.f, to))
	if len(groups) != 8 {
		t.Fatalf("%d txs for 8 drips, want 8 transfers", len(groups))
	}
	if st := e.f.BatchStats(); st.Fallbacks != 8 || st.Txs != 0 {
		t.Errorf("stats %+v", st)
	}
	// Paused: the next drip goes straight to a transfer.
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err != nil || res.Batch != 0 {
		t.Fatalf("drip while paused: %+v %v", res, err)
	}
	e.mine()
	for _, r := range to {
		if bal, _ := e.dn.PrincipalAccount(r); bal != DefaultAmount {
			t.Errorf("%s has %d", r, bal)
		}
	}
}

// countingEstimates counts fee estimates: one per send-many attempt while
// the estimate cache is off (CacheTTL of a nanosecond).
type countingEstimates struct {
	NodeClient
	mu sync.Mutex
	n  int
}

func (c *countingEstimates) TransactionFeeEstimate(ctx context.Context, payload []byte, n uint64) (*node.FeeEstimate, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.NodeClient.TransactionFeeEstimate(ctx, payload, n)
}

// A batch the key cannot afford is split at what the key can pay; the
// drips beyond the funds fail as exhausted at once (no split cascade) and
// nothing is overspent.
func TestUnaffordableBatchIsSplit(t *testing.T) {
	const funding = 10*DefaultAmount + 100_000
	e := newEnv(t, 1, funding, batchDevnode(), Config{Batching: Batching{Max: 16, Window: time.Hour}, Timing: Timing{CacheTTL: time.Nanosecond}})
	ce := &countingEstimates{NodeClient: e.f.cfg.Node}
	e.f.setNode(ce)
	outs := dripAll(e.f, recipients(t, 16))
	if ce.n > 3 {
		t.Errorf("%d send-many attempts for one unaffordable batch, want 3 (16, the 10 it can pay, the 6 left)", ce.n)
	}
	paid := 0
	for _, o := range outs {
		switch {
		case o.err == nil:
			paid++
		case ReasonOf(o.err) != ReasonExhausted:
			t.Errorf("drip failed with %v, want exhausted", o.err)
		}
	}
	if paid != 10 {
		t.Errorf("%d of 16 drips paid with funds for 10", paid)
	}
	e.mine()
	got := 0
	for _, o := range outs {
		bal, _ := e.dn.PrincipalAccount(o.to)
		if (bal == DefaultAmount) != (o.err == nil) {
			t.Errorf("%s: balance %d, drip error %v", o.to, bal, o.err)
		}
		if bal == DefaultAmount {
			got++
		}
	}
	if got != paid {
		t.Errorf("%d paid on chain, %d answered", got, paid)
	}
}

// A request cancelled while its batch is still gathering leaves it: it is
// never paid, and the others are.
func TestCancelledDripLeavesTheBatch(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 3, Window: time.Hour}})
	quitter := recipient(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.f.Drip(ctx, Request{Recipient: quitter})
		done <- err
	}()
	waitQueued(t, e.f, 1)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled drip succeeded")
	}
	to := recipients(t, 3)
	byTx(t, dripAll(e.f, to))
	e.mine()
	if bal, _ := e.dn.PrincipalAccount(quitter); bal != 0 {
		t.Errorf("cancelled recipient was paid %d", bal)
	}
	for _, r := range to {
		if bal, _ := e.dn.PrincipalAccount(r); bal != DefaultAmount {
			t.Errorf("%s has %d", r, bal)
		}
	}
}

// waitTimer waits until the engine's timers on clk are set again (a
// batch's window, the adaptive batcher's next look).
func waitTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	eventually.True(t, 5*time.Second, "the engine sets its timer", clk.HasWaiters)
}

// endWindow steps clk past the open batch's window once it is set.
func endWindow(t *testing.T, clk *clocktesting.FakeClock, window time.Duration) {
	t.Helper()
	waitTimer(t, clk)
	clk.Step(window)
}

// dripStepping drips to to, stepping clk whenever the engine waits on it
// (a batcher pacing its slots), and returns the outcome.
func dripStepping(t *testing.T, f *Faucet, clk *clocktesting.FakeClock, to stacks.Principal) dripOutcome {
	t.Helper()
	done := make(chan dripOutcome, 1)
	go func() {
		res, err := f.Drip(context.Background(), Request{Recipient: to})
		done <- dripOutcome{to, res, err}
	}()
	var out dripOutcome
	eventually.True(t, 10*time.Second, "the drip is answered", func() bool {
		select {
		case out = <-done:
			return true
		default:
		}
		if clk.HasWaiters() {
			clk.Step(250 * time.Millisecond)
		}
		return false
	})
	return out
}

func waitQueued(t *testing.T, f *Faucet, n int) {
	t.Helper()
	eventually.True(t, time.Second, fmt.Sprintf("batch queue reaches %d", n), func() bool {
		f.batch.mu.Lock()
		defer f.batch.mu.Unlock()
		return len(f.batch.queue) == n
	})
}

// A stuck batch is replaced by the same send-many call at a higher fee:
// every recipient is still paid once.
func TestStuckBatchFeeBump(t *testing.T) {
	const stuck = 2
	const funding = 1_000_000_000_000
	e := newEnv(t, 1, funding, batchDevnode(), Config{Batching: Batching{Max: 4, Window: time.Hour}, Timing: Timing{StuckBlocks: stuck}})
	e.dn.SetDropRate(1)
	to := recipients(t, 4)
	groups := byTx(t, dripAll(e.f, to))
	if len(groups) != 1 {
		t.Fatalf("%d txs", len(groups))
	}
	var first stacks.TxID
	var fee uint64
	for id, g := range groups {
		first = id
		tx, _ := stacks.DecodeTransaction(g[0].res.TxRaw)
		fee = tx.Auth.Fee
	}
	for range stuck {
		e.mine() // the rebroadcast is dropped as well
	}
	e.dn.SetDropRate(0)
	for range stuck + 1 {
		e.mine()
	}
	for _, r := range to {
		if bal, _ := e.dn.PrincipalAccount(r); bal != DefaultAmount {
			t.Errorf("%s has %d after the fee bump", r, bal)
		}
	}
	bal, nonce := e.dn.Account(e.keys[0].TestnetAddress())
	if paid := funding - 4*DefaultAmount - bal; nonce != 1 || paid <= fee {
		t.Errorf("nonce %d, fee paid %d, want a replacement above %d", nonce, paid, fee)
	}
	if next, ok := e.f.ReplacementOf(first.String()); !ok || next == first.String() {
		t.Errorf("replacement of %s not recorded", first)
	}
}

// The shared txid answers every request of the batch; a batch in doubt
// (lost answer) is answered as in doubt and delivered.
func TestBatchInDoubtIsDelivered(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 5, Window: time.Hour}})
	e.f.setNode(lostAnswer(e.f.cfg.Node))
	to := recipients(t, 5)
	outs := dripAll(e.f, to)
	for _, o := range outs {
		if o.err != nil || o.res == nil || !o.res.InDoubt {
			t.Fatalf("outcome %+v, want in doubt", o)
		}
	}
	e.mine()
	for _, r := range to {
		if bal, _ := e.dn.PrincipalAccount(r); bal != DefaultAmount {
			t.Errorf("%s has %d", r, bal)
		}
	}
}

// While every in-flight slot is taken, a batch keeps gathering past its
// window; when a block frees a slot, the drips that waited leave together.
func TestBatchGathersWhileNoSlotIsFree(t *testing.T) {
	const window = 10 * time.Millisecond
	clk := clocktesting.NewFakeClock(t0)
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Clock: clk, Batching: Batching{Max: 50, Window: window}, Timing: Timing{MaxInFlight: 1, BusyWait: time.Minute}})
	firstOut := make(chan dripOutcome, 1)
	go func() {
		res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		firstOut <- dripOutcome{res: res, err: err}
	}()
	endWindow(t, clk, window)
	first := <-firstOut
	if first.err != nil {
		t.Fatal(first.err)
	}
	to := recipients(t, 10)
	outs := make(chan dripOutcome, len(to))
	for i, r := range to {
		go func() {
			res, err := e.f.Drip(context.Background(), Request{Recipient: r})
			outs <- dripOutcome{r, res, err}
		}()
		waitQueued(t, e.f, i+1)
		clk.Step(window / 2) // arrivals spread over several windows
	}
	for range 5 { // five more windows: still gathering
		endWindow(t, clk, window)
	}
	waitTimer(t, clk)
	waitQueued(t, e.f, len(to))
	e.mine()                  // confirms the first drip: its slot is free
	endWindow(t, clk, window) // and the window that ends next sends the batch
	var got []dripOutcome
	for range to {
		got = append(got, <-outs)
	}
	groups := byTx(t, got)
	if len(groups) != 1 {
		t.Fatalf("%d txs for the 10 drips that waited, want one batch", len(groups))
	}
	for id := range groups {
		if id == first.res.TxID {
			t.Fatal("the waiting drips reused the first drip's transaction")
		}
	}
}

// refuseContractCalls refuses every send-many call with reason.
type refuseContractCalls struct {
	NodeClient
	reason string
	mu     sync.Mutex
	calls  int
}

func (r *refuseContractCalls) Broadcast(ctx context.Context, raw []byte) (string, error) {
	tx, err := stacks.DecodeTransaction(raw)
	if err != nil {
		return "", err
	}
	if tx.ContractCall == nil {
		return r.NodeClient.Broadcast(ctx, raw)
	}
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	return "", &node.RejectionError{Reason: r.reason, TxID: tx.TxID().String(), Message: "transaction rejected"}
}

// A refusal about the whole transaction (here its fee) fails the batch as
// it would fail a single drip: halves would be refused the same way.
func TestTxWideRefusalIsNotSplit(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 32, Window: time.Hour}})
	rc := &refuseContractCalls{NodeClient: e.f.cfg.Node, reason: node.ReasonFeeTooLow}
	e.f.setNode(rc)
	for _, o := range dripAll(e.f, recipients(t, 32)) {
		if ReasonOf(o.err) != ReasonRejected {
			t.Fatalf("drip: %v, want rejected", o.err)
		}
	}
	if rc.calls != 1 {
		t.Errorf("%d send-many broadcasts, want 1", rc.calls)
	}
	if st := e.f.BatchStats(); st.Splits != 0 {
		t.Errorf("stats %+v", st)
	}
	if st := e.f.Keys()[0]; st.InFlight != 0 {
		t.Errorf("refused batch left %d in flight", st.InFlight)
	}
}

// A batch answers by its requests' deadline: waiting for a slot (or any
// node call) ends when the earliest request's context does.
func TestBatchHonoursRequestDeadlines(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 2, Window: 10 * time.Millisecond}, Timing: Timing{MaxInFlight: 1, BusyWait: time.Hour}})
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatal(err) // takes the only slot; no block frees it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 2)
	for range 2 { // waits in the queue or, as a full batch, in pick
		go func() {
			_, err := e.f.Drip(ctx, Request{Recipient: recipient(t)})
			done <- err
		}()
	}
	for range 2 {
		select {
		case err := <-done:
			if ReasonOf(err) != ReasonBusy {
				t.Errorf("drip past its deadline: %v, want busy", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a batched drip outlived its request's deadline by 30 s (BusyWait is an hour)")
		}
	}
}

// Batching left at its zero values takes the documented defaults: the
// adaptive batcher (no window) and the testnet send-many-memo contract.
func TestBatchingDefaults(t *testing.T) {
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Keys: []*stacks.PrivateKey{k}, Node: &recordingBroadcast{}, Batching: Batching{Max: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if f.batch == nil || f.batch.window != 0 || f.batch.max != 5 {
		t.Fatalf("batcher %+v, want max 5 and no window (adaptive)", f.batch)
	}
	if got := f.cfg.Batching.Contract.String(); got != stacks.SendManyMemoTestnet {
		t.Fatalf("contract %s, want %s", got, stacks.SendManyMemoTestnet)
	}
	if _, err := New(Config{Keys: []*stacks.PrivateKey{k}, Node: &recordingBroadcast{}, Batching: Batching{Max: MaxBatch + 1}}); err == nil {
		t.Fatal("batch max above MaxBatch accepted")
	}
}

// Adaptive batching (no window), quiet: a drip leaves at once as a plain
// transfer; nothing waits for company.
func TestAdaptiveLoneDripLeavesAtOnce(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: MaxBatch}, Timing: Timing{BusyWait: time.Hour}})
	for i := range 3 {
		res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		if err != nil {
			t.Fatal(err)
		}
		tx, err := stacks.DecodeTransaction(res.TxRaw)
		if err != nil || tx.ContractCall != nil || res.Batch != 0 {
			t.Fatalf("drip %d: a contract call or batch (%d) while slots are free: %v", i, res.Batch, err)
		}
	}
	if st := e.f.BatchStats(); st.Alone != 3 || st.Txs != 0 {
		t.Errorf("batch stats %+v, want 3 alone and no call", st)
	}
}

// Adaptive batching, busy: once free slots are down to the kept fifth,
// drips queue, no timer sends them, and the block that frees a slot sends
// them all in one call.
func TestAdaptiveGathersWhileSlotsAreScarce(t *testing.T) {
	// Five slots, one kept for calls: four drips go alone.
	clk := clocktesting.NewFakeClock(t0)
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Clock: clk, Batching: Batching{Max: MaxBatch}, Timing: Timing{MaxInFlight: 5, BusyWait: time.Hour}})
	for range 4 {
		// Paced over the block once demand rises: the clock moves on
		// while it waits.
		if out := dripStepping(t, e.f, clk, recipient(t)); out.err != nil || out.res.Batch != 0 {
			t.Fatalf("drip with slots to spare: %+v, %v", out.res, out.err)
		}
	}
	to := recipients(t, 12)
	outs := make(chan dripOutcome, len(to))
	for _, r := range to {
		go func() {
			res, err := e.f.Drip(context.Background(), Request{Recipient: r})
			outs <- dripOutcome{r, res, err}
		}()
	}
	waitQueued(t, e.f, len(to))
	waitTimer(t, clk)
	clk.Step(100 * time.Millisecond) // no timer sends them: still queued, the kept slot unused
	waitTimer(t, clk)
	waitQueued(t, e.f, len(to))
	if n := e.dn.MempoolSize(); n != 4 {
		t.Fatalf("mempool holds %d txs before the block, want the 4 lone drips", n)
	}
	e.mine() // confirms the four: their slots free, and the queue leaves, paced over the block
	eventually.True(t, 5*time.Second, "the queue leaves", func() bool {
		if f := e.f.batch; f.queued() == 0 {
			return true
		}
		if clk.HasWaiters() {
			clk.Step(250 * time.Millisecond)
		}
		return false
	})
	var got []dripOutcome
	for range to {
		got = append(got, <-outs)
	}
	groups := byTx(t, got)
	if len(groups) != 1 {
		t.Fatalf("%d txs for the 12 drips that waited, want one send-many call", len(groups))
	}
	for _, g := range groups {
		if g[0].res.Batch != len(to) {
			t.Fatalf("batch of %d, want %d", g[0].res.Batch, len(to))
		}
	}
	e.mine()
	for _, r := range to {
		if bal, _ := e.dn.PrincipalAccount(r); bal != DefaultAmount {
			t.Errorf("%s has %d µSTX, want %d", r, bal, DefaultAmount)
		}
	}
}

// Adaptive batching under demand: when drips arrive faster than the free
// slots would last until the next block, they gather although slots are
// still free, and the queue leaves paced, so the slots are spread over
// the block rather than spent in its first moments.
func TestAdaptivePacesSlotsOverTheBlock(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: MaxBatch}, Timing: Timing{BusyWait: time.Hour}})
	// Blocks free slots every 10 s, the last one just now.
	e.f.pace.releaseGap.Store(int64(10 * time.Second))
	e.f.pace.lastRelease.Store(e.f.cfg.Clock.Now().UnixNano())
	to := recipients(t, 60)
	groups := byTx(t, dripAll(e.f, to))
	st := e.f.BatchStats()
	// The old rule sent 20 alone (every slot not kept for calls) before
	// gathering any.
	if len(groups) > 15 || st.Alone >= 20 || st.Txs == 0 {
		t.Fatalf("60 drips in %d txs (%d alone, %d calls); want them gathered, at most 15 txs", len(groups), st.Alone, st.Txs)
	}
	if free, _ := e.f.pool.freeSlots(); free < 10 {
		t.Errorf("%d slots left free before the block, want at least 10 kept for the rest of it", free)
	}
	e.mine()
	for _, r := range to {
		if bal, _ := e.dn.PrincipalAccount(r); bal != DefaultAmount {
			t.Errorf("%s has %d µSTX, want %d", r, bal, DefaultAmount)
		}
	}
}

// Adaptive batching, a burst with no block to come: the kept slots carry
// full calls, so a key pays far more than its 25 transfers.
func TestAdaptiveBurstFillsTheKeptSlots(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 10}, Timing: Timing{MaxInFlight: 5, BusyWait: time.Hour}})
	to := recipients(t, 4+10)
	outs := dripAll(e.f, to) // 4 alone (in any order), then one full call on the kept slot
	groups := byTx(t, outs)
	if len(groups) > 5 || e.dn.MempoolSize() != len(groups) {
		t.Fatalf("14 drips in %d txs (mempool %d); want at most 5", len(groups), e.dn.MempoolSize())
	}
}

// One fee estimate prices every batch for CacheTTL, scaled to each call's
// length: no node round trip per batch.
func TestBatchFeeEstimateIsCached(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, batchDevnode(), Config{Batching: Batching{Max: 4, Window: time.Hour}})
	e.dn.SetFeeRate(3)
	ce := &countingEstimates{NodeClient: e.f.cfg.Node}
	e.f.setNode(ce)
	var fees []uint64
	for _, n := range []int{4, 4, 4} {
		groups := byTx(t, dripAll(e.f, recipients(t, n)))
		for _, g := range groups {
			tx, err := stacks.DecodeTransaction(g[0].res.TxRaw)
			if err != nil {
				t.Fatal(err)
			}
			est, err := ce.NodeClient.TransactionFeeEstimate(context.Background(), tx.PayloadBytes(), uint64(tx.EncodedLen()))
			if err != nil {
				t.Fatal(err)
			}
			// The same rate, so the same fee as a fresh estimate (±1 for
			// rounding up the scaled sample).
			if d := int64(tx.Auth.Fee) - int64(est.Middle()); d < 0 || d > 1 {
				t.Errorf("fee %d for %d bytes, a fresh estimate says %d", tx.Auth.Fee, tx.EncodedLen(), est.Middle())
			}
			fees = append(fees, tx.Auth.Fee)
		}
	}
	if ce.n != 1 {
		t.Errorf("%d estimates for %d batches, want 1", ce.n, len(fees))
	}
}

func TestFeeSampleScaled(t *testing.T) {
	s := feeSample{fee: 1000, length: 300}
	for _, c := range []struct{ n, want uint64 }{{300, 1000}, {600, 2000}, {150, 500}, {301, 1004}, {1, 4}} {
		if got := s.scaled(c.n); got != c.want {
			t.Errorf("scaled(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if got := (feeSample{fee: ^uint64(0), length: 1}).scaled(2); got != ^uint64(0) {
		t.Errorf("overflow scaled to %d", got)
	}
}

// While a transaction is in flight the poll loop looks for blocks at the
// busy cadence, even with an hour between idle polls: the block that
// confirms the only slot's transaction frees it for the next drip without
// anyone calling Sync.
func TestBusyPollingFreesSlotsOnBlocks(t *testing.T) {
	e := newEnv(t, 1, 1_000_000_000_000, devnode.Config{}, Config{Timing: Timing{
		MaxInFlight: 1, BusyWait: time.Hour, PollInterval: time.Hour, BusyPollInterval: 10 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.f.Run(ctx) }()
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatal(err)
	}
	e.dn.Mine() // no Sync: the poll loop must see it
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	if _, err := e.f.Drip(dctx, Request{Recipient: recipient(t)}); err != nil {
		t.Fatalf("second drip after the block: %v", err)
	}
}
