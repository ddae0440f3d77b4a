package server

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// The Model Context Protocol endpoint: the faucet's public API as tools an
// agent calls (streamable HTTP, stateless, JSON answers, so any replica
// answers any request and no session needs affinity). Every tool goes
// through the same switches, abuse checks and rate limits as the HTTP
// routes: an agent and a curl command asking for one address share one
// limit. Tool errors are the API's: the text is the JSON error body of
// the v1 routes ({error, reason, …}).
const pathMCP = "/mcp"

// MCP tool names.
const (
	toolRequestDrip = "request_drip"
	toolDripStatus  = "get_drip_status"
	toolInfo        = "get_faucet_info"
	toolEligibility = "check_eligibility"
)

// headerMCPClientIP carries the client address (as the middleware found
// it) from the HTTP request into the tool handlers, which see only its
// headers. Whatever a client sends under this name is dropped first.
const headerMCPClientIP = "X-Faucet-Internal-Client-Ip"

// mcpTools are the tools' handlers, over the server's admission.
type mcpTools struct{ s *server }

// mcpHandler builds the MCP server and its HTTP handler.
func mcpHandler(s *server) http.Handler {
	tools := mcpTools{s}
	srv := mcp.NewServer(&mcp.Implementation{
		Name: "stacks-testnet-faucet", Title: "Stacks testnet faucet", Version: s.cfg.Version,
	}, &mcp.ServerOptions{
		Instructions: "Testnet STX, SIP-010 tokens and test-network BTC for developers and agents. " +
			"Call " + toolInfo + " to see the assets, amounts and limits; " + toolEligibility + " to learn whether a drip " +
			"would be admitted now and when the next is allowed; " + toolRequestDrip + " to ask for one; " + toolDripStatus +
			" to follow it until it is confirmed. The coins have no value.",
	})
	// The assets this faucet is configured for (one turned off at run time
	// stays listed and answers as the API does).
	assets := s.assetNames()
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)}
	mcp.AddTool(srv, &mcp.Tool{
		Name:  toolRequestDrip,
		Title: "Request testnet coins",
		Description: "Send a faucet drip of an asset to an address: a Stacks testnet address (ST…, SN…, or a contract principal) " +
			"for stx and tokens, a test-network Bitcoin address for btc. Answers once the transaction is broadcast, before " +
			"it is mined; follow it with " + toolDripStatus + ". Limited per address and per client like the HTTP API.",
		InputSchema: dripSchema(assets),
		Annotations: &mcp.ToolAnnotations{Title: "Request testnet coins", DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
	}, tools.drip)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        toolDripStatus,
		Title:       "Follow a drip",
		Description: "Where a drip of this faucet is: pending, confirmed (with its block), failed, or unknown; the same document as GET /faucet/v1/drips/{txid}.",
		InputSchema: objectSchema(map[string]*jsonschema.Schema{
			"txid": {Type: "string", Description: "The drip's transaction id: 0x and 64 hex digits for Stacks, 64 hex digits for Bitcoin.", MinLength: ptr(64), MaxLength: ptr(66)},
		}, "txid"),
		Annotations: readOnly,
	}, tools.dripStatus)
	mcp.AddTool(srv, &mcp.Tool{
		Name:        toolInfo,
		Title:       "Faucet information",
		Description: "The faucet's assets with their amounts, limits, state and funding, its network and chain tip, and whether a proof of work is asked; the same document as GET /faucet/v1/info.",
		InputSchema: objectSchema(map[string]*jsonschema.Schema{}),
		Annotations: readOnly,
	}, tools.info)
	mcp.AddTool(srv, &mcp.Tool{
		Name:  toolEligibility,
		Title: "Check eligibility",
		Description: "Whether a drip of an asset to an address would be admitted now, its amount, the limits it counts against and, " +
			"when it would be refused, why and when the next is allowed. Reserves nothing.",
		InputSchema: eligibilitySchema(assets),
		Annotations: readOnly,
	}, tools.eligibility)

	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: s.log.With("component", "mcp"),
		// The tools are the public HTTP API's, reachable with curl from
		// anywhere; the rebinding check would only refuse a local
		// reverse proxy that keeps the public Host.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        64 << 10,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		r.Header.Del(headerMCPClientIP)
		if ri := infoFrom(r.Context()); ri != nil && ri.clientIP.IsValid() {
			r.Header.Set(headerMCPClientIP, ri.clientIP.String())
		}
		h.ServeHTTP(w, r)
	})
}

func ptr[T any](v T) *T { return &v }

// objectSchema is a closed object schema: these properties, no others.
func objectSchema(props map[string]*jsonschema.Schema, required ...string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: props, Required: required, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
}

// assetSchema names the assets in examples, not an enum: an agent that
// asks for another gets the API's unknown_asset answer, which lists them,
// rather than a schema error.
func assetSchema(assets []string) *jsonschema.Schema {
	examples := make([]any, len(assets))
	for i, a := range assets {
		examples[i] = a
	}
	return &jsonschema.Schema{Type: "string", Pattern: "^[a-z][-a-z0-9]{0,31}$", Examples: examples,
		Description: "The asset, by name: " + strings.Join(assets, ", ") + " on this faucet."}
}

var addressSchema = &jsonschema.Schema{Type: "string", MinLength: ptr(1), MaxLength: ptr(200),
	Description: "The recipient: a Stacks testnet address or contract principal (ST…, SN…) for stx and tokens; a Bitcoin address of the faucet's test network for btc (on regtest bcrt1…, tb1…, m…, n… or 2…)."}

// dripSchema is request_drip's input: the drip's question and, when a
// proof of work is asked, its answer.
func dripSchema(assets []string) *jsonschema.Schema {
	s := eligibilitySchema(assets)
	s.Properties["pow_challenge"] = &jsonschema.Schema{Type: "string", MaxLength: ptr(1024),
		Description: "When the faucet asks anonymous clients for a proof of work: a challenge from POST /faucet/v1/challenge."}
	s.Properties["pow_solution"] = &jsonschema.Schema{Type: "string", MaxLength: ptr(128), Description: "The solution of pow_challenge."}
	return s
}

// eligibilitySchema is a drip's question: what, to whom, which amount.
func eligibilitySchema(assets []string) *jsonschema.Schema {
	return objectSchema(map[string]*jsonschema.Schema{
		"asset":    assetSchema(assets),
		"address":  addressSchema,
		"stacking": {Type: "boolean", Description: "stx only: the PoX minimum plus 20 % instead of the default amount, enough to stack."},
		"size":     {Type: "string", Enum: []any{"default", "large", "xlarge"}, Description: "btc only: the drip's size (default 0.0001 BTC, large, xlarge)."},
	}, "asset", "address")
}

type mcpDripInput struct {
	Asset        string `json:"asset"`
	Address      string `json:"address"`
	Stacking     bool   `json:"stacking,omitempty"`
	Size         string `json:"size,omitempty"`
	PoWChallenge string `json:"pow_challenge,omitempty"`
	PoWSolution  string `json:"pow_solution,omitempty"`
}

// mcpDripOutput is a sent drip.
type mcpDripOutput struct {
	Asset   string `json:"asset"`
	Address string `json:"address"`
	// TxID is as the chain's tools print it: 0x-prefixed for Stacks,
	// bare hex for Bitcoin.
	TxID      string `json:"txid"`
	Chain     string `json:"chain"`
	Amount    string `json:"amount"`
	StatusURL string `json:"status_url"`
}

type mcpEligibilityInput struct {
	Asset    string `json:"asset"`
	Address  string `json:"address"`
	Stacking bool   `json:"stacking,omitempty"`
	Size     string `json:"size,omitempty"`
}

type mcpTxInput struct {
	TxID string `json:"txid"`
}

// toolError is a refused or failed call: its text is the v1 error body.
type toolError struct{ body errorBody }

func (e *toolError) Error() string {
	b, err := marshalJSON(e.body)
	if err != nil {
		return e.body.Error
	}
	return string(b)
}

func badInput(msg, reason string) error {
	return &toolError{errorBody{Error: msg, Reason: reason}}
}

// mcpRequest is the HTTP request a tool call stands for: its headers
// (Authorization, the proof of work) and client address, as the drip
// routes read them.
func mcpRequest(ctx context.Context, req *mcp.CallToolRequest) *http.Request {
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, pathMCP, nil)
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		r.Header = req.Extra.Header.Clone()
	}
	ri := &reqInfo{route: pathMCP}
	if ip, err := netip.ParseAddr(r.Header.Get(headerMCPClientIP)); err == nil {
		ri.clientIP = ip
	}
	return r.WithContext(context.WithValue(ctx, reqInfoKey{}, ri))
}

// question is the call's drip as typed, in the form every door judges.
func (in mcpDripInput) question() question {
	q := question{address: []string{in.Address}}
	if in.Stacking {
		q.stacking = []string{"true"}
	}
	if in.Size != "" {
		q.size = []string{in.Size}
	}
	return q
}

func (t mcpTools) drip(ctx context.Context, req *mcp.CallToolRequest, in mcpDripInput) (*mcp.CallToolResult, mcpDripOutput, error) {
	var out mcpDripOutput
	name := faucet.Asset(in.Asset).OrSTX()
	if !t.s.knownAsset(name) {
		return nil, out, badInput("this faucet does not drip "+shortName(in.Asset)+"; it drips "+strings.Join(t.s.assetNames(), ", "), "unknown_asset")
	}
	a, ok := t.s.lookup(name)
	if !ok || t.s.turnedOff(name) {
		f := t.s.assetOff(name)
		t.s.metrics.observeDrip(name, f.reason)
		return nil, out, &toolError{f.body(t.s.cfg.Clock.Now())}
	}
	k, bad := a.judge(in.question())
	if bad != nil {
		t.s.metrics.observeDrip(name, reasonInvalidRequest)
		return nil, out, &toolError{bad.body}
	}
	r := mcpRequest(ctx, req)
	if in.PoWChallenge != "" || in.PoWSolution != "" {
		r.Header.Set(headerChallenge, in.PoWChallenge)
		r.Header.Set(headerSolution, in.PoWSolution)
	}
	p, fail := t.s.dispense(nil, r, k)
	if fail != nil {
		return nil, out, &toolError{fail.body(t.s.cfg.Clock.Now())}
	}
	txid := a.display(p)
	return nil, mcpDripOutput{Asset: string(a.name), Address: k.text, TxID: txid, Chain: a.chain,
		Amount: strconv.FormatUint(p.amount, 10), StatusURL: strings.Replace(pathDrip, "{txid}", txid, 1)}, nil
}

func (t mcpTools) dripStatus(ctx context.Context, _ *mcp.CallToolRequest, in mcpTxInput) (*mcp.CallToolResult, dripStatusBody, error) {
	id, err := stacks.ParseTxID(strings.TrimSpace(in.TxID))
	if err != nil {
		return nil, dripStatusBody{}, badInput("invalid txid: "+err.Error(), "invalid_txid")
	}
	return nil, t.s.dripStatus(ctx, id), nil
}

func (t mcpTools) info(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, infoBody, error) {
	body, err := t.s.info(ctx)
	if err != nil {
		return nil, infoBody{}, badInput("the request ended before the faucet answered", "canceled")
	}
	return nil, body, nil
}

func (t mcpTools) eligibility(ctx context.Context, req *mcp.CallToolRequest, in mcpEligibilityInput) (*mcp.CallToolResult, eligibilityBody, error) {
	q := mcpDripInput{Address: in.Address, Stacking: in.Stacking, Size: in.Size}.question()
	body, bad := t.s.eligibility(ctx, mcpRequest(ctx, req), faucet.Asset(in.Asset).OrSTX(), q)
	if bad != nil {
		return nil, eligibilityBody{}, &toolError{bad.body}
	}
	return nil, body, nil
}
