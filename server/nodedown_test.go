package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
)

// nodeFollowWithin is how soon readiness, the node gauge and the status
// must follow the node going away or coming back (issue 21); the engine
// polls every second.
const nodeFollowWithin = 3 * time.Second

// runEngine runs the engine's poll loop, as `faucet serve` does, until the
// test ends.
func runEngine(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine Run: %v", err)
		}
	})
}

// nodeView is what each part of the server says about the node.
type nodeView struct {
	readyz int  // /readyz status code
	engine bool // the engine's NodeUp
	gauge  float64
	status any // /extended/v1/status "status"
}

func (h *harness) nodeView(t *testing.T) nodeView {
	t.Helper()
	code, _ := readyz(t, h)
	w := h.do(http.MethodGet, "/extended/v1/status", nil, nil)
	return nodeView{
		readyz: code,
		engine: h.f.NodeUp(),
		gauge:  counterValue(t, h.reg, "faucet_node_up", map[string]string{}),
		status: decodeMap(t, w.Body.Bytes())["status"],
	}
}

func (v nodeView) down() bool {
	return v.readyz == http.StatusServiceUnavailable && !v.engine && v.gauge == 0 && v.status == "node_unreachable"
}

func (v nodeView) up() bool {
	return v.readyz == http.StatusOK && v.engine && v.gauge == 1 && v.status == "ready"
}

// Readiness, the engine's NodeUp, faucet_node_up and the status endpoint
// agree within seconds when the node goes away and when it comes back,
// not after the chain-id cache's 30 s.
func TestReadinessFollowsTheNode(t *testing.T) {
	h := newHarness(t, options{})
	runEngine(t, h)
	var last nodeView
	waitView := func(what string, want func(nodeView) bool) {
		t.Helper()
		err := eventually.WaitEvery(t, nodeFollowWithin, 50*time.Millisecond, func() bool {
			last = h.nodeView(t)
			return want(last)
		})
		if err != nil {
			t.Fatalf("%s: %v; last seen %+v", what, err, last)
		}
	}
	// Start-up is not what is measured: the first poll syncs the keys.
	if err := eventually.Wait(t, 30*time.Second, func() bool { return h.nodeView(t).up() }); err != nil {
		t.Fatalf("never ready: %v", err)
	}

	h.dn.SetDown(true)
	waitView("node stopped", nodeView.down)
	h.dn.SetDown(false)
	waitView("node back", nodeView.up)

	// The log tells the story once: the outage, its end, and readiness
	// lost and regained, however often the probes and polls asked.
	count := func(msg string) int { return len(logEntries(t, h, msg)) }
	for msg, want := range map[string]int{
		"stacks node unreachable; drips fail until it answers": 1,
		"stacks node reachable again":                          1,
		"faucet not ready":                                     1,
		"faucet ready":                                         2,
	} {
		if n := count(msg); n != want {
			t.Errorf("%q logged %d times, want %d", msg, n, want)
		}
	}
	if back := logEntries(t, h, "stacks node reachable again"); len(back) == 1 {
		if d, err := time.ParseDuration(fmt.Sprint(back[0]["down_for"])); err != nil || d <= 0 || d > 2*nodeFollowWithin {
			t.Errorf("down_for %v (%v)", back[0]["down_for"], err)
		}
	}
}

// logEntries decodes the harness's JSON log lines with msg exactly msg.
func logEntries(t *testing.T, h *harness, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(h.logs.String(), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if e["msg"] == msg {
			out = append(out, e)
		}
	}
	return out
}
