package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A drip request reaches the faucet through four doors: v1 (query), v3
// (JSON body), the eligibility endpoint and the MCP drip tool. The same
// question must get the same verdict at every door: a bad input refused
// at one is refused at all, a good one refused at none. Where a door
// cannot ask the question it is left out: v3 takes an address and a
// boolean stacking (no size: the incumbent's v3 pays one amount), MCP one
// address and a boolean stacking, v1 reads large/xlarge only on BTC.
func TestDoorsAgree(t *testing.T) {
	h := sbtcHarness(t, options{btc: refusingBTC{t}})
	cs := mcpSession(t, h, nil)
	stx := newRecipient(t)
	const mainnet = "SP3FBR2AGK5H9QBDH3EEN6DF8EK8JY7RX8QJ5SVTE"
	badSum := stx[:len(stx)-1] + map[bool]string{true: "A", false: "B"}[!strings.HasSuffix(stx, "A")]
	const btcAddr = "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"

	type door uint8
	const (
		v1 door = 1 << iota
		v3
		elig
		tool
		all = v1 | v3 | elig | tool
	)
	cases := []struct {
		name     string
		asset    string
		address  []string // nil: none given
		stacking []string
		size     []string // v1 BTC writes large=/xlarge=
		doors    door     // the doors that can ask it
		bad      bool     // refused as bad input
	}{
		{name: "no address", asset: "stx", doors: all, bad: true},
		{name: "empty address", asset: "stx", address: []string{""}, doors: all, bad: true},
		{name: "blank address", asset: "stx", address: []string{"  \n"}, doors: all, bad: true},
		{name: "not an address", asset: "stx", address: []string{"not-an-address"}, doors: all, bad: true},
		{name: "bad checksum", asset: "stx", address: []string{badSum}, doors: all, bad: true},
		{name: "mainnet address", asset: "stx", address: []string{mainnet}, doors: all, bad: true},
		{name: "mainnet contract", asset: "sbtc", address: []string{mainnet + ".some-contract"}, doors: all, bad: true},
		{name: "address twice", asset: "stx", address: []string{stx, newRecipient(t)}, doors: v1 | v3 | elig, bad: true},
		{name: "stacking=maybe", asset: "stx", address: []string{stx}, stacking: []string{"maybe"}, doors: all, bad: true},
		{name: "stacking twice", asset: "stx", address: []string{stx}, stacking: []string{"true", "false"}, doors: v1 | v3 | elig, bad: true},
		{name: "stacking on a token", asset: "sbtc", address: []string{stx}, stacking: []string{"true"}, doors: all, bad: true},
		{name: "stacking on BTC", asset: "btc", address: []string{btcAddr}, stacking: []string{"true"}, doors: all, bad: true},
		{name: "a size on STX", asset: "stx", address: []string{stx}, size: []string{"large"}, doors: elig | tool, bad: true},
		{name: "an unknown size", asset: "btc", address: []string{btcAddr}, size: []string{"huge"}, doors: v1 | elig | tool, bad: true},
		{name: "two sizes", asset: "btc", address: []string{btcAddr}, size: []string{"large", "xlarge"}, doors: v1 | elig, bad: true},
		{name: "a Stacks address for BTC", asset: "btc", address: []string{stx}, doors: all, bad: true},
		{name: "a mainnet BTC address", asset: "btc", address: []string{"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"}, doors: all, bad: true},
		{name: "an unknown asset", asset: "doge", address: []string{stx}, doors: all, bad: true},
		{name: "STX", asset: "stx", address: []string{stx}, doors: all},
		{name: "STX, stacking=false", asset: "stx", address: []string{newRecipient(t)}, stacking: []string{"false"}, doors: all},
		{name: "STX, stacking=true", asset: "stx", address: []string{newRecipient(t)}, stacking: []string{"true"}, doors: all},
		{name: "sBTC, stacking=false", asset: "sbtc", address: []string{newRecipient(t)}, stacking: []string{"false"}, doors: all},
		{name: "sBTC to a contract", asset: "sbtc", address: []string{newRecipient(t) + ".vault"}, doors: all},
	}
	inputs := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			verdicts := map[string]bool{}
			if c.doors&v1 != 0 {
				q := url.Values{"address": c.address, "stacking": c.stacking}
				for _, s := range c.size {
					q.Add(s, "true")
				}
				if len(c.size) > 0 && c.size[0] == "huge" {
					q = url.Values{"address": c.address, "large": {"huge"}}
				}
				w := h.do(http.MethodPost, "/extended/v1/faucets/"+c.asset+"?"+q.Encode(), nil, nil)
				verdicts["v1"] = isInputRefusal(w.Code)
			}
			if c.doors&v3 != 0 {
				var parts []string
				for _, a := range c.address {
					b, _ := json.Marshal(a)
					parts = append(parts, `"address":`+string(b))
				}
				for _, v := range c.stacking {
					if v != "true" && v != "false" {
						v = strconv.Quote(v) // "maybe": a string, no boolean
					}
					parts = append(parts, `"stacking":`+v)
				}
				body := "{" + strings.Join(parts, ",") + "}"
				w := h.do(http.MethodPost, "/extended/v3/faucets/"+c.asset, strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
				verdicts["v3"] = isInputRefusal(w.Code)
			}
			if c.doors&elig != 0 {
				q := url.Values{"asset": {c.asset}, "address": c.address, "stacking": c.stacking, "size": c.size}
				w := h.do(http.MethodGet, pathEligibility+"?"+q.Encode(), nil, nil)
				verdicts["eligibility"] = isInputRefusal(w.Code)
			}
			if c.doors&tool != 0 {
				args := map[string]any{"asset": c.asset}
				if len(c.address) > 0 {
					args["address"] = c.address[0]
				}
				if len(c.stacking) > 0 {
					args["stacking"] = c.stacking[0] // "maybe" is no boolean: the schema refuses it
					if v := c.stacking[0]; v == "true" || v == "false" {
						args["stacking"] = v == "true"
					}
				}
				if len(c.size) > 0 {
					args["size"] = c.size[0]
				}
				verdicts["mcp"] = toolRefusesInput(t, cs, args)
			}
			for d, refused := range verdicts {
				if refused != c.bad {
					t.Errorf("%s: refused as bad input %v, want %v (all doors: %v)", d, refused, c.bad, verdicts)
				}
			}
		})
		inputs++
	}
	t.Logf("%d inputs, each asked at every door that can ask it", inputs)
}

// isInputRefusal: the status of a request refused for what it asks (a bad
// field 400, an unsupported body 415, an unknown asset 404).
func isInputRefusal(code int) bool {
	return code == http.StatusBadRequest || code == http.StatusNotFound || code == http.StatusUnsupportedMediaType
}

// toolRefusesInput calls the MCP drip tool and reports whether it refused
// the call's input: a tool error with an input reason, or arguments the
// tool's schema refuses.
func toolRefusesInput(t *testing.T, cs *mcp.ClientSession, args map[string]any) bool {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: toolRequestDrip, Arguments: args})
	if err != nil {
		return strings.Contains(err.Error(), "invalid") // the SDK's schema validation
	}
	if !res.IsError {
		return false
	}
	text := res.Content[0].(*mcp.TextContent).Text
	var b errorBody
	if err := json.Unmarshal([]byte(text), &b); err != nil {
		// The SDK refuses arguments its input schema does not take.
		t.Logf("schema refusal: %s", text)
		return strings.Contains(text, "validating")
	}
	switch b.Reason {
	case "address_required", "invalid_address", "mainnet_address", "invalid_stacking", "invalid_amount", "unknown_asset":
		return true
	}
	return false
}

// deprecationWarning is the shape the incumbent's own test asks of the v1
// Warning: its first sentence, then text without a quote or backslash
// (RFC 9111's quoted-string).
var deprecationWarning = regexp.MustCompile(`^299 - "Deprecated: Use POST /extended/v3/faucets/([a-z0-9-]+) instead\.[^"\\]*"$`)

// deprecatedFor reports whether warning is the v1 Warning of asset's route.
func deprecatedFor(warning, asset string) bool {
	m := deprecationWarning.FindStringSubmatch(warning)
	return len(m) == 2 && m[1] == asset
}

// The incumbent's v1 tests, as black-box requests: the Warning's shape and
// the refusal of a JSON body, which shows the query form with the
// caller's address and sends nothing.
func TestV1AsTheIncumbentTests(t *testing.T) {
	h := newHarness(t, options{})
	to := newRecipient(t)
	w := h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, nil, nil)
	if w.Code != http.StatusOK || !deprecatedFor(w.Header().Get("Warning"), "stx") {
		t.Fatalf("drip: %d, Warning %q", w.Code, w.Header().Get("Warning"))
	}
	before := h.dn.MempoolSize()
	w = h.do(http.MethodPost, "/extended/v1/faucets/stx", strings.NewReader(`{"address":"`+to+`"}`), map[string]string{"Content-Type": "application/json"})
	var b errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusBadRequest || b.Success || !strings.Contains(b.Error, "POST body is no longer supported") ||
		!strings.Contains(b.Error, "address="+to) || !strings.Contains(b.Help, "curl -X POST '") {
		t.Errorf("a JSON body: %d %+v", w.Code, b)
	}
	if h.dn.MempoolSize() != before {
		t.Error("a refused request sent a transaction")
	}
}
