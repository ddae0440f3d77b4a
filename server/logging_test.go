package server

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"
)

// Probes, scrapes and the page's polling are access-logged at debug, what
// people and clients do at info; a drip's txid is logged as the API
// answers it (0x…), so a user's txid finds its log line.
func TestAccessLogLevelsAndTxIDs(t *testing.T) {
	h := newHarness(t, options{})
	w := h.drip("address=" + newRecipient(t))
	if w.Code != http.StatusOK {
		t.Fatalf("drip: %d %s", w.Code, w.Body)
	}
	txID, _ := decodeMap(t, w.Body.Bytes())["txId"].(string)
	for _, target := range []string{"/faucet/v1/info", "/faucet/v1/drips/" + txID, "/readyz", "/healthz", "/metrics", "/extended/v1/status", "/"} {
		h.do(http.MethodGet, target, nil, nil)
	}

	for route, want := range map[string]string{
		pathInfo:                   "DEBUG",
		pathDrip:                   "DEBUG",
		"/readyz":                  "DEBUG",
		"/healthz":                 "DEBUG",
		"/metrics":                 "DEBUG",
		"/extended/v1/faucets/stx": "INFO",
		"/extended/v1/status":      "INFO",
		"/{$}":                     "INFO",
	} {
		var levels []any
		for _, e := range logEntries(t, h, "http request") {
			if e["route"] == route {
				levels = append(levels, e["level"])
			}
		}
		if len(levels) != 1 || levels[0] != want {
			t.Errorf("access log of %s at %v, want one line at %s", route, levels, want)
		}
	}

	sent := logEntries(t, h, "drip sent")
	if len(sent) != 1 || sent[0]["txid"] != txID {
		t.Errorf("drip sent lines %v, want one with txid %s", sent, txID)
	}
}

// The status endpoint reads the node every second while a page is open: a
// down node is the engine's to report (with back-off), and a failing
// /v2/pox is one warning when it starts and one line when it works again.
func TestStatusNodeFailuresLogOnce(t *testing.T) {
	h := newHarness(t, options{statusTTL: time.Nanosecond})
	levels := func(msg string) []any {
		var out []any
		for _, e := range logEntries(t, h, msg) {
			out = append(out, e["level"])
		}
		return out
	}
	status := func() { h.do(http.MethodGet, "/extended/v1/status", nil, nil) }

	h.dn.SetDown(true)
	for range 5 {
		status()
	}
	if got := levels("status: node info failed"); len(got) != 5 || slices.ContainsFunc(got, func(l any) bool { return l != "DEBUG" }) {
		t.Errorf("node info failures logged at %v, want 5 at DEBUG", got)
	}
	h.dn.SetDown(false)

	h.status.mu.Lock()
	h.status.poxErr = errInjected
	h.status.mu.Unlock()
	for range 5 {
		status()
	}
	if got := levels("status: node pox failed"); len(got) != 5 || got[0] != "WARN" || slices.Contains(got[1:], any("WARN")) {
		t.Errorf("pox failures logged at %v, want one WARN then DEBUG", got)
	}
	h.status.mu.Lock()
	h.status.poxErr = nil
	h.status.mu.Unlock()
	status()
	status()
	if got := levels("status: node pox works again"); len(got) != 1 || got[0] != "INFO" {
		t.Errorf("pox recovery logged at %v, want one INFO", got)
	}
}

// The page polls a drip's status every few seconds: a down node makes
// those lookups fail at debug, the engine reporting the outage itself.
func TestDripStatusNodeDownLogsAtDebug(t *testing.T) {
	h := newHarness(t, options{})
	w := h.drip("address=" + newRecipient(t))
	if w.Code != http.StatusOK {
		t.Fatalf("drip: %d %s", w.Code, w.Body)
	}
	txID, _ := decodeMap(t, w.Body.Bytes())["txId"].(string)
	// Mined and seen by the engine, so its status is asked of the node.
	h.dn.Mine()
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.dn.SetDown(true)
	for range 3 {
		if w := h.do(http.MethodGet, "/faucet/v1/drips/"+txID, nil, nil); w.Code != http.StatusOK {
			t.Fatalf("drip status: %d %s", w.Code, w.Body)
		}
	}
	lines := logEntries(t, h, "drip status: node lookup failed")
	if len(lines) == 0 {
		t.Fatal("no lookup failure logged")
	}
	for _, e := range lines {
		if e["level"] != "DEBUG" {
			t.Errorf("lookup failure at %v, want DEBUG", e["level"])
		}
	}
}
