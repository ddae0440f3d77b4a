package server

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

func (h *harness) eligibility(query string, hdr map[string]string) (eligibilityBody, *http.Response) {
	h.t.Helper()
	w := h.do(http.MethodGet, pathEligibility+"?"+query, nil, hdr)
	var b eligibilityBody
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
			h.t.Fatalf("eligibility %s: %v: %s", query, err, w.Body)
		}
	}
	return b, w.Result()
}

// The eligibility endpoint agrees with the very next real request, in
// each case it can tell: allowed, limited (per address, then per IP),
// denied, suspended, turned off; asking twice reserves nothing.
func TestEligibilityAgreesWithTheNextDrip(t *testing.T) {
	deny := netip.MustParsePrefix("198.51.100.0/24")
	h := sbtcHarness(t, options{
		limits: guard.Limits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}, PerIP: guard.Limit{Requests: 3, Window: time.Hour}},
		guard:  &guard.Config{Deny: []netip.Prefix{deny}},
	})
	type step struct {
		name, asset, addr string
		hdr               map[string]string
		flip              *switches.State
		eligible          bool
		reason            string
	}
	a, b, c := newRecipient(t), newRecipient(t), newRecipient(t)
	denied := map[string]string{"RemoteAddr": "198.51.100.7:1234"}
	for _, st := range []step{
		{name: "allowed", asset: "stx", addr: a, eligible: true},
		{name: "limited per address", asset: "stx", addr: a, reason: reasonRateLimited},
		{name: "sBTC has its own buckets", asset: "sbtc", addr: a, eligible: true},
		{name: "another address", asset: "stx", addr: b, eligible: true},
		{name: "the IP's third STX drip", asset: "stx", addr: c, eligible: true},
		{name: "limited per IP", asset: "stx", addr: newRecipient(t), reason: reasonRateLimited},
		{name: "denied", asset: "stx", addr: newRecipient(t), hdr: denied, reason: "ip_denied"},
		{name: "suspended", asset: "sbtc", addr: b, flip: &switches.State{SuspendedAssets: []string{"sbtc"}}, reason: "disabled"},
		{name: "turned off", asset: "sbtc", addr: b, flip: &switches.State{DisabledAssets: []string{"sbtc"}}, reason: "disabled"},
		{name: "on again", asset: "sbtc", addr: b, flip: &switches.State{}, eligible: true},
	} {
		if st.flip != nil {
			h.switches.Store(*st.flip)
		}
		q := "asset=" + st.asset + "&address=" + st.addr
		e1, _ := h.eligibility(q, st.hdr)
		e2, resp := h.eligibility(q, st.hdr)
		if resp.StatusCode != http.StatusOK || e1.Eligible != st.eligible || e1.Reason != st.reason || e2.Eligible != e1.Eligible || e2.Reason != e1.Reason {
			t.Fatalf("%s: %d %+v then %+v, want eligible=%v reason %q", st.name, resp.StatusCode, e1, e2, st.eligible, st.reason)
		}
		w := h.do(http.MethodPost, "/extended/v1/faucets/"+st.asset+"?address="+st.addr, nil, st.hdr)
		var body errorBody
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		if (w.Code == http.StatusOK) != st.eligible || (!st.eligible && body.Reason != st.reason) {
			t.Fatalf("%s: eligibility said %+v, the drip answered %d %s", st.name, e1, w.Code, w.Body)
		}
		if st.eligible && (e1.Amount == "" || e1.Amount == "0") {
			t.Errorf("%s: no amount: %+v", st.name, e1)
		}
		if st.reason == reasonRateLimited {
			if e1.RetryAfterSeconds <= 0 || e1.NextAllowedAt == "" || body.RetryAfterSeconds != e1.RetryAfterSeconds {
				t.Errorf("%s: eligibility retry %d (%s), drip %d", st.name, e1.RetryAfterSeconds, e1.NextAllowedAt, body.RetryAfterSeconds)
			}
		}
	}
	// The amount is the drip's; a stacking question the stacking amount.
	e, _ := h.eligibility("address="+newRecipient(t)+"&stacking=true", map[string]string{"RemoteAddr": "192.0.2.99:1"})
	if amt, err := h.f.StackingAmount(t.Context()); err != nil || e.Amount == "" || e.Amount != uintString(amt) || e.Asset != "stx" {
		t.Errorf("stacking eligibility %+v, amount %d %v", e, amt, err)
	}
	// Malformed questions answer as a drip would.
	for _, c := range []struct {
		q      string
		status int
		reason string
	}{
		{"asset=stx&address=nope", 400, "invalid_address"},
		{"asset=stx&address=SP2J6ZY48GV1EZ5V2V5RB9MP66SW86PYKKNRV9EJ7", 400, "mainnet_address"},
		{"asset=stx", 400, "address_required"},
		{"asset=doge&address=" + a, 404, "unknown_asset"},
		{"asset=btc&address=bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", 200, "not_configured"},
	} {
		w := h.do(http.MethodGet, pathEligibility+"?"+c.q, nil, nil)
		if w.Code != c.status || !strings.Contains(w.Body.String(), `"reason":"`+c.reason+`"`) {
			t.Errorf("%s: %d %s, want %d %s", c.q, w.Code, w.Body, c.status, c.reason)
		}
	}
}

func uintString(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Drip answers carry the RateLimit fields of the limits they count
// against: remaining after this drip, and on a 429 none left with the
// seconds until a slot frees (Retry-After's figure).
func TestRateLimitHeaders(t *testing.T) {
	h := newHarness(t, options{limits: guard.Limits{PerAddress: guard.Limit{Requests: 2, Window: time.Hour}, PerIP: guard.Limit{Requests: 30, Window: 5 * time.Minute}}})
	to := newRecipient(t)
	w := h.drip("address=" + to)
	if w.Code != http.StatusOK {
		t.Fatalf("drip: %d %s", w.Code, w.Body)
	}
	if got, want := w.Header().Get("RateLimit-Policy"), `"address";q=2;w=3600, "ip";q=30;w=300`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"address";r=1;t=3600, "ip";r=29;t=`) {
		t.Errorf("RateLimit after one drip: %q", got)
	}
	h.drip("address=" + to)
	w = h.do(http.MethodPost, "/extended/v3/faucets/stx", strings.NewReader(`{"address":"`+to+`"}`), map[string]string{"Content-Type": "application/json"})
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("third drip: %d %s", w.Code, w.Body)
	}
	ra := w.Header().Get("Retry-After")
	if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"address";r=0;t=`+ra+`, "ip";r=28;`) {
		t.Errorf("RateLimit on the 429: %q (Retry-After %s)", got, ra)
	}
	// Refused before the limits (bad input): no RateLimit fields.
	if w := h.drip("address=nope"); w.Header().Get("RateLimit") != "" {
		t.Errorf("a 400 carries RateLimit %q", w.Header().Get("RateLimit"))
	}
}
