package devnode

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/internal/logtest"
)

// A block is logged at debug, so a devnet's info log is not a line every
// few seconds; txids are written as the API writes them (0x…).
func TestLogLevelsAndTxIDs(t *testing.T) {
	logs := &logtest.Buffer{}
	h := newHarness(t, Config{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	alice, bob := newWallet(t), newWallet(t)
	h.n.Fund(alice.addr, aliceFunds)
	txid := h.mustAccept(alice.send(t, bob.principal(), 100, 0, 180, ""))
	h.n.Mine()

	var mined, admitted int
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch e["msg"] {
		case "devnode: mined block":
			mined++
			if e["level"] != "DEBUG" {
				t.Errorf("mined block at %v, want DEBUG", e["level"])
			}
		case "devnode: tx admitted":
			admitted++
			if e["txid"] != txid.Hex0x() {
				t.Errorf("txid %v, want %s", e["txid"], txid.Hex0x())
			}
		}
	}
	if mined != 1 || admitted != 1 {
		t.Errorf("%d mined block and %d tx admitted lines, want 1 each:\n%s", mined, admitted, logs)
	}
}
