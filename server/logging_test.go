package server

import (
	"net/http"
	"testing"
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
