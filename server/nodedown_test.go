package server

import (
	"context"
	"net/http"
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
}
