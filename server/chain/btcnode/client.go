package btcnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

const (
	// DefaultTimeout bounds each call unless rpcclient.WithTimeout says
	// otherwise. A verbose getblock of a full block takes a loaded node
	// seconds.
	DefaultTimeout = 30 * time.Second
	// DefaultUserAgent is sent unless rpcclient.WithUserAgent overrides it.
	DefaultUserAgent = "faucet-operator-btcnode-client/1"
	// DefaultMaxResponseBytes caps how much of a response body is read
	// unless rpcclient.WithMaxResponseBytes says otherwise. The largest
	// answer we ask for is getblock verbosity 2 of a full 4 MWU block: tens
	// of MiB of JSON.
	DefaultMaxResponseBytes = 64 << 20
	// MaxTxBytes is the largest transaction sendrawtransaction will post:
	// no transaction can be larger than a block (4,000,000 weight units,
	// so at most 4,000,000 bytes).
	MaxTxBytes = 4_000_000
)

// Client talks to one Bitcoin node over JSON-RPC. It is safe for
// concurrent use.
type Client struct {
	rc         *rpcclient.Client
	path       string // what requests are posted to, after rc.URL(): "" or "/"
	ids        atomic.Uint64
	noSmartFee atomic.Bool // the node answered estimatesmartfee with "method not found"
}

// name is the first word of the client's errors.
const name = "btcnode"

// New returns a client for the node at rawURL, e.g.
// "http://user:pass@127.0.0.1:18443". The URL must be http or https with
// a host; a path is kept (a reverse proxy, or Core's /wallet/<name>) and a
// trailing slash dropped. Userinfo, if present, is sent as HTTP Basic auth
// and never appears in URL() or in errors; rpcclient.WithCredentialsFile
// reads it from Core's .cookie instead. Without options a call times out
// after DefaultTimeout and reads at most DefaultMaxResponseBytes, and the
// HTTP client follows no redirects.
func New(rawURL string, opts ...rpcclient.Option) (*Client, error) {
	rc, err := rpcclient.New(name, rawURL, rpcclient.Settings{
		HTTPClient: &http.Client{
			// A redirect would resend the request, and with it the
			// credentials, somewhere else: a node never redirects.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Timeout:          DefaultTimeout,
		UserAgent:        DefaultUserAgent,
		MaxResponseBytes: DefaultMaxResponseBytes,
	}, opts)
	if err != nil {
		return nil, err
	}
	c := &Client{rc: rc}
	// Post to "/" when the URL has no path: a node's RPC lives at the root.
	if u, err := url.Parse(rc.URL()); err == nil && u.Path == "" {
		c.path = "/"
	}
	return c, nil
}

// URL returns the node's URL without userinfo, safe to log.
func (c *Client) URL() string { return c.rc.URL() }

// Call sends one JSON-RPC request and decodes its result into out (nil
// discards it). The observer sees it under the method's name, so keep
// method to a fixed set when the observer feeds metrics.
func (c *Client) Call(ctx context.Context, method string, params []any, out any) (err error) {
	defer c.rc.Observe(method)(&err)
	return c.call(ctx, method, params, out)
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      uint64 `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
}

// call performs one JSON-RPC exchange. "1.0" requests get the same answers
// from btcd and from every Bitcoin Core release (Core answers errors of
// 1.0 requests with HTTP 500 or 404 and the error object in the body).
func (c *Client) call(ctx context.Context, method string, params []any, out any) error {
	if params == nil {
		params = []any{}
	}
	id := c.ids.Add(1)
	body, err := json.Marshal(rpcRequest{JSONRPC: "1.0", ID: id, Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("btcnode %s: encoding request: %w", method, err)
	}
	resp, err := c.rc.Do(ctx, method, http.MethodPost, c.path, body, "application/json")
	if err != nil {
		return err
	}
	return c.decode(method, id, resp, out)
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	ID     json.RawMessage `json:"id"`
}

// decode turns a status and body into the result or a typed error. The
// body is read as JSON-RPC whatever the status: Core sends its error
// objects with 404 and 500.
func (c *Client) decode(method string, id uint64, resp *rpcclient.Response, out any) error {
	if resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden {
		return &AuthError{Method: method, StatusCode: resp.Status}
	}
	red := resp.Redact
	var env rpcResponse
	trimmed := bytes.TrimSpace(resp.Body)
	isEnvelope := len(trimmed) > 0 && trimmed[0] == '{' && json.Unmarshal(trimmed, &env) == nil &&
		(env.Result != nil || env.Error != nil)
	if isEnvelope && !isNull(env.Error) {
		var e struct {
			Code    *int   `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(env.Error, &e); err != nil || e.Code == nil {
			return responseError(method, fmt.Errorf("malformed error object %s", red(excerpt(env.Error, maxBodyExcerpt))))
		}
		return &RPCError{Method: method, Code: *e.Code, Message: red(excerpt([]byte(e.Message), maxMessageExcerpt))}
	}
	if resp.Status/100 != 2 {
		return rpcclient.NewHTTPError(name, method, resp, maxBodyExcerpt)
	}
	if !isEnvelope {
		return responseError(method, fmt.Errorf("not a JSON-RPC response: %s", resp.Excerpt(maxBodyExcerpt)))
	}
	if got := string(bytes.TrimSpace(env.ID)); got != fmt.Sprint(id) {
		return responseError(method, fmt.Errorf("response id %s, want %d", red(excerpt([]byte(got), 40)), id))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(env.Result, out); err != nil {
		return responseError(method, fmt.Errorf("decoding result: %w", err))
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
