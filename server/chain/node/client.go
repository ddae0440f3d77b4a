package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Call names passed to the observer. They are stable and low-cardinality so
// they can be used directly as metric labels.
const (
	CallInfo        = "info"
	CallPoX         = "pox"
	CallAccount     = "account"
	CallBroadcast   = "broadcast"
	CallFeeTransfer = "fee_transfer"
	CallTransaction = "transaction"
	CallMempoolTx   = "mempool_tx"
)

const (
	// DefaultTimeout bounds each call unless WithTimeout says otherwise.
	DefaultTimeout = 10 * time.Second
	// DefaultUserAgent is sent unless WithUserAgent overrides it.
	DefaultUserAgent = "faucet-operator-node-client/1"
	// MaxResponseBytes caps how much of a response body is read. The largest
	// body we expect (/v2/pox) is a few KiB, so this only stops runaway peers.
	MaxResponseBytes = 4 << 20
	// MaxTxBytes is the node's MAX_PAYLOAD_LEN (1 + 16 MiB); larger posts are
	// refused by the node, so we refuse them before sending.
	MaxTxBytes = 1 + 16<<20
)

// Client talks to one Stacks node. It is safe for concurrent use.
type Client struct {
	base      string // scheme://host[/prefix], no userinfo, no trailing slash
	user      *url.Userinfo
	hc        *http.Client
	timeout   time.Duration
	observer  func(call string, d time.Duration, err error)
	userAgent string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client used for requests. Its own Timeout, if
// any, still applies in addition to the per-call timeout. Nil is ignored.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithTimeout sets the per-call timeout, applied through the request context
// so it also bounds reading the body. A value <= 0 disables it, leaving only
// the caller's context.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithObserver registers fn to be called once after every RPC with the call
// name (one of the Call* constants), its duration and its final error.
func WithObserver(fn func(call string, d time.Duration, err error)) Option {
	return func(c *Client) { c.observer = fn }
}

// WithUserAgent overrides the User-Agent header. Empty is ignored.
func WithUserAgent(ua string) Option {
	return func(c *Client) {
		if ua != "" {
			c.userAgent = ua
		}
	}
}

// New returns a client for the node at baseURL, e.g. "http://localhost:20443".
// The URL must be http or https with a host; a path prefix is kept (for
// reverse proxies) and a trailing slash is dropped. Userinfo, if present, is
// sent as HTTP basic auth and never appears in URL() or in errors.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		// url.Error repeats the input, which may hold a password: keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("node: invalid base URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("node: invalid base URL: scheme must be http or https, got %q", u.Scheme)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, errors.New("node: invalid base URL: host is required")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("node: invalid base URL: query and fragment are not allowed")
	}
	c := &Client{
		base:      u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"),
		user:      u.User,
		hc:        &http.Client{Transport: sharedTransport},
		timeout:   DefaultTimeout,
		userAgent: DefaultUserAgent,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
	return c, nil
}

// sharedTransport keeps connections to the node open for a faucet under
// load: net/http's default keeps 2 idle per host, so with dozens of drips
// in flight every call past the second opened (and closed) a connection
// of its own, paying a handshake and leaving sockets in TIME_WAIT.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 128
	return t
}()

// URL returns the base URL without userinfo, safe to log.
func (c *Client) URL() string { return c.base }

// Info fetches GET /v2/info.
func (c *Client) Info(ctx context.Context) (info *Info, err error) {
	defer c.observe(CallInfo, time.Now(), &err)
	info = new(Info)
	if err := c.getJSON(ctx, CallInfo, "/v2/info", info); err != nil {
		return nil, err
	}
	return info, nil
}

// PoX fetches GET /v2/pox.
func (c *Client) PoX(ctx context.Context) (pox *PoXInfo, err error) {
	defer c.observe(CallPoX, time.Now(), &err)
	pox = new(PoXInfo)
	if err := c.getJSON(ctx, CallPoX, "/v2/pox", pox); err != nil {
		return nil, err
	}
	return pox, nil
}

// Account fetches GET /v2/accounts/{principal}?proof=0. The node's default
// is to include Merkle proofs, which we never use, hence proof=0. An unknown
// account is not an error: the node answers with zero balance and nonce 0.
func (c *Client) Account(ctx context.Context, principal string) (acct *Account, err error) {
	if principal == "" {
		return nil, errors.New("node account: empty principal")
	}
	defer c.observe(CallAccount, time.Now(), &err)
	acct = new(Account)
	path := "/v2/accounts/" + url.PathEscape(principal) + "?proof=0"
	if err := c.getJSON(ctx, CallAccount, path, acct); err != nil {
		return nil, err
	}
	return acct, nil
}

// Broadcast posts a consensus-serialised transaction to POST /v2/transactions
// and returns its txid as 64 lowercase hex characters without 0x.
//
// A nil error does not prove mempool admission: the node also answers 200
// for transactions it already has and for ones it drops as "problematic".
func (c *Client) Broadcast(ctx context.Context, rawTx []byte) (txid string, err error) {
	if len(rawTx) == 0 {
		return "", errors.New("node broadcast: empty transaction")
	}
	if len(rawTx) > MaxTxBytes {
		return "", fmt.Errorf("node broadcast: transaction is %d bytes, node limit is %d", len(rawTx), MaxTxBytes)
	}
	defer c.observe(CallBroadcast, time.Now(), &err)
	status, hdr, body, err := c.do(ctx, CallBroadcast, http.MethodPost, "/v2/transactions", rawTx, "application/octet-stream")
	if err != nil {
		return "", err
	}
	if status/100 != 2 {
		return "", statusError(CallBroadcast, status, hdr, body)
	}
	txid, err = parseTxIDBody(body)
	if err != nil {
		return "", &ResponseError{Call: CallBroadcast, Err: err}
	}
	return txid, nil
}

// TransferFeeRate fetches GET /v2/fees/transfer: a fee rate in µSTX per byte
// (not a total fee). The node's mempool also requires fee >= tx length.
func (c *Client) TransferFeeRate(ctx context.Context) (rate uint64, err error) {
	defer c.observe(CallFeeTransfer, time.Now(), &err)
	if err := c.getJSON(ctx, CallFeeTransfer, "/v2/fees/transfer", &rate); err != nil {
		return 0, err
	}
	return rate, nil
}

func (c *Client) observe(call string, start time.Time, errp *error) {
	if c.observer != nil {
		c.observer(call, time.Since(start), *errp)
	}
}

func (c *Client) getJSON(ctx context.Context, call, path string, v any) error {
	status, hdr, body, err := c.do(ctx, call, http.MethodGet, path, nil, "")
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return statusError(call, status, hdr, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &ResponseError{Call: call, Err: err}
	}
	return nil
}

// do performs one request and returns the status, headers and the body
// (at most MaxResponseBytes). Only transport-level failures are errors here.
func (c *Client) do(ctx context.Context, call, method, path string, payload []byte, contentType string) (int, http.Header, []byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("node %s: building request: %w", call, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.user != nil {
		pw, _ := c.user.Password()
		req.SetBasicAuth(c.user.Username(), pw)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, nil, &TransportError{Call: call, Err: scrubURLError(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return 0, nil, nil, &TransportError{Call: call, Err: fmt.Errorf("reading response: %w", err)}
	}
	if len(body) > MaxResponseBytes {
		return 0, nil, nil, &ResponseError{Call: call, Err: fmt.Errorf("response body exceeds %d bytes", MaxResponseBytes)}
	}
	return resp.StatusCode, resp.Header, body, nil
}

// scrubURLError removes userinfo from a *url.Error's URL. Our own requests
// never carry userinfo, but a redirect target chosen by the server might.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.User != nil {
			u.User = nil
			ue.URL = u.String()
		}
	}
	return err
}

// parseTxIDBody accepts the node's bare JSON string and, leniently, an
// unquoted or 0x-prefixed txid.
func parseTxIDBody(body []byte) (string, error) {
	s := strings.TrimSpace(string(body))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal([]byte(s), &s); err != nil {
			return "", fmt.Errorf("decoding txid: %w", err)
		}
	}
	id, err := NormalizeTxID(s)
	if err != nil {
		return "", fmt.Errorf("unexpected success body %q: %w", excerpt([]byte(s)), err)
	}
	return id, nil
}

// NormalizeTxID trims spaces and an optional 0x prefix, lower-cases, and
// checks that s is exactly 32 bytes of hex.
func NormalizeTxID(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		s = s[2:]
	}
	if len(s) != 64 {
		return "", fmt.Errorf("txid must be 64 hex characters, got %d", len(s))
	}
	if !isHex(s) {
		return "", errors.New("txid is not hex")
	}
	return strings.ToLower(s), nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
