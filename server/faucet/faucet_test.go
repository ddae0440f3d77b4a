package faucet

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// t0 is where the tests' fake clocks start.
var t0 = time.Unix(1_700_000_000, 0)

// env is a faucet wired to a devnode over real HTTP.
type env struct {
	t    testing.TB
	dn   *devnode.Node
	f    *Faucet
	keys []*stacks.PrivateKey
}

func newEnv(t testing.TB, nKeys int, funding uint64, dcfg devnode.Config, fcfg Config) *env {
	t.Helper()
	if dcfg.Genesis == nil {
		dcfg.Genesis = map[stacks.Address]uint64{}
	}
	keys := make([]*stacks.PrivateKey, nKeys)
	for i := range keys {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
		dcfg.Genesis[k.TestnetAddress()] = funding
	}
	dn := devnode.New(dcfg)
	srv := httptest.NewServer(dn.Handler())
	t.Cleanup(srv.Close)
	client, err := node.New(srv.URL, rpcclient.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	fcfg.Keys, fcfg.Node = keys, client
	f, err := New(fcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, dn: dn, f: f, keys: keys}
}

func recipient(t testing.TB) stacks.Principal {
	t.Helper()
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return stacks.Principal{Address: k.TestnetAddress()}
}

// mine mines a block and lets the engine observe it.
func (e *env) mine() {
	e.dn.Mine()
	if err := e.f.Sync(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

func TestDripIsMinedWithExactBalance(t *testing.T) {
	e := newEnv(t, 1, 10_000_000_000, devnode.Config{}, Config{})
	to := recipient(t)
	res, err := e.f.Drip(context.Background(), Request{Recipient: to})
	if err != nil {
		t.Fatal(err)
	}
	if res.Amount != DefaultAmount || res.Nonce != 0 || res.Sender != e.keys[0].TestnetAddress() {
		t.Errorf("result %+v", res)
	}
	tx, err := stacks.DecodeTransaction(res.TxRaw)
	if err != nil || tx.TxID() != res.TxID || tx.Payload.Recipient != to || tx.Payload.Memo.String() != "faucet" {
		t.Fatalf("tx %+v err %v", tx, err)
	}
	if uint64(tx.EncodedLen()) > res.Fee {
		t.Errorf("fee %d below tx length %d", res.Fee, tx.EncodedLen())
	}
	e.mine()
	if bal, _ := e.dn.Account(to.Address); bal != DefaultAmount {
		t.Errorf("recipient balance %d, want %d", bal, DefaultAmount)
	}
	if bal, nonce := e.dn.Account(e.keys[0].TestnetAddress()); bal != 10_000_000_000-DefaultAmount-res.Fee || nonce != 1 {
		t.Errorf("faucet balance %d nonce %d", bal, nonce)
	}
	st := e.f.Keys()[0]
	if st.InFlight != 0 || st.ConfirmedNonce != 1 || st.NextNonce != 1 {
		t.Errorf("key status after mining %+v", st)
	}
}

func TestNoncesChainWithinABlock(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
	for i := range 10 {
		res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Nonce != uint64(i) {
			t.Fatalf("drip %d got nonce %d", i, res.Nonce)
		}
	}
	if e.dn.MempoolSize() != 10 {
		t.Fatalf("mempool %d", e.dn.MempoolSize())
	}
	e.mine()
	if _, nonce := e.dn.Account(e.keys[0].TestnetAddress()); nonce != 10 {
		t.Fatalf("confirmed nonce %d", nonce)
	}
}

func TestInFlightCapThenBusy(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{Timing: Timing{MaxInFlight: 3}})
	for range 3 {
		if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if ReasonOf(err) != ReasonBusy {
		t.Fatalf("err %v, want busy", err)
	}
	e.mine()
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatalf("after mining: %v", err)
	}
}

func TestLeastLoadedKey(t *testing.T) {
	e := newEnv(t, 3, 100_000_000_000, devnode.Config{}, Config{})
	count := map[stacks.Address]int{}
	for range 9 {
		res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		if err != nil {
			t.Fatal(err)
		}
		count[res.Sender]++
	}
	for _, k := range e.keys {
		if count[k.TestnetAddress()] != 3 {
			t.Fatalf("uneven spread %v", count)
		}
	}
}

func TestExhaustedFailsFast(t *testing.T) {
	// Enough for exactly one drip plus fee.
	e := newEnv(t, 1, DefaultAmount+DefaultFeeFallback, devnode.Config{}, Config{Fees: Fees{Max: DefaultFeeFallback}})
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatal(err)
	}
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if ReasonOf(err) != ReasonExhausted {
		t.Fatalf("err %v, want exhausted", err)
	}
	if e.dn.MempoolSize() != 1 {
		t.Errorf("exhausted drip reached the node: mempool %d", e.dn.MempoolSize())
	}
	if err := e.f.Ready(context.Background()); err == nil {
		t.Error("Ready with no funded key")
	}
}

func TestNotEnoughFundsMarksDryAndUsesOtherKey(t *testing.T) {
	e := newEnv(t, 2, 100_000_000_000, devnode.Config{}, Config{})
	// The node drains key 0 behind the engine's back.
	drain := e.keys[0]
	sink := recipient(t)
	tx, err := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: sink, Amount: 100_000_000_000 - 1000, Nonce: 0, Fee: 1000}, drain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dn.Submit(tx.Serialize()); err != nil {
		t.Fatal(err)
	}
	e.dn.Mine() // the engine has not synced: it still thinks key 0 is rich and at nonce 0
	for range 4 {
		res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sender != e.keys[1].TestnetAddress() && res.Nonce == 0 {
			t.Fatalf("drained key used: %+v", res)
		}
	}
	st := e.f.Keys()
	if !st[0].Dry && st[0].ConfirmedNonce == 0 {
		t.Errorf("key 0 neither dry nor resynced: %+v", st[0])
	}
}

func TestBadNonceResyncs(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
	// Another writer spends nonces 0 and 1 and they are mined.
	for n := range uint64(2) {
		tx, _ := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: recipient(t), Amount: 1, Nonce: n, Fee: 500}, e.keys[0])
		if _, err := e.dn.Submit(tx.Serialize()); err != nil {
			t.Fatal(err)
		}
	}
	e.dn.Mine()
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Nonce != 2 {
		t.Fatalf("nonce %d after resync, want 2", res.Nonce)
	}
}

func TestConflictingNonceAdvances(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{Fees: Fees{Min: 180, Max: 180}})
	// Another writer holds nonce 0 in the mempool with a higher fee.
	tx, _ := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: recipient(t), Amount: 1, Nonce: 0, Fee: 5000}, e.keys[0])
	if _, err := e.dn.Submit(tx.Serialize()); err != nil {
		t.Fatal(err)
	}
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Nonce != 1 {
		t.Fatalf("nonce %d, want 1 after the conflict", res.Nonce)
	}
	e.mine()
	if _, nonce := e.dn.Account(e.keys[0].TestnetAddress()); nonce != 2 {
		t.Fatalf("confirmed nonce %d, want 2", nonce)
	}
}

func TestStackingAmount(t *testing.T) {
	e := newEnv(t, 1, 10_000_000_000_000, devnode.Config{MinAmountUstx: 100_000_000_001}, Config{})
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t), Stacking: true})
	if err != nil {
		t.Fatal(err)
	}
	// ceil(100_000_000_001 × 1.2)
	if res.Amount != 120_000_000_002 || !res.Stacking {
		t.Fatalf("stacking amount %d", res.Amount)
	}
}

func TestStackingUnavailableNeverFallsBack(t *testing.T) {
	e := newEnv(t, 1, 10_000_000_000_000, devnode.Config{}, Config{})
	e.dn.SetErrorRate(1)
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t), Stacking: true})
	if ReasonOf(err) != ReasonStackingUnavailable {
		t.Fatalf("err %v, want %s", err, ReasonStackingUnavailable)
	}
	if e.dn.MempoolSize() != 0 {
		t.Fatal("a tx was sent although the stacking amount is unknown")
	}
}

func TestMainnetNodeDisables(t *testing.T) {
	e := newEnv(t, 1, 10_000_000_000, devnode.Config{Mainnet: true}, Config{})
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if ReasonOf(err) != ReasonDisabled {
		t.Fatalf("err %v, want disabled", err)
	}
	if e.f.Ready(context.Background()) == nil {
		t.Error("ready on mainnet")
	}
}

func TestChainIDMismatchDisables(t *testing.T) {
	e := newEnv(t, 1, 10_000_000_000, devnode.Config{ChainID: 0x87654321}, Config{ChainID: stacks.ChainIDTestnet})
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	var fe *Error
	if !errors.As(err, &fe) || fe.Reason != ReasonDisabled {
		t.Fatalf("err %v", err)
	}
	// Without a configured id, a custom testnet chain id is used for signing.
	e2 := newEnv(t, 1, 10_000_000_000, devnode.Config{ChainID: 0x87654321}, Config{})
	res, err := e2.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := stacks.DecodeTransaction(res.TxRaw)
	if tx.ChainID != 0x87654321 {
		t.Fatalf("signed for chain %x", tx.ChainID)
	}
}

func TestNodeDownIsUnavailableAndRecovers(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	e := newEnv(t, 1, 10_000_000_000, devnode.Config{}, Config{Clock: clk, Timing: Timing{CacheTTL: time.Millisecond, ChainCheckInterval: time.Millisecond}})
	e.dn.SetDown(true)
	clk.Step(5 * time.Millisecond) // the cached chain info is stale
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if ReasonOf(err) != ReasonNodeUnavailable {
		t.Fatalf("err %v, want node_unavailable", err)
	}
	e.dn.SetDown(false)
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Nonce != 0 {
		t.Fatalf("nonce %d after outage, want 0 (no gap)", res.Nonce)
	}
}

func TestServerErrorsAreUnavailable(t *testing.T) {
	e := newEnv(t, 1, 10_000_000_000, devnode.Config{}, Config{})
	e.dn.SetErrorRate(1)
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if ReasonOf(err) != ReasonNodeUnavailable {
		t.Fatalf("err %v", err)
	}
	var fe *Error
	errors.As(err, &fe)
	if fe.Message == "" || containsAny(fe.Message, "http://", "127.0.0.1") {
		t.Errorf("user message leaks internals: %q", fe.Message)
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if len(x) > 0 && len(s) >= len(x) {
			for i := 0; i+len(x) <= len(s); i++ {
				if s[i:i+len(x)] == x {
					return true
				}
			}
		}
	}
	return false
}

func TestDroppedTxRepairedWithinBlocks(t *testing.T) {
	const stuck = 2
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{Timing: Timing{StuckBlocks: stuck}})
	e.dn.SetDropRate(1) // the node acknowledges but never keeps them
	var sent []*Result
	for range 3 {
		res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, res)
	}
	e.dn.SetDropRate(0)
	if e.dn.MempoolSize() != 0 {
		t.Fatal("drop knob did not drop")
	}
	// Within StuckBlocks+1 blocks every dropped drip must land.
	for range stuck + 1 {
		e.mine()
	}
	for _, r := range sent {
		to := r.Recipient(t)
		if bal, _ := e.dn.Account(to); bal != DefaultAmount {
			t.Fatalf("recipient %s has %d after repair", to, bal)
		}
	}
	if _, nonce := e.dn.Account(e.keys[0].TestnetAddress()); nonce != 3 {
		t.Fatalf("confirmed nonce %d, want 3", nonce)
	}
}

// Recipient decodes the recipient of a result's transaction.
func (r *Result) Recipient(t testing.TB) stacks.Address {
	tx, err := stacks.DecodeTransaction(r.TxRaw)
	if err != nil {
		t.Fatal(err)
	}
	return tx.Payload.Recipient.Address
}

func TestHoleIsFilled(t *testing.T) {
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{Timing: Timing{StuckBlocks: 1}})
	k := e.f.pool.keys[0]
	// Simulate a drip that took nonce 0 and failed while nonce 1 was accepted.
	k.mu.Lock()
	n0 := k.allocate(cost{stx: 1})
	k.mu.Unlock()
	res, err := e.f.drips.transfer(context.Background(), e.f.drips.single, recipient(t), DefaultAmount)
	if err != nil {
		t.Fatal(err)
	}
	if res.Nonce != 1 {
		t.Fatalf("drip took nonce %d, want 1", res.Nonce)
	}
	e.f.pool.release(k, n0)
	for range 4 {
		e.mine()
	}
	if _, nonce := e.dn.Account(k.addr); nonce < 2 {
		t.Fatalf("hole at nonce %d never filled; confirmed nonce %d", n0, nonce)
	}
}

func TestFeeClampAndFallback(t *testing.T) {
	e := newEnv(t, 1, 10_000_000_000, devnode.Config{FeeRate: 1000}, Config{Fees: Fees{Min: 200, Max: 5000, Fallback: 777}})
	to := recipient(t)
	if fee := e.f.price.transfer(context.Background(), to); fee != 5000 {
		t.Errorf("rate 1000 × 180 clamped = %d, want 5000", fee)
	}
	e.dn.SetFeeRate(2)
	e.f.price.rate.Invalidate()
	if fee := e.f.price.transfer(context.Background(), to); fee != 360 {
		t.Errorf("rate 2 × 180 = %d, want 360", fee)
	}
	e.f.price.rate.Invalidate()
	e.dn.SetErrorRate(1)
	if fee := e.f.price.transfer(context.Background(), to); fee != 777 {
		t.Errorf("fallback fee %d, want 777", fee)
	}
	// Never below the tx length even if configured lower.
	e.dn.SetErrorRate(0)
	e2 := newEnv(t, 1, 10_000_000_000, devnode.Config{}, Config{Fees: Fees{Min: 1, Max: 10, Fallback: 5}})
	if fee := e2.f.price.transfer(context.Background(), to); fee != 180 {
		t.Errorf("fee %d, want the 180-byte minimum", fee)
	}
}

func TestKeysNeverInErrors(t *testing.T) {
	e := newEnv(t, 1, 10, devnode.Config{}, Config{})
	_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err == nil {
		t.Fatal("unfunded drip succeeded")
	}
	secret := e.keys[0].Hex()[:64]
	if containsAny(fmt.Sprintf("%v %+v", err, err), secret) {
		t.Fatal("key material in error")
	}
}

func TestStuckNonceFeeBump(t *testing.T) {
	const stuck = 2
	const funding = 100_000_000_000
	e := newEnv(t, 1, funding, devnode.Config{}, Config{Timing: Timing{StuckBlocks: stuck}})
	e.dn.SetDropRate(1)
	res, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
	if err != nil {
		t.Fatal(err)
	}
	for range stuck {
		e.mine() // the rebroadcast is dropped as well
	}
	e.dn.SetDropRate(0)
	for range stuck + 1 {
		e.mine()
	}
	to := res.Recipient(t)
	if bal, _ := e.dn.Account(to); bal != DefaultAmount {
		t.Fatalf("recipient has %d after fee bump", bal)
	}
	bal, nonce := e.dn.Account(e.keys[0].TestnetAddress())
	paidFee := funding - DefaultAmount - bal
	if nonce != 1 || paidFee <= res.Fee {
		t.Fatalf("nonce %d, fee paid %d, want a replacement above %d", nonce, paidFee, res.Fee)
	}
}

func TestBusyWaitUsesTheNextBlock(t *testing.T) {
	// The clock stands still: the drip's wait can only end with the block.
	clk := clocktesting.NewFakeClock(t0)
	e := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{Clock: clk, Timing: Timing{MaxInFlight: 1, BusyWait: 10 * time.Second}})
	if _, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)}); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{})
	e.f.pool.onBusyWait = sync.OnceFunc(func() { close(waiting) })
	done := make(chan error, 1)
	go func() {
		_, err := e.f.Drip(context.Background(), Request{Recipient: recipient(t)})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("second drip did not wait for capacity: %v", err)
	case <-waiting:
	}
	e.mine() // confirms the first drip and frees the slot
	if err := <-done; err != nil {
		t.Fatalf("waiting drip failed: %v", err)
	}
}

func TestDripToAFaucetKeyUsesAnotherKey(t *testing.T) {
	e := newEnv(t, 2, 100_000_000_000, devnode.Config{}, Config{})
	self := stacks.Principal{Address: e.keys[0].TestnetAddress()}
	res, err := e.f.Drip(context.Background(), Request{Recipient: self})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sender != e.keys[1].TestnetAddress() {
		t.Fatalf("sent from %s, want the other key", res.Sender)
	}
	one := newEnv(t, 1, 100_000_000_000, devnode.Config{}, Config{})
	_, err = one.f.Drip(context.Background(), Request{Recipient: stacks.Principal{Address: one.keys[0].TestnetAddress()}})
	if ReasonOf(err) != ReasonRejected || one.dn.MempoolSize() != 0 {
		t.Fatalf("self-drip with one key: %v", err)
	}
}

func TestPadPercent(t *testing.T) {
	tests := []struct {
		v, pct, want uint64
		ok           bool
	}{
		{100, 20, 120, true},
		{101, 20, 122, true}, // 121.2 rounds up
		{125_000_000_000, 20, 150_000_000_000, true},
		{7, 0, 7, true},
		{^uint64(0), 20, 0, false},
	}
	for _, tt := range tests {
		got, ok := padPercent(tt.v, tt.pct)
		if got != tt.want || ok != tt.ok {
			t.Errorf("padPercent(%d,%d) = %d,%v want %d,%v", tt.v, tt.pct, got, ok, tt.want, tt.ok)
		}
	}
}

// setNode points every part of the engine at n, as New would have: tests
// wrap the node the engine was built with.
func (f *Faucet) setNode(n NodeClient) {
	f.cfg.Node = n
	f.chain.node, f.price.node, f.bcast.node, f.accounts.node, f.poller.tokenNode = n, n, n, n, n
	if f.treasury != nil {
		f.treasury.node = n
	}
}
