package peer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
)

// engine is a BTC engine that pays into a list: the protocol's tests count
// payments; the real engine's payouts are btcfaucet's to test.
type engine struct {
	mu      sync.Mutex
	holds   bool
	paid    []string // recipients, one per payout
	refuse  error    // returned by DripAmount when set
	address string
}

func (e *engine) DripAmount(_ context.Context, addr bitcoin.Address, amount int64) (*btcfaucet.Drip, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refuse != nil {
		return nil, e.refuse
	}
	if !e.holds {
		return nil, btcfaucet.ErrStandby
	}
	e.paid = append(e.paid, addr.String())
	return &btcfaucet.Drip{TxID: strings.Repeat("ab", 32), Raw: []byte{1, 2, 3}, Amount: amount, Batch: 1, Fee: 141}, nil
}

func (e *engine) Balance(context.Context, bitcoin.Address) (int64, error) { return 0, nil }
func (e *engine) Payout(context.Context, string) (btcfaucet.PayoutStatus, bool, error) {
	return btcfaucet.PayoutStatus{}, false, nil
}

func (e *engine) Status() btcfaucet.Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return btcfaucet.Status{Address: e.address, Ready: e.holds, Standby: !e.holds, NodeUp: true, Balance: 5e8}
}
func (e *engine) Amounts() btcfaucet.Amounts { return btcfaucet.Amounts{Default: 10000} }
func (e *engine) Network() bitcoin.Network   { return bitcoin.Regtest }
func (e *engine) payments() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.paid...)
}

// locator answers from a settable holder URL.
type locator struct {
	mu   sync.Mutex
	url  string
	held bool
}

func (l *locator) KeyHolder(context.Context, string) (string, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.url, l.held, nil
}

func (l *locator) set(url string, held bool) { l.mu.Lock(); l.url, l.held = url, held; l.mu.Unlock() }

var secret = bytes.Repeat([]byte{7}, 32)

func testAddr(t *testing.T) bitcoin.Address {
	t.Helper()
	k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	return k.Address()
}

// payer serves e's side; wrap may stand between.
func payer(t *testing.T, e *engine, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	auth, err := NewAuth(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(HandlerConfig{Auth: auth, BTC: e})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func forwarder(t *testing.T, e *engine, l Locator, wait time.Duration) *BTC {
	t.Helper()
	auth, _ := NewAuth(secret)
	b, err := New(Config{Local: e, Auth: auth, Locate: l, Key: "k", Self: "http://self", HandoverWait: wait})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStandbyForwardsToTheHolderWhichPaysOnce(t *testing.T) {
	holder := &engine{holds: true, address: "bcrt1q"}
	srv := payer(t, holder, nil)
	standby := &engine{address: "bcrt1q"}
	b := forwarder(t, standby, &locator{url: srv.URL, held: true}, time.Second)
	to := testAddr(t)
	d, err := b.DripAmount(context.Background(), to, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if d.TxID != strings.Repeat("ab", 32) || d.Amount != 10000 || !bytes.Equal(d.Raw, []byte{1, 2, 3}) {
		t.Fatalf("drip %+v", d)
	}
	if got := holder.payments(); len(got) != 1 || got[0] != to.String() {
		t.Fatalf("holder paid %v", got)
	}
	if len(standby.payments()) != 0 {
		t.Fatal("the standby paid")
	}
	// The standby shows the holder's funds, not "standing by".
	if st := b.Status(); st.Standby || !st.Ready || st.Balance != 5e8 {
		t.Fatalf("status %+v", st)
	}
}

func TestAnswerLostIsAskedAgainAndPaidOnce(t *testing.T) {
	holder := &engine{holds: true}
	var calls atomic.Int32
	srv := payer(t, holder, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				// Pay, then cut the connection before the answer.
				h.ServeHTTP(httptest.NewRecorder(), r)
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = conn.Close()
				}
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	b := forwarder(t, &engine{}, &locator{url: srv.URL, held: true}, time.Second)
	if _, err := b.DripAmount(context.Background(), testAddr(t), 10000); err != nil {
		t.Fatal(err)
	}
	if n := len(holder.payments()); n != 1 || calls.Load() != 2 {
		t.Fatalf("paid %d times over %d calls, want once over 2", n, calls.Load())
	}
}

func TestHandoverGoesToTheNextHolder(t *testing.T) {
	old := &engine{} // gave the key up: answers standby
	next := &engine{holds: true}
	oldSrv, nextSrv := payer(t, old, nil), payer(t, next, nil)
	l := &locator{url: oldSrv.URL, held: true}
	var asked atomic.Int32
	oldSrv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		auth, _ := NewAuth(secret)
		Handler(HandlerConfig{Auth: auth, BTC: old}).ServeHTTP(w, r)
		l.set(nextSrv.URL, true) // the next holder took the key meanwhile
	})
	b := forwarder(t, &engine{}, l, 5*time.Second)
	if _, err := b.DripAmount(context.Background(), testAddr(t), 10000); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 1 || len(old.payments()) != 0 || len(next.payments()) != 1 {
		t.Fatalf("old asked %d, paid %d; next paid %d", asked.Load(), len(old.payments()), len(next.payments()))
	}
}

func TestAGoneHolderIsNotPaidAndTheNextOneIs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing listens: the dial fails
	next := &engine{holds: true}
	nextSrv := payer(t, next, nil)
	l := &locator{url: gone, held: true}
	clk := clocktesting.NewFakeClock(time.Now())
	auth, _ := NewAuth(secret)
	b, err := New(Config{Local: &engine{}, Auth: auth, Locate: l, Key: "k", Self: "http://self", HandoverWait: time.Minute, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := b.DripAmount(context.Background(), testAddr(t), 10000); done <- err }()
	// The first try fails to dial; the drip waits a pause, then the
	// locator names the next holder.
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	l.set(nextSrv.URL, true)
	clk.Step(retryPause)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(next.payments()) != 1 {
		t.Fatalf("next paid %d", len(next.payments()))
	}
}

func TestNoHolderWithinTheWaitFailsAsStandby(t *testing.T) {
	b := forwarder(t, &engine{}, &locator{}, time.Nanosecond)
	_, err := b.DripAmount(context.Background(), testAddr(t), 10000)
	if !errors.Is(err, btcfaucet.ErrStandby) {
		t.Fatalf("err %v, want ErrStandby", err)
	}
}

func TestPayerRefusalsMapToTheEngineErrors(t *testing.T) {
	for _, want := range []error{btcfaucet.ErrNoCoins, btcfaucet.ErrBusy, btcfaucet.ErrNodeDown, btcfaucet.ErrRefused} {
		holder := &engine{holds: true, refuse: want}
		srv := payer(t, holder, nil)
		b := forwarder(t, &engine{}, &locator{url: srv.URL, held: true}, time.Second)
		if _, err := b.DripAmount(context.Background(), testAddr(t), 10000); !errors.Is(err, want) {
			t.Errorf("err %v, want %v", err, want)
		}
	}
}

func TestUnsignedStaleOrForeignRequestsPayNothing(t *testing.T) {
	holder := &engine{holds: true}
	srv := payer(t, holder, nil)
	body := []byte(`{"address":"` + testAddr(t).String() + `","amount":10000}`)
	now := time.Now()
	other, _ := NewAuth(bytes.Repeat([]byte{8}, 32))
	ours, _ := NewAuth(secret)
	for name, sign := range map[string]func(*http.Request){
		"unsigned":   func(*http.Request) {},
		"foreign":    func(r *http.Request) { other.sign(r, newID(), now, body) },
		"stale":      func(r *http.Request) { ours.sign(r, newID(), now.Add(-2*MaxSkew), body) },
		"other body": func(r *http.Request) { ours.sign(r, newID(), now, []byte(`{}`)) },
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+pathDrip, bytes.NewReader(body))
		sign(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, resp.StatusCode)
		}
	}
	// A replayed signed request answers what it did and pays nothing more.
	id := newID()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+pathDrip, bytes.NewReader(body))
		ours.sign(req, id, now, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("signed: %d", resp.StatusCode)
		}
	}
	if n := len(holder.payments()); n != 1 {
		t.Fatalf("paid %d times, want 1", n)
	}
}
