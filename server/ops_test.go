package server

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

func TestHealthz(t *testing.T) {
	h := newHarness(t, options{})
	h.dn.SetDown(true) // liveness ignores the node
	w := h.do(http.MethodGet, "/healthz", nil, nil)
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != "ok" {
		t.Errorf("healthz = %d %q", w.Code, w.Body)
	}
}

func readyz(t *testing.T, h *harness) (int, readyBody) {
	t.Helper()
	w := h.do(http.MethodGet, "/readyz", nil, nil)
	var b readyBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("readyz body %q: %v", w.Body, err)
	}
	return w.Code, b
}

func TestReadyz(t *testing.T) {
	h := newHarness(t, options{unfunded: true, faucetCfg: func(c *faucet.Config) {
		c.Timing.ChainCheckInterval = time.Nanosecond // see the node going down at once
	}})
	ctx := context.Background()
	if err := h.f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	code, b := readyz(t, h)
	if code != http.StatusServiceUnavailable || b.Ready || !strings.Contains(b.Reason, "funded") {
		t.Errorf("unfunded: %d %+v, want 503 with a funding reason", code, b)
	}

	h.dn.Fund(h.keys[0].TestnetAddress(), testFunding)
	if err := h.f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if code, b := readyz(t, h); code != http.StatusOK || !b.Ready {
		t.Errorf("funded: %d %+v, want 200", code, b)
	}

	h.dn.SetDown(true)
	w := h.do(http.MethodGet, "/readyz", nil, nil)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "unreachable") {
		t.Errorf("node down: %d %s", w.Code, w.Body)
	}
	assertNoInternals(t, h, w.Body.String())
	h.dn.SetDown(false)

	h.dn.SetMainnet(true)
	if code, b := readyz(t, h); code != http.StatusServiceUnavailable || !strings.Contains(b.Reason, "mainnet") {
		t.Errorf("mainnet: %d %+v", code, b)
	}
	// Transitions are logged once each, not at every probe.
	if n := strings.Count(h.logs.String(), `"msg":"faucet ready"`); n != 1 {
		t.Errorf("'faucet ready' logged %d times, want 1", n)
	}
}

func TestReadyReasonScrubsNodeErrors(t *testing.T) {
	for _, err := range []error{
		context.DeadlineExceeded,
		errorString("node unreachable: node info: Get \"http://10.0.0.1:20443/v2/info\": dial tcp: refused"),
		errorString("weird failure at https://secret.example/"),
	} {
		got := readyReason(err)
		if strings.Contains(got, "://") || strings.Contains(got, "10.0.0.1") {
			t.Errorf("readyReason(%v) = %q leaks the node", err, got)
		}
	}
	if got := readyReason(errorString("no faucet key is funded for a drip")); got != "no faucet key is funded for a drip" {
		t.Errorf("funding reason = %q", got)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestMetrics(t *testing.T) {
	h := newHarness(t, options{})
	to := newRecipient(t)
	if w := h.drip("address=" + to); w.Code != http.StatusOK {
		t.Fatalf("drip: %d %s", w.Code, w.Body)
	}
	if w := h.drip("address=" + to + "&stacking=true"); w.Code != http.StatusOK {
		t.Fatalf("stacking drip: %d %s", w.Code, w.Body)
	}
	h.drip("address=bad")
	h.do(http.MethodGet, "/no/such/path/"+to, nil, nil)

	w := h.do(http.MethodGet, "/metrics", nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("metrics: %d", w.Code)
	}
	body := w.Body.String()
	addr := h.keys[0].TestnetAddress().String()
	stacking := float64(150_000_000_000)
	for _, want := range []string{
		`faucet_drips_total{asset="stx",outcome="success",reason=""} 2`,
		`faucet_drips_total{asset="stx",outcome="error",reason="invalid_request"} 1`,
		`faucet_drips_total{asset="stx",outcome="error",reason="rate_limited"} 0`,
		`faucet_dispensed_ustx_total{tier="default"} 5e+08`,
		`faucet_dispensed_ustx_total{tier="stacking"} ` + formatFloat(stacking),
		`faucet_key_balance_ustx{address="` + addr + `"} ` + formatFloat(float64(testFunding)),
		`faucet_key_available_ustx{address="` + addr + `"}`,
		`faucet_key_nonce{address="` + addr + `",kind="confirmed"} 0`,
		`faucet_key_nonce{address="` + addr + `",kind="next"} 2`,
		`faucet_key_in_flight{address="` + addr + `"} 2`,
		`faucet_key_synced{address="` + addr + `"} 1`,
		`faucet_node_rpc_duration_seconds_count{call="broadcast",result="ok"} 2`,
		`faucet_node_rpc_duration_seconds_bucket{call="info",result="ok",le="+Inf"}`,
		`faucet_http_request_duration_seconds_count{code="200",method="POST",route="/extended/v1/faucets/stx"} 2`,
		`faucet_http_request_duration_seconds_count{code="400",method="POST",route="/extended/v1/faucets/stx"} 1`,
		`faucet_http_request_duration_seconds_count{code="404",method="GET",route="unmatched"} 1`,
		"go_goroutines ",
		"process_",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Routes are patterns, never raw paths.
	if strings.Contains(body, to) {
		t.Error("a raw path or query reached a metric label")
	}
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// TestMetricsSharedAcrossHandlers: New twice with one Metrics (and with none)
// must not panic on duplicate registration.
func TestMetricsSharedAcrossHandlers(t *testing.T) {
	h := newHarness(t, options{})
	cfg := Config{Faucet: h.f, Node: h.client, Metrics: h.metrics}
	New(cfg)
	New(cfg)
	New(Config{Faucet: h.f, Node: h.client})
	New(Config{Faucet: h.f, Node: h.client})
	if w := h.do(http.MethodGet, "/metrics", nil, nil); w.Code != http.StatusOK {
		t.Errorf("metrics: %d", w.Code)
	}
	// A registry that already holds the Go and process collectors (as the
	// default one does) is fine too.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	NewMetrics(reg)
}

func TestNotFound(t *testing.T) {
	h := newHarness(t, options{})
	for _, p := range []string{"/nope", "/extended/v1/faucets/doge", "/extended/v1/status/", "/extended/v2/status", "/assets/nope.js", "/faucet/v1/nope"} {
		w := h.do(http.MethodGet, p, nil, nil)
		if w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
			continue
		}
		if got := strings.TrimSpace(w.Body.String()); got != `{"success":false,"error":"not found"}` {
			t.Errorf("GET %s body = %s", p, got)
		}
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("GET %s Content-Type = %q", p, ct)
		}
		if w.Header().Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("GET %s lacks CORS", p)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	h := newHarness(t, options{})
	cases := []struct{ method, path, allow string }{
		{http.MethodGet, "/extended/v1/faucets/stx", "POST, OPTIONS"},
		{http.MethodPut, "/extended/v1/faucets/stx?address=" + newRecipient(t), "POST, OPTIONS"},
		{http.MethodDelete, "/extended/v1/faucets/stx", "POST, OPTIONS"},
		{http.MethodPost, "/extended/v1/status", "GET, HEAD, OPTIONS"},
		{http.MethodPost, "/extended", "GET, HEAD, OPTIONS"},
		{http.MethodPost, "/extended/", "GET, HEAD, OPTIONS"},
		{http.MethodPost, "/healthz", "GET, HEAD, OPTIONS"},
		{"BREW", "/metrics", "GET, HEAD, OPTIONS"},
	}
	for _, c := range cases {
		w := h.do(c.method, c.path, nil, nil)
		assertError(t, w, http.StatusMethodNotAllowed, "method not allowed")
		if got := w.Header().Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow = %q, want %q", c.method, c.path, got, c.allow)
		}
	}
	if n := h.dn.MempoolSize(); n != 0 {
		t.Errorf("a wrong-method request dripped: mempool %d", n)
	}
}

func TestCORS(t *testing.T) {
	h := newHarness(t, options{})
	w := h.do(http.MethodOptions, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, map[string]string{
		"Origin":                         "https://explorer.example",
		"Access-Control-Request-Method":  "POST",
		"Access-Control-Request-Headers": "content-type, x-custom",
	})
	if w.Code != http.StatusNoContent {
		t.Fatalf("preflight: %d %s", w.Code, w.Body)
	}
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "POST, OPTIONS",
		"Access-Control-Allow-Headers": "content-type, x-custom",
		"Access-Control-Max-Age":       "86400",
	} {
		if got := w.Header().Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if n := h.dn.MempoolSize(); n != 0 {
		t.Errorf("a preflight dripped: mempool %d", n)
	}
	w = h.do(http.MethodOptions, "/extended/v1/status", nil, map[string]string{"Access-Control-Request-Method": "GET"})
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Methods") != "GET, HEAD, OPTIONS" {
		t.Errorf("status preflight: %d %v", w.Code, w.Header())
	}

	// A configured origin replaces the wildcard and varies the cache.
	h2 := New(Config{Faucet: h.f, Node: h.client, CORSOrigin: "https://app.example"})
	rec := httptest.NewRecorder()
	h2.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" || rec.Header().Get("Vary") != "Origin" {
		t.Errorf("configured origin: %v", rec.Header())
	}
}

func TestAccessLog(t *testing.T) {
	h := newHarness(t, options{})
	h.do(http.MethodGet, "/extended/v1/status", nil, map[string]string{"RemoteAddr": "198.51.100.7:5555"})
	var found bool
	for line := range strings.SplitSeq(h.logs.String(), "\n") {
		if !strings.Contains(line, `"msg":"http request"`) {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e["route"] == "/extended/v1/status" {
			found = true
			if e["method"] != "GET" || e["status"] != float64(200) || e["client_ip"] != "198.51.100.7" || e["level"] != "INFO" {
				t.Errorf("access log line = %v", e)
			}
			// Human units ("1.5ms"), not slog JSON's integer nanoseconds.
			if d, ok := e["duration"].(string); !ok {
				t.Errorf("duration = %#v, want a string", e["duration"])
			} else if _, err := time.ParseDuration(d); err != nil {
				t.Errorf("duration %q: %v", d, err)
			}
		}
	}
	if !found {
		t.Errorf("no access log line:\n%s", h.logs)
	}
}

func TestPanicRecovery(t *testing.T) {
	h := newHarness(t, options{})
	s := &server{cfg: Config{CORSOrigin: "*", Clock: clock.RealClock{}}, log: h.log, metrics: h.metrics}
	handler := s.observe(s.cors(s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("secret internal state")
	}))))
	w := httptest.NewRecorder()
	handler.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "secret") {
		t.Errorf("panic answer: %d %s", w.Code, w.Body)
	}
}

// The page is served at / with its assets, same-origin only by CSP.
func TestPageServed(t *testing.T) {
	h := newHarness(t, options{})
	w := h.do(http.MethodGet, "/", nil, nil)
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}
	if !strings.Contains(w.Body.String(), "assets/app.js") {
		t.Error("the page does not load its script")
	}
	if w := h.do(http.MethodGet, "/assets/app.js", nil, nil); w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Type"), "javascript") {
		t.Errorf("GET /assets/app.js: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	if w := h.do(http.MethodPost, "/", nil, nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", w.Code)
	}
}

// A node's 429, and a call held back while its wait lasts, are counted as
// "throttled", apart from the node's errors.
func TestNodeCallResults(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for _, err := range []error{
		nil,
		&node.HTTPError{Client: "node", Call: "info", StatusCode: http.StatusServiceUnavailable},
		&node.HTTPError{Client: "node", Call: "info", StatusCode: http.StatusTooManyRequests},
		fmt.Errorf("poll: %w", &node.ThrottledError{Client: "node", Call: "info", RetryAfter: time.Second}),
	} {
		m.ObserveNodeCall("info", time.Millisecond, err)
	}
	got := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "faucet_node_rpc_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "result" {
					got[lp.GetValue()] = s.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if want := map[string]uint64{"ok": 1, "error": 1, "throttled": 2}; !maps.Equal(got, want) {
		t.Errorf("node calls by result: %v, want %v", got, want)
	}
}
