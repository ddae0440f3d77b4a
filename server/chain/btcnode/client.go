package btcnode

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultTimeout bounds each call unless WithTimeout says otherwise. A
	// verbose getblock of a full block takes a loaded node seconds.
	DefaultTimeout = 30 * time.Second
	// DefaultUserAgent is sent unless WithUserAgent overrides it.
	DefaultUserAgent = "faucet-operator-btcnode-client/1"
	// DefaultMaxResponseBytes caps how much of a response body is read
	// unless WithMaxResponseBytes says otherwise. The largest answer we ask
	// for is getblock verbosity 2 of a full 4 MWU block: tens of MiB of JSON.
	DefaultMaxResponseBytes = 64 << 20
	// MaxTxBytes is the largest transaction sendrawtransaction will post:
	// no transaction can be larger than a block (4,000,000 weight units,
	// so at most 4,000,000 bytes).
	MaxTxBytes = 4_000_000
)

// Client talks to one Bitcoin node over JSON-RPC. It is safe for
// concurrent use.
type Client struct {
	base        string // scheme://host[:port][/path], no userinfo
	endpoint    string // what requests are posted to: base, or base + "/"
	creds       *credentials
	hc          *http.Client
	timeout     time.Duration
	observer    func(call string, d time.Duration, err error)
	userAgent   string
	maxResponse int64
	ids         atomic.Uint64
	noSmartFee  atomic.Bool // the node answered estimatesmartfee with "method not found"
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client used for requests. Its own Timeout,
// if any, still applies in addition to the per-call timeout. Nil is
// ignored. The default client follows no redirects.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithTimeout sets the per-call timeout, applied through the request
// context so it also bounds reading the body. A value <= 0 disables it,
// leaving only the caller's context.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// WithObserver registers fn to be called once after every call with the
// call's name (a Call* constant, or the method given to Call), its
// duration and its final error.
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

// WithMaxResponseBytes overrides DefaultMaxResponseBytes; values <= 0 are
// ignored.
func WithMaxResponseBytes(n int64) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxResponse = n
		}
	}
}

// WithCredentialsFile reads the RPC user and password from a file holding
// "user:password" on its first line: the format of Bitcoin Core's .cookie,
// which Core rewrites with a new password at every start. The file is read
// at the first call and again whenever the node answers 401, so a node
// restart does not need a faucet restart. A URL with userinfo and this
// option together are refused by New.
func WithCredentialsFile(path string) Option {
	return func(c *Client) { c.creds = &credentials{file: path} }
}

// New returns a client for the node at rawURL, e.g.
// "http://user:pass@127.0.0.1:18443". The URL must be http or https with
// a host; a path is kept (a reverse proxy, or Core's /wallet/<name>) and a
// trailing slash dropped. Userinfo, if present, is sent as HTTP Basic auth
// and never appears in URL() or in errors.
func New(rawURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		// url.Error repeats the input, which may hold a password: keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("btcnode: invalid URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("btcnode: invalid URL: scheme must be http or https, got %q", u.Scheme)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, errors.New("btcnode: invalid URL: host is required")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("btcnode: invalid URL: query and fragment are not allowed")
	}
	c := &Client{
		base: u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"),
		hc: &http.Client{
			// A redirect would resend the request, and with it the
			// credentials, somewhere else: a node never redirects.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		timeout:     DefaultTimeout,
		userAgent:   DefaultUserAgent,
		maxResponse: DefaultMaxResponseBytes,
	}
	c.endpoint = c.base
	if u.EscapedPath() == "" || u.EscapedPath() == "/" {
		c.endpoint += "/"
	}
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
	if u.User != nil {
		if c.creds != nil {
			return nil, errors.New("btcnode: credentials both in the URL and in a file: use one")
		}
		pw, _ := u.User.Password()
		c.creds = &credentials{user: u.User.Username(), pass: pw, loaded: true}
	}
	if c.creds == nil {
		c.creds = &credentials{loaded: true} // no auth: a proxy in front may add it
	}
	return c, nil
}

// URL returns the node's URL without userinfo, safe to log.
func (c *Client) URL() string { return c.base }

// Call sends one JSON-RPC request and decodes its result into out (nil
// discards it). The observer sees it under the method's name, so keep
// method to a fixed set when the observer feeds metrics.
func (c *Client) Call(ctx context.Context, method string, params []any, out any) (err error) {
	defer c.observe(method, time.Now(), &err)
	return c.call(ctx, method, params, out)
}

func (c *Client) observe(call string, start time.Time, errp *error) {
	if c.observer != nil {
		c.observer(call, time.Since(start), *errp)
	}
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
	user, pass, err := c.creds.get(false)
	if err != nil {
		return err
	}
	status, resp, err := c.post(ctx, method, body, user, pass)
	if err != nil {
		return err
	}
	if status == http.StatusUnauthorized && c.creds.file != "" {
		// Core writes a new cookie at every start: read it again, and retry
		// once if it changed.
		nu, np, rerr := c.creds.get(true)
		if rerr == nil && (nu != user || np != pass) {
			user, pass = nu, np
			if status, resp, err = c.post(ctx, method, body, user, pass); err != nil {
				return err
			}
		}
	}
	return c.decode(method, id, status, resp, out, user, pass)
}

// post sends body and returns the status and the body read (at most
// maxResponse bytes). Only failures to get a response are errors here.
func (c *Client) post(ctx context.Context, method string, body []byte, user, pass string) (int, []byte, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("btcnode %s: building request: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, &TransportError{Method: method, Err: scrubURLError(err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxResponse+1))
	if err != nil {
		return 0, nil, &TransportError{Method: method, Err: fmt.Errorf("reading response: %w", err)}
	}
	if int64(len(data)) > c.maxResponse {
		return 0, nil, &ResponseError{Method: method, Err: fmt.Errorf("response body exceeds %d bytes", c.maxResponse)}
	}
	return resp.StatusCode, data, nil
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	ID     json.RawMessage `json:"id"`
}

// decode turns a status and body into the result or a typed error. The
// body is read as JSON-RPC whatever the status: Core sends its error
// objects with 404 and 500.
func (c *Client) decode(method string, id uint64, status int, body []byte, out any, user, pass string) error {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return &AuthError{Method: method, StatusCode: status}
	}
	red := redactor(user, pass)
	var env rpcResponse
	trimmed := bytes.TrimSpace(body)
	isEnvelope := len(trimmed) > 0 && trimmed[0] == '{' && json.Unmarshal(trimmed, &env) == nil &&
		(env.Result != nil || env.Error != nil)
	if isEnvelope && !isNull(env.Error) {
		var e struct {
			Code    *int   `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(env.Error, &e); err != nil || e.Code == nil {
			return &ResponseError{Method: method, Err: fmt.Errorf("malformed error object %s", red(excerpt(env.Error, maxBodyExcerpt)))}
		}
		return &RPCError{Method: method, Code: *e.Code, Message: red(excerpt([]byte(e.Message), maxMessageExcerpt))}
	}
	if status/100 != 2 {
		return &HTTPError{Method: method, StatusCode: status, Body: red(excerpt(body, maxBodyExcerpt))}
	}
	if !isEnvelope {
		return &ResponseError{Method: method, Err: fmt.Errorf("not a JSON-RPC response: %s", red(excerpt(body, maxBodyExcerpt)))}
	}
	if got := string(bytes.TrimSpace(env.ID)); got != fmt.Sprint(id) {
		return &ResponseError{Method: method, Err: fmt.Errorf("response id %s, want %d", red(excerpt([]byte(got), 40)), id)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(env.Result, out); err != nil {
		return &ResponseError{Method: method, Err: fmt.Errorf("decoding result: %w", err)}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// redactor returns a function removing the password and the Basic auth
// token from text the node sent back, in case a proxy echoes the request:
// nothing the client reports may carry them. Passwords shorter than 4
// bytes are left alone (replacing every "a" would wreck the message).
func redactor(user, pass string) func(string) string {
	token := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return func(s string) string {
		if user == "" && pass == "" {
			return s
		}
		s = strings.ReplaceAll(s, token, "[redacted]")
		if len(pass) >= 4 {
			s = strings.ReplaceAll(s, pass, "[redacted]")
		}
		return s
	}
}

// scrubURLError removes userinfo from a *url.Error's URL. Our own
// requests never carry userinfo, but a redirect target might.
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

// credentials are the Basic auth pair: fixed (from the URL), or read from
// a file and re-read on demand.
type credentials struct {
	file string

	mu         sync.Mutex
	loaded     bool
	user, pass string
}

// get returns the pair, reading the file the first time and when reload
// is set.
func (cr *credentials) get(reload bool) (user, pass string, err error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.file == "" || (cr.loaded && !reload) {
		return cr.user, cr.pass, nil
	}
	data, err := os.ReadFile(cr.file)
	if err != nil {
		return "", "", &CredentialsError{Path: cr.file, Err: err}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	u, p, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
	if !ok || u == "" {
		// Never quote the content: it is the secret.
		return "", "", &CredentialsError{Path: cr.file, Err: errors.New(`want "user:password" on the first line`)}
	}
	cr.user, cr.pass, cr.loaded = u, p, true
	return u, p, nil
}
