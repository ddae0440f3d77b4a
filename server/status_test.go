package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/switches"
	clocktesting "k8s.io/utils/clock/testing"
)

// getStatus fetches a status path and decodes it.
func getStatus(t *testing.T, h *harness, path string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	w := h.do(http.MethodGet, path, nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	return w, decodeMap(t, w.Body.Bytes())
}

// epochUnlock is the expected pox_vN_unlock_height for an epoch.
func epochUnlock(t *testing.T, h *harness, epoch string) float64 {
	t.Helper()
	pox, err := h.client.PoX(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start, ok := pox.EpochStart(epoch)
	if !ok {
		t.Fatalf("devnode reports no %s", epoch)
	}
	return float64(start + 1)
}

func TestStatusFromNode(t *testing.T) {
	h := newHarness(t, options{statusTTL: time.Nanosecond})
	h.dn.Mine()
	h.dn.Mine()
	tip := h.dn.Tip()

	w, m := getStatus(t, h, "/extended/v1/status")
	assertKeys(t, m, "server_version", "status", "pox_v1_unlock_height", "pox_v2_unlock_height", "pox_v3_unlock_height", "chain_tip")
	if m["server_version"] != "faucet-operator v0.1.0 (abc1234)" {
		t.Errorf("server_version = %v", m["server_version"])
	}
	if m["status"] != "ready" {
		t.Errorf("status = %v", m["status"])
	}
	for key, epoch := range map[string]string{
		"pox_v1_unlock_height": "Epoch21",
		"pox_v2_unlock_height": "Epoch22",
		"pox_v3_unlock_height": "Epoch25",
	} {
		if want := epochUnlock(t, h, epoch); m[key] != want {
			t.Errorf("%s = %v, want %v (start of %s + 1)", key, m[key], want, epoch)
		}
	}

	ct, ok := m["chain_tip"].(map[string]any)
	if !ok {
		t.Fatalf("chain_tip = %v", m["chain_tip"])
	}
	// devnode reports no microblock state (null), so those keys are absent.
	assertKeys(t, ct, "block_height", "block_hash", "index_block_hash", "burn_block_height")
	ibh, err := node.ComputeIndexBlockHash(tip.Hash, tip.ConsensusHash)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"block_height":      float64(tip.Height),
		"block_hash":        "0x" + tip.Hash,
		"index_block_hash":  "0x" + ibh,
		"burn_block_height": float64(tip.BurnHeight),
	}
	for k, v := range want {
		if ct[k] != v {
			t.Errorf("chain_tip.%s = %v, want %v", k, ct[k], v)
		}
	}
	if "0x"+tip.IndexBlockHash != ct["index_block_hash"] {
		t.Errorf("index_block_hash %v disagrees with devnode's %s", ct["index_block_hash"], tip.IndexBlockHash)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control = %q", cc)
	}

	// The other two paths serve the same document.
	for _, p := range []string{"/extended", "/extended/"} {
		w2 := h.do(http.MethodGet, p, nil, nil)
		if w2.Code != http.StatusOK || w2.Body.String() != w.Body.String() {
			t.Errorf("GET %s = %d %s, want the same body as /extended/v1/status", p, w2.Code, w2.Body)
		}
	}
	// HEAD works and has no body.
	if w := h.do(http.MethodHead, "/extended/v1/status", nil, nil); w.Code != http.StatusOK {
		t.Errorf("HEAD: %d", w.Code)
	}

	// A new block shows up once the cache expires.
	h.dn.Mine()
	_, m = getStatus(t, h, "/extended/v1/status")
	if got := m["chain_tip"].(map[string]any)["block_height"]; got != float64(tip.Height+1) {
		t.Errorf("after mining, block_height = %v, want %d", got, tip.Height+1)
	}
}

func TestStatusMicroblocks(t *testing.T) {
	h := newHarness(t, options{})
	hash := strings.Repeat("ab", 32)
	seq := uint16(3)
	h.status.mutateInfo = func(i *node.Info) { i.UnanchoredTip, i.UnanchoredSeq = &hash, &seq }
	_, m := getStatus(t, h, "/extended/v1/status")
	ct := m["chain_tip"].(map[string]any)
	assertKeys(t, ct, "block_height", "block_hash", "index_block_hash", "microblock_hash", "microblock_sequence", "burn_block_height")
	if ct["microblock_hash"] != "0x"+hash || ct["microblock_sequence"] != float64(3) {
		t.Errorf("microblock fields = %v, %v", ct["microblock_hash"], ct["microblock_sequence"])
	}
}

// TestStatusFieldOrder pins the serialisation to the schema's field order.
func TestStatusFieldOrder(t *testing.T) {
	h := newHarness(t, options{})
	hash := strings.Repeat("cd", 32)
	seq := uint16(0)
	h.status.mutateInfo = func(i *node.Info) { i.UnanchoredTip, i.UnanchoredSeq = &hash, &seq }
	w := h.do(http.MethodGet, "/extended/v1/status", nil, nil)
	body := w.Body.String()
	last := -1
	for _, k := range []string{"server_version", "status", "pox_v1_unlock_height", "pox_v2_unlock_height", "pox_v3_unlock_height",
		"chain_tip", "block_height", "block_hash", "index_block_hash", "microblock_hash", "microblock_sequence", "burn_block_height"} {
		i := strings.Index(body, `"`+k+`"`)
		if i <= last {
			t.Fatalf("%q out of order in %s", k, body)
		}
		last = i
	}
}

func TestStatusNodeUnreachable(t *testing.T) {
	h := newHarness(t, options{})
	h.dn.SetDown(true)
	w, m := getStatus(t, h, "/extended/v1/status")
	assertKeys(t, m, "server_version", "status", "pox_v1_unlock_height", "pox_v2_unlock_height", "pox_v3_unlock_height")
	if m["status"] != "node_unreachable" {
		t.Errorf("status = %v", m["status"])
	}
	for _, k := range []string{"pox_v1_unlock_height", "pox_v2_unlock_height", "pox_v3_unlock_height"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("%s = %v, want null", k, v)
		}
	}
	assertNoInternals(t, h, w.Body.String())
}

func TestStatusSyncing(t *testing.T) {
	h := newHarness(t, options{})
	h.dn.SetSynced(false)
	_, m := getStatus(t, h, "/extended/v1/status")
	if m["status"] != "syncing" {
		t.Errorf("status = %v, want syncing", m["status"])
	}
	if _, ok := m["chain_tip"]; !ok {
		t.Error("a syncing node still has a chain tip")
	}

	// A node too old to report is_fully_synced counts as ready.
	h = newHarness(t, options{})
	h.status.mutateInfo = func(i *node.Info) { i.IsFullySynced = nil }
	if _, m := getStatus(t, h, "/extended/v1/status"); m["status"] != "ready" {
		t.Errorf("without is_fully_synced: status = %v, want ready", m["status"])
	}
}

// TestStatusPoXFailure: /v2/pox failing only nulls the unlock heights.
func TestStatusPoXFailure(t *testing.T) {
	h := newHarness(t, options{})
	h.status.poxErr = errInjected
	_, m := getStatus(t, h, "/extended/v1/status")
	if m["status"] != "ready" {
		t.Errorf("status = %v, want ready", m["status"])
	}
	if _, ok := m["chain_tip"].(map[string]any); !ok {
		t.Errorf("chain_tip missing: %v", m)
	}
	for _, k := range []string{"pox_v1_unlock_height", "pox_v2_unlock_height", "pox_v3_unlock_height"} {
		if v, ok := m[k]; !ok || v != nil {
			t.Errorf("%s = %v, want null", k, v)
		}
	}
}

func TestStatusETag(t *testing.T) {
	h := newHarness(t, options{statusTTL: time.Nanosecond})
	w := h.do(http.MethodGet, "/extended/v1/status", nil, nil)
	etag := w.Header().Get("ETag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 10 {
		t.Fatalf("ETag = %q, want a strong quoted tag", etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		w := h.do(http.MethodGet, "/extended/v1/status", nil, map[string]string{"If-None-Match": inm})
		if w.Code != http.StatusNotModified {
			t.Errorf("If-None-Match %s: %d, want 304", inm, w.Code)
		}
		if w.Body.Len() != 0 {
			t.Errorf("304 with a body: %s", w.Body)
		}
		if w.Header().Get("ETag") != etag {
			t.Errorf("304 ETag = %q", w.Header().Get("ETag"))
		}
	}
	if w := h.do(http.MethodGet, "/extended/v1/status", nil, map[string]string{"If-None-Match": `"nope"`}); w.Code != http.StatusOK {
		t.Errorf("non-matching If-None-Match: %d", w.Code)
	}
	// Any change of the body changes the tag: a 304 is never stale.
	h.dn.Mine()
	w = h.do(http.MethodGet, "/extended/v1/status", nil, map[string]string{"If-None-Match": etag})
	if w.Code != http.StatusOK {
		t.Fatalf("after a new block: %d, want 200", w.Code)
	}
	if w.Header().Get("ETag") == etag {
		t.Error("ETag unchanged after a new block")
	}
}

// X-Faucet-Assets lists the assets that are on now: turning one off or
// on at run time (the switches file) changes the header at once, and
// the ETag with it, so a client revalidating its copy never keeps an
// asset that was turned off.
func TestStatusAssetsFollowTheSwitches(t *testing.T) {
	h := sbtcHarness(t, options{statusTTL: time.Hour})
	w, _ := getStatus(t, h, "/extended/v1/status")
	if got := w.Header().Get(headerFaucets); got != "stx, sbtc" {
		t.Fatalf("%s = %q, want \"stx, sbtc\"", headerFaucets, got)
	}
	allOn := w.Header().Get("ETag")
	for _, c := range []struct {
		off  []string
		want string
	}{{[]string{"stx"}, "sbtc"}, {[]string{"sbtc"}, "stx"}, {[]string{"stx", "sbtc"}, ""}} {
		h.switches.Store(switches.State{DisabledAssets: c.off})
		w := h.do(http.MethodGet, "/extended/v1/status", nil, map[string]string{"If-None-Match": allOn})
		if w.Code != http.StatusOK || w.Header().Get(headerFaucets) != c.want || w.Header().Get("ETag") == allOn {
			t.Errorf("%v off: %d, %s %q (want %q), ETag %s (all on: %s)", c.off, w.Code, headerFaucets,
				w.Header().Get(headerFaucets), c.want, w.Header().Get("ETag"), allOn)
		}
	}
	h.switches.Store(switches.State{SuspendedAssets: []string{"sbtc"}})
	w = h.do(http.MethodGet, "/extended/v1/status", nil, map[string]string{"If-None-Match": allOn})
	if w.Code != http.StatusNotModified || w.Header().Get(headerFaucets) != "stx, sbtc" {
		t.Errorf("back on, sBTC suspended (still offered): %d, %s %q", w.Code, headerFaucets, w.Header().Get(headerFaucets))
	}
}

// TestStatusSharedFetch: a burst of concurrent requests costs the node one
// /v2/info and one /v2/pox.
func TestStatusSharedFetch(t *testing.T) {
	h := newHarness(t, options{statusTTL: time.Minute})
	h.status.delay = 50 * time.Millisecond
	srv := httptest.NewServer(h.h)
	defer srv.Close()

	const n = 50
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resp, err := http.Get(srv.URL + "/extended/v1/status")
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			bodies[i], _ = io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := h.status.infoCalls.Load(); got != 1 {
		t.Errorf("node Info calls = %d, want 1", got)
	}
	if got := h.status.poxCalls.Load(); got != 1 {
		t.Errorf("node PoX calls = %d, want 1", got)
	}
	for i := range bodies {
		if !bytes.Equal(bodies[i], bodies[0]) {
			t.Fatalf("response %d differs: %s vs %s", i, bodies[i], bodies[0])
		}
	}
}

// TestStatusCacheTTL: reads are reused within the TTL and refreshed after.
func TestStatusCacheTTL(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, options{statusTTL: 30 * time.Millisecond, clock: clk})
	for range 5 {
		getStatus(t, h, "/extended/v1/status")
	}
	clk.Step(29 * time.Millisecond)
	getStatus(t, h, "/extended/v1/status")
	if got := h.status.infoCalls.Load(); got != 1 {
		t.Errorf("Info calls within the TTL = %d, want 1", got)
	}
	clk.Step(time.Millisecond)
	getStatus(t, h, "/extended/v1/status")
	if got := h.status.infoCalls.Load(); got != 2 {
		t.Errorf("Info calls after the TTL = %d, want 2", got)
	}
}
