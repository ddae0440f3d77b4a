package server

import (
	"context"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
)

// solvedHeaders fetches a challenge from the server and solves it.
func solvedHeaders(t *testing.T, h *harness) map[string]string {
	t.Helper()
	w := h.do(http.MethodPost, "/faucet/v1/challenge", nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("challenge: %d %s", w.Code, w.Body)
	}
	m := decodeMap(t, w.Body.Bytes())
	tok := m["challenge"].(string)
	sol, err := guard.Solve(context.Background(), tok, int(m["difficulty"].(float64)))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"X-Faucet-Challenge": tok, "X-Faucet-Solution": sol}
}

func rejections(t *testing.T, h *harness, check string) float64 {
	t.Helper()
	return counterValue(t, h.reg, "faucet_check_rejections_total", map[string]string{"check": check})
}

func TestProofOfWorkOnBothAPIs(t *testing.T) {
	h := newHarness(t, options{guard: &guard.Config{PoW: guard.PoWConfig{Difficulty: 10}}})
	to := newRecipient(t)

	m := assertError(t, h.drip("address="+to), 428, "proof of work")
	if m["reason"] != "challenge_required" {
		t.Errorf("reason %v", m["reason"])
	}
	w := h.dripV3(`{"address":"`+to+`"}`, nil)
	assertV3Error(t, w, w.Body.Bytes(), 428, "proof of work")
	if got := rejections(t, h, guard.CheckProofOfWork); got != 2 {
		t.Errorf("proof_of_work rejections = %v, want 2", got)
	}
	if n := h.dn.MempoolSize(); n != 0 {
		t.Fatalf("refused drips broadcast %d txs", n)
	}

	hdr := solvedHeaders(t, h)
	if w := h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, nil, hdr); w.Code != http.StatusOK {
		t.Fatalf("solved v1 drip: %d %s", w.Code, w.Body)
	}
	// The same solution again is a replay.
	m = assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, hdr), http.StatusForbidden, "")
	if m["reason"] != "challenge_replayed" {
		t.Errorf("replay reason %v", m["reason"])
	}
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, solvedHeaders(t, h)); w.Code != http.StatusOK {
		t.Fatalf("solved v3 drip: %d %s", w.Code, w.Body)
	}
	if got := counterValue(t, h.reg, "faucet_pow_difficulty", map[string]string{}); got != 10 {
		t.Errorf("faucet_pow_difficulty = %v", got)
	}
}

// An API token skips the proof of work and the per-IP limit, and its own
// quotas replace the per-address limit.
func TestAPITokenBypass(t *testing.T) {
	dir := t.TempDir()
	token := "ci-token-0123456789abcdef"
	file := filepath.Join(dir, "tokens")
	if err := os.WriteFile(file, []byte("# CI pipelines\nci "+token+" 100/1h 3/1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, options{
		limits: guard.Limits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}, PerIP: guard.Limit{Requests: 1, Window: time.Hour}},
		guard:  &guard.Config{TokensFile: file, PoW: guard.PoWConfig{Difficulty: 12}},
	})
	auth := map[string]string{"Authorization": "Bearer " + token}
	to := newRecipient(t)
	for i := range 3 {
		if w := h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, nil, auth); w.Code != http.StatusOK {
			t.Fatalf("token drip %d: %d %s", i, w.Code, w.Body)
		}
	}
	m := assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, nil, auth), http.StatusTooManyRequests, "Too many")
	if m["reason"] != reasonRateLimited {
		t.Errorf("reason %v", m["reason"])
	}
	// The token's drips never touched the anonymous allowance of the IP or
	// the address, but anonymous drips still need the proof of work.
	assertError(t, h.drip("address="+to), 428, "")
	if w := h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, nil, solvedHeaders(t, h)); w.Code != http.StatusOK {
		t.Fatalf("anonymous drip after token drips: %d %s", w.Code, w.Body)
	}
	m = assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, map[string]string{"Authorization": "Bearer wrong-token-000000000"}), http.StatusUnauthorized, "")
	if m["reason"] != "token_invalid" {
		t.Errorf("bad token reason %v", m["reason"])
	}
	if got := rejections(t, h, guard.CheckAPIToken); got != 1 {
		t.Errorf("api_token rejections = %v", got)
	}
	if logs := h.logs.String(); strings.Contains(logs, token) {
		t.Error("the token appears in the logs")
	}
}

func TestIPListsAndBalanceCap(t *testing.T) {
	h := newHarness(t, options{
		limits: guard.Limits{PerIP: guard.Limit{Requests: 1, Window: time.Hour}},
		guard: &guard.Config{
			Deny:       []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
			Allow:      []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
			PoW:        guard.PoWConfig{Difficulty: 12},
			BalanceCap: 1_000_000_000,
		},
	})
	m := assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, map[string]string{"RemoteAddr": "198.51.100.7:1234"}), http.StatusForbidden, "")
	if m["reason"] != "ip_denied" {
		t.Errorf("deny reason %v", m["reason"])
	}
	allowed := map[string]string{"RemoteAddr": "203.0.113.9:1234"}
	for i := range 2 { // past the per-IP limit of 1, without a proof of work
		if w := h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, allowed); w.Code != http.StatusOK {
			t.Fatalf("allow-listed drip %d: %d %s", i, w.Code, w.Body)
		}
	}
	rich := newKey(t).TestnetAddress()
	h.dn.Fund(rich, 2_000_000_000)
	m = assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+rich.String(), nil, allowed), http.StatusForbidden, "")
	if m["reason"] != "balance_cap" {
		t.Errorf("cap reason %v", m["reason"])
	}
	w := h.dripV3(`{"address":"`+rich.String()+`"}`, allowed)
	assertV3Error(t, w, w.Body.Bytes(), http.StatusForbidden, "")
	if got := rejections(t, h, guard.CheckBalanceCap); got != 2 {
		t.Errorf("balance_cap rejections = %v", got)
	}
	if got := rejections(t, h, guard.CheckDenyList); got != 1 {
		t.Errorf("ip_deny rejections = %v", got)
	}
}

// A right API token past its until= is refused 403 token_not_active with
// when it closed, on v1 and v3, and is no token failure in the metrics.
func TestExpiredAPIToken(t *testing.T) {
	const token = "event-code-2c9e41b7aa"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("devcon "+token+" 100/1h until=2026-01-10T18:00:00Z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, options{guard: &guard.Config{TokensFile: file}})
	auth := map[string]string{"Authorization": "Bearer " + token}
	m := assertError(t, h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, auth), http.StatusForbidden,
		"The API token devcon expired at 10 Jan 2026 18:00 UTC.")
	if m["reason"] != guard.ReasonTokenNotActive {
		t.Errorf("v1 reason %v", m["reason"])
	}
	if w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, auth); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "expired at") {
		t.Errorf("v3: %d %s", w.Code, w.Body)
	}
	if n := counterValue(t, h.reg, "faucet_api_token_failures_total", map[string]string{}); n != 0 {
		t.Errorf("faucet_api_token_failures_total %v after a right token out of its window, want 0", n)
	}
}
