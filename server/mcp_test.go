package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// mcpSession connects the Go SDK's client to the harness over real HTTP.
func mcpSession(t *testing.T, h *harness, hdr http.Header) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(h.h)
	t.Cleanup(srv.Close)
	httpClient := srv.Client()
	if hdr != nil {
		httpClient.Transport = headerTransport{hdr, http.DefaultTransport}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "faucet-test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL + pathMCP, HTTPClient: httpClient, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type headerTransport struct {
	hdr  http.Header
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.hdr {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
}

// call calls a tool and returns its structured content, or the API error
// body of a tool error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, *errorBody) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if res.IsError {
		var b errorBody
		text := res.Content[0].(*mcp.TextContent).Text
		if err := json.Unmarshal([]byte(text), &b); err != nil || b.Reason == "" {
			t.Fatalf("%s: a tool error that is not the API's body: %s", tool, text)
		}
		return nil, &b
	}
	var out map[string]any
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, raw, err)
	}
	return out, nil
}

// The MCP tools: listed with exact input schemas; a drip of STX and of
// sBTC followed to confirmed; a limit refusal as a tool error sharing the
// HTTP routes' limit; eligibility; the switches.
func TestMCPTools(t *testing.T) {
	h := sbtcHarness(t, options{limits: guard.Limits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}}})
	cs := mcpSession(t, h, http.Header{"X-Forwarded-For": {"203.0.113.9"}, headerMCPClientIP: {"10.9.9.9"}})

	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		schema, _ := json.Marshal(tl.InputSchema)
		if !strings.Contains(string(schema), `"additionalProperties":false`) && !strings.Contains(string(schema), `"additionalProperties":{"not":{}}`) {
			t.Errorf("%s: input schema is open: %s", tl.Name, schema)
		}
		if tl.Name == toolRequestDrip && (!strings.Contains(string(schema), `"examples":["stx","sbtc"]`) || !strings.Contains(string(schema), `"required":["asset","address"]`)) {
			t.Errorf("request_drip schema %s", schema)
		}
		if tl.OutputSchema == nil {
			t.Errorf("%s has no output schema", tl.Name)
		}
	}
	slices.Sort(names)
	if want := []string{toolEligibility, toolDripStatus, toolInfo, toolRequestDrip}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	info, _ := call(t, cs, toolInfo, map[string]any{})
	if assets, _ := info["assets"].([]any); len(assets) != 2 || info["network"] != "testnet" {
		t.Fatalf("info %v", info)
	}

	a, b := newRecipient(t), newRecipient(t)
	el, _ := call(t, cs, toolEligibility, map[string]any{"asset": "stx", "address": a})
	if el["eligible"] != true || el["amount"] != uintString(h.f.DefaultAmount()) {
		t.Fatalf("eligibility before: %v", el)
	}
	stx, _ := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": a})
	sbtc, _ := call(t, cs, toolRequestDrip, map[string]any{"asset": "sbtc", "address": a})
	for _, d := range []map[string]any{stx, sbtc} {
		if txid, _ := d["txid"].(string); len(txid) != 66 || d["chain"] != "stacks" || d["address"] != a {
			t.Fatalf("drip %v", d)
		}
	}
	// The second over MCP, then one over HTTP: both refused by one limit.
	_, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": a})
	if fail == nil || fail.Reason != reasonRateLimited || fail.RetryAfterSeconds <= 0 || fail.NextAllowedAt == "" {
		t.Fatalf("second MCP drip: %+v", fail)
	}
	if w := h.drip("address=" + a); w.Code != http.StatusTooManyRequests {
		t.Fatalf("HTTP drip after the MCP drip: %d %s", w.Code, w.Body)
	}
	if w := h.drip("address=" + b); w.Code != http.StatusOK {
		t.Fatalf("HTTP drip: %d %s", w.Code, w.Body)
	}
	if _, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": b}); fail == nil || fail.Reason != reasonRateLimited {
		t.Fatalf("MCP drip after the HTTP drip: %+v", fail)
	}
	if el, _ := call(t, cs, toolEligibility, map[string]any{"asset": "stx", "address": b}); el["eligible"] != false || el["reason"] != reasonRateLimited {
		t.Fatalf("eligibility after: %v", el)
	}

	// Followed to confirmed.
	if st, _ := call(t, cs, toolDripStatus, map[string]any{"txid": stx["txid"]}); st["state"] != dripPending {
		t.Fatalf("status before a block: %v", st)
	}
	h.dn.Mine()
	if err := h.f.Sync(t.Context()); err != nil { // the engine's next block sync
		t.Fatal(err)
	}
	for _, d := range []map[string]any{stx, sbtc} {
		if st, _ := call(t, cs, toolDripStatus, map[string]any{"txid": d["txid"]}); st["state"] != dripConfirmed || st["recipient"] != a {
			t.Fatalf("status of %v: %v", d["txid"], st)
		}
	}

	// Refusals are the API's.
	for _, c := range []struct {
		args   map[string]any
		reason string
	}{
		{map[string]any{"asset": "stx", "address": "nope"}, "invalid_address"},
		{map[string]any{"asset": "stx", "address": "SP2J6ZY48GV1EZ5V2V5RB9MP66SW86PYKKNRV9EJ7"}, "mainnet_address"},
		{map[string]any{"asset": "sbtc", "address": newRecipient(t), "size": "large"}, "invalid_amount"},
	} {
		if _, fail := call(t, cs, toolRequestDrip, c.args); fail == nil || fail.Reason != c.reason {
			t.Errorf("%v: %+v, want %s", c.args, fail, c.reason)
		}
	}
	// Assets this faucet does not drip: the API's answers, which name the
	// ones it does.
	if _, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "doge", "address": a}); fail == nil || fail.Reason != "unknown_asset" || !strings.Contains(fail.Error, "it drips stx, sbtc") {
		t.Errorf("doge: %+v", fail)
	}
	if _, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "btc", "address": "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"}); fail == nil || fail.Reason != reasonNotConfigured {
		t.Errorf("btc without a node: %+v", fail)
	}
	h.switches.Store(switches.State{DisabledAssets: []string{"stx"}})
	if _, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": newRecipient(t)}); fail == nil || fail.Error != "STX faucet is not available" {
		t.Errorf("STX off: %+v", fail)
	}
	// The client address is the middleware's (no trusted proxy here): a
	// header sent under the internal name is not believed.
	if !strings.Contains(h.logs.String(), `"client_ip":"127.0.0.1","amount":500000000`) {
		t.Errorf("the MCP drip is not logged with the peer's address:\n%s", h.logs.String())
	}
	if strings.Contains(h.logs.String(), "10.9.9.9") {
		t.Error("a client-sent internal header set the client address")
	}
}

// --mcp=false: no /mcp route.
func TestMCPOff(t *testing.T) {
	h := newHarness(t, options{})
	h2 := New(Config{Faucet: h.f, Node: h.client})
	for _, handler := range []http.Handler{h2} {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodPost, pathMCP, strings.NewReader(`{}`)))
		if w.Code != http.StatusNotFound {
			t.Errorf("/mcp with MCP off: %d %s", w.Code, w.Body)
		}
	}
}

// BTC over MCP: info with the BTC entry and its nodes validates against
// the tool's output schema, a drip to a wallet's tb1… address pays, and
// its status follows it into a block.
func TestMCPBTC(t *testing.T) {
	e := newBTCEnv(t, options{})
	cs := mcpSession(t, e.harness, nil)
	info, _ := call(t, cs, toolInfo, map[string]any{})
	if assets, _ := info["assets"].([]any); len(assets) != 2 {
		t.Fatalf("info %v", info)
	}
	to := testnetForms(t, regtestAddresses(t))["p2wpkh"]
	d, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "btc", "address": to, "size": "large"})
	if fail != nil || d["chain"] != "bitcoin" || d["amount"] != "1000000" || !strings.HasPrefix(d["address"].(string), "bcrt1q") {
		t.Fatalf("btc drip: %v %+v", d, fail)
	}
	if _, err := e.client.Generate(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := eventually.Wait(t, 10*time.Second, func() bool {
		st, _ = call(t, cs, toolDripStatus, map[string]any{"txid": d["txid"]})
		return st["state"] == dripConfirmed
	}); err != nil {
		t.Fatalf("status %v", st)
	}
	if el, _ := call(t, cs, toolEligibility, map[string]any{"asset": "btc", "address": to, "size": "xlarge"}); el["eligible"] != true || el["amount"] != "50000000" {
		t.Fatalf("eligibility %v", el)
	}
}

// The abuse checks over MCP: a proof of work is asked for in the tool
// error (with the challenge endpoint) and taken in the tool's input; an
// API token in the MCP client's Authorization header skips it; a denied
// client is refused; eligibility says the drip needs a proof of work.
func TestMCPAbuseChecks(t *testing.T) {
	token := "agent-token-0123456789abcdef"
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("agents "+token+" 100/1h 3/1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, options{guard: &guard.Config{TokensFile: file, PoW: guard.PoWConfig{Difficulty: 10}}})
	cs := mcpSession(t, h, nil)
	to := newRecipient(t)
	_, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": to})
	if fail == nil || fail.Reason != "challenge_required" || !strings.Contains(fail.Error, "POST /faucet/v1/challenge") {
		t.Fatalf("no proof of work: %+v", fail)
	}
	el, _ := call(t, cs, toolEligibility, map[string]any{"asset": "stx", "address": to})
	if pow, _ := el["proof_of_work"].(map[string]any); el["eligible"] != true || pow["difficulty"] != float64(10) || pow["challenge_url"] != pathChallenge {
		t.Fatalf("eligibility %v", el)
	}
	hdr := solvedHeaders(t, h)
	d, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": to,
		"pow_challenge": hdr[headerChallenge], "pow_solution": hdr[headerSolution]})
	if fail != nil || d["chain"] != "stacks" {
		t.Fatalf("solved: %v %+v", d, fail)
	}
	if _, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": newRecipient(t),
		"pow_challenge": hdr[headerChallenge], "pow_solution": hdr[headerSolution]}); fail == nil || fail.Reason != "challenge_replayed" {
		t.Fatalf("replayed: %+v", fail)
	}
	agent := mcpSession(t, h, http.Header{"Authorization": {"Bearer " + token}})
	if d, fail := call(t, agent, toolRequestDrip, map[string]any{"asset": "stx", "address": newRecipient(t)}); fail != nil || d["chain"] != "stacks" {
		t.Fatalf("with the API token: %v %+v", d, fail)
	}
	wrong := mcpSession(t, h, http.Header{"Authorization": {"Bearer not-a-token-of-this-faucet"}})
	if _, fail := call(t, wrong, toolRequestDrip, map[string]any{"asset": "stx", "address": newRecipient(t)}); fail == nil || fail.Reason != "token_invalid" {
		t.Fatalf("a wrong token: %+v", fail)
	}
}

// The deny list sees an MCP client's own address, whatever it claims in
// the internal header.
func TestMCPDenyList(t *testing.T) {
	h := newHarness(t, options{guard: &guard.Config{Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	cs := mcpSession(t, h, http.Header{headerMCPClientIP: {"192.0.2.55"}})
	if _, fail := call(t, cs, toolRequestDrip, map[string]any{"asset": "stx", "address": newRecipient(t)}); fail == nil || fail.Reason != "ip_denied" {
		t.Fatalf("denied client: %+v", fail)
	}
	if el, _ := call(t, cs, toolEligibility, map[string]any{"asset": "stx", "address": newRecipient(t)}); el["eligible"] != false || el["reason"] != "ip_denied" {
		t.Fatalf("eligibility of a denied client: %v", el)
	}
}
