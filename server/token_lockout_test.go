package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/guard"
	clocktesting "k8s.io/utils/clock/testing"
)

// refusingBTC is a BTC faucet that is on but must never be asked to pay:
// every request in these tests is refused before the engine.
type refusingBTC struct{ t *testing.T }

func (b refusingBTC) DripAmount(context.Context, bitcoin.Address, int64) (*btcfaucet.Drip, error) {
	b.t.Error("a BTC drip reached the faucet")
	return nil, context.Canceled
}
func (refusingBTC) Balance(context.Context, bitcoin.Address) (int64, error) { return 0, nil }
func (refusingBTC) Payout(context.Context, string) (btcfaucet.PayoutStatus, bool, error) {
	return btcfaucet.PayoutStatus{}, false, nil
}
func (refusingBTC) Status() btcfaucet.Status   { return btcfaucet.Status{} }
func (refusingBTC) Amounts() btcfaucet.Amounts { return btcfaucet.Amounts{} }
func (refusingBTC) Network() bitcoin.Network   { return bitcoin.Regtest }

// Wrong API tokens from one client address lock it out on every route and
// asset, with a Retry-After that grows; other addresses are unaffected; the
// lock-out lifts after its time.
func TestTokenLockoutOverHTTP(t *testing.T) {
	token := "ci-token-0123456789abcdef"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("ci "+token+" 1000/1h 100/1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := sbtcHarness(t, options{
		clock: clock,
		guard: &guard.Config{TokensFile: file, Clock: clock},
		btc:   refusingBTC{t},
	})
	const guesser = "203.0.113.7:5000"
	wrong := map[string]string{"Authorization": "Bearer wrong-token-0000000000", "RemoteAddr": guesser}
	right := map[string]string{"Authorization": "Bearer " + token, "RemoteAddr": guesser}
	stx := func() string { return "/extended/v1/faucets/stx?address=" + newRecipient(t) }

	// A right token before the lock-out passes, even after failures.
	for range 4 {
		assertError(t, h.do(http.MethodPost, stx(), nil, wrong), http.StatusUnauthorized, "")
	}
	if w := h.do(http.MethodPost, stx(), nil, right); w.Code != http.StatusOK {
		t.Fatalf("right token before the lock-out: %d %s", w.Code, w.Body)
	}

	// The fifth wrong token is judged (401), on another asset; then 15 more
	// across the assets and API versions are refused with a growing wait.
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	btcAddr := key.Address().String()
	assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/sbtc?address="+newRecipient(t), nil, wrong), http.StatusUnauthorized, "")
	var last int64
	for i := range 15 {
		var w *httptest.ResponseRecorder
		switch i % 3 {
		case 0:
			w = h.do(http.MethodPost, stx(), nil, wrong)
			m := assertError(t, w, http.StatusTooManyRequests, "API token")
			if m["reason"] != "token_lockout" {
				t.Fatalf("reason %v", m["reason"])
			}
			if secs, _ := m["retry_after_seconds"].(float64); w.Header().Get("Retry-After") != strconv.FormatInt(int64(secs), 10) {
				t.Fatalf("Retry-After %q, body's retry_after_seconds %v", w.Header().Get("Retry-After"), secs)
			}
		case 1:
			w = h.dripV3(`{"address":"`+newRecipient(t)+`"}`, wrong)
			assertV3Error(t, w, w.Body.Bytes(), http.StatusTooManyRequests, "Too many requests")
		case 2:
			w = h.do(http.MethodPost, "/extended/v1/faucets/btc?address="+btcAddr, nil, wrong)
			assertError(t, w, http.StatusTooManyRequests, "")
		}
		secs, err := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
		if err != nil {
			t.Fatalf("refusal %d: Retry-After %q", i, w.Header().Get("Retry-After"))
		}
		if secs < last || secs > 3600 {
			t.Fatalf("refusal %d: Retry-After %d after %d (cap 3600)", i, secs, last)
		}
		if i > 0 && i < 3 && secs <= last {
			t.Fatalf("refusal %d: Retry-After %d did not grow from %d", i, secs, last)
		}
		last = secs
	}
	if last != 3600 {
		t.Fatalf("Retry-After ends at %d, want the 3600 cap", last)
	}

	// The right token and drips without one are refused too.
	m := assertError(t, h.do(http.MethodPost, stx(), nil, right), http.StatusTooManyRequests, "")
	if m["reason"] != "token_lockout" {
		t.Fatalf("right token during the lock-out: reason %v", m["reason"])
	}
	m = assertError(t, h.do(http.MethodPost, stx(), nil, map[string]string{"RemoteAddr": guesser}), http.StatusTooManyRequests, "")
	if m["reason"] != "token_lockout" {
		t.Fatalf("anonymous drip during the lock-out: reason %v", m["reason"])
	}
	// Another client address is unaffected.
	other := map[string]string{"Authorization": "Bearer " + token, "RemoteAddr": "198.51.100.20:5000"}
	if w := h.do(http.MethodPost, stx(), nil, other); w.Code != http.StatusOK {
		t.Fatalf("right token from another address: %d %s", w.Code, w.Body)
	}

	if got := counterValue(t, h.reg, "faucet_api_token_failures_total", map[string]string{}); got != 5 {
		t.Errorf("faucet_api_token_failures_total = %v, want 5", got)
	}
	if got := rejections(t, h, guard.CheckTokenLockout); got != 17 {
		t.Errorf("token_lockout rejections = %v, want 17", got)
	}
	if got := counterValue(t, h.reg, "faucet_drips_total", map[string]string{"asset": "btc", "outcome": "error", "reason": reasonRejectedByCheck}); got != 5 {
		t.Errorf("btc drips refused by a check = %v, want 5", got)
	}

	// The lock-out lifts after its time.
	clock.Step(time.Hour)
	if w := h.do(http.MethodPost, stx(), nil, right); w.Code != http.StatusOK {
		t.Fatalf("right token after the lock-out: %d %s", w.Code, w.Body)
	}
	if w := h.do(http.MethodPost, stx(), nil, map[string]string{"RemoteAddr": guesser}); w.Code != http.StatusOK {
		t.Fatalf("anonymous drip after the lock-out: %d %s", w.Code, w.Body)
	}
}
