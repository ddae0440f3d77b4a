package rpcclient

import (
	"bytes"
	"context"
	"encoding/base64"
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

	"k8s.io/utils/clock"
)

// Client sends one client's requests to one node. It is safe for
// concurrent use.
type Client struct {
	name     string // the node client's package, the first word of its errors
	base     string // scheme://host[:port][/path], no userinfo, no trailing slash
	creds    *credentials
	settings Settings
	// quietUntil (Unix nanoseconds) ends the wait a 429 asked for; until
	// then calls are refused here (*ThrottledError), not sent.
	quietUntil atomic.Int64
}

// Bounds of the wait after a 429: a gateway that sends no Retry-After is
// given a short pause, so a poll loop does not hammer it; one that asks for
// longer than maxThrottle is asked again after that, so a proxy's odd
// value cannot silence the node for an hour.
const (
	defaultThrottle = 2 * time.Second
	maxThrottle     = time.Minute
)

// New returns the HTTP half of the client called name (its errors start
// with it) for the node at rawURL, e.g. "http://user:pass@host:port".
// The URL must be http or https with a host; a path is kept (a reverse
// proxy's prefix, or Core's /wallet/<name>) and a trailing slash
// dropped. Userinfo, if present, is sent as HTTP Basic auth and never
// appears in URL() or in errors. defaults are the client's Settings
// before opts; a nil Clock there or in opts means the real clock.
func New(name, rawURL string, defaults Settings, opts []Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		// url.Error repeats the input, which may hold a password: keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s: invalid URL: %w", name, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%s: invalid URL: scheme must be http or https, got %q", name, u.Scheme)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, fmt.Errorf("%s: invalid URL: host is required", name)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%s: invalid URL: query and fragment are not allowed", name)
	}
	c := &Client{name: name, base: u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), settings: defaults}
	for _, opt := range opts {
		if opt != nil {
			opt(&c.settings)
		}
	}
	if c.settings.Clock == nil {
		c.settings.Clock = clock.RealClock{}
	}
	if c.settings.HTTPClient == nil {
		c.settings.HTTPClient = http.DefaultClient
	}
	if c.settings.Header.Get("Authorization") != "" && (u.User != nil || c.settings.CredentialsFile != "") {
		return nil, fmt.Errorf("%s: an Authorization header and Basic auth credentials together: use one", name)
	}
	switch {
	case u.User != nil && c.settings.CredentialsFile != "":
		return nil, fmt.Errorf("%s: credentials both in the URL and in a file: use one", name)
	case u.User != nil:
		pw, _ := u.User.Password()
		c.creds = &credentials{user: u.User.Username(), pass: pw, loaded: true}
	case c.settings.CredentialsFile != "":
		c.creds = &credentials{file: c.settings.CredentialsFile}
	default:
		c.creds = &credentials{loaded: true} // no auth: a proxy in front may add it
	}
	return c, nil
}

// URL returns the node's URL without userinfo, safe to log.
func (c *Client) URL() string { return c.base }

// Name is the first word of the client's errors.
func (c *Client) Name() string { return c.name }

// Observe starts timing call; the function it returns reports the call
// with its final error to the observer. Use it as
// `defer c.Observe(call)(&err)` with a named error result.
func (c *Client) Observe(call string) func(errp *error) {
	obs := c.settings.Observer
	if obs == nil {
		return func(*error) {}
	}
	clk := c.settings.Clock
	start := clk.Now()
	return func(errp *error) { obs(call, clk.Since(start), *errp) }
}

// Response is a node's answer: its status, headers and body (at most
// MaxResponseBytes), and the credentials that were sent, for Redact.
type Response struct {
	Status int
	Header http.Header
	Body   []byte

	user, pass string
	header     http.Header // the extra headers sent (WithHeader)
	retryAfter time.Duration
}

// Redact removes the password, the Basic auth token and the values of
// the extra headers sent with the request from text the node sent back,
// in case a proxy echoes the request: nothing a client reports may carry
// them. Secrets shorter than 4 bytes are left alone (replacing every "a"
// would wreck the text).
func (r *Response) Redact(s string) string {
	for _, vs := range r.header {
		for _, v := range vs {
			if len(v) >= 4 {
				s = strings.ReplaceAll(s, v, "[redacted]")
			}
		}
	}
	if r.user == "" && r.pass == "" {
		return s
	}
	s = strings.ReplaceAll(s, base64.StdEncoding.EncodeToString([]byte(r.user+":"+r.pass)), "[redacted]")
	if len(r.pass) >= 4 {
		s = strings.ReplaceAll(s, r.pass, "[redacted]")
	}
	return s
}

// Excerpt is the body made safe to quote in an error (see Excerpt), at
// most maxLen bytes, redacted before it is cut: no secret is left in part
// at the cut.
func (r *Response) Excerpt(maxLen int) string {
	return Excerpt([]byte(r.Redact(string(r.Body))), maxLen)
}

// Do sends one request for call to the node's URL followed by path, with
// payload (nil for none) of contentType, and returns the answer whatever
// its status. When the credentials come from a file and the node answers
// 401, the file is read again and, if it changed, the request is sent
// once more: Core writes a new cookie at every start. Errors are failures
// to get an answer: *TransportError, *ResponseError for an answer over
// the size cap, *CredentialsError, and *ThrottledError for a call held
// back: after a 429 the client sends nothing to the node until the wait it
// asked for (Retry-After, else defaultThrottle) has passed.
func (c *Client) Do(ctx context.Context, call, method, path string, payload []byte, contentType string) (*Response, error) {
	if wait := c.throttled(); wait > 0 {
		return nil, &ThrottledError{Client: c.name, Call: call, RetryAfter: wait}
	}
	user, pass, err := c.creds.get(c.name, false)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, call, method, path, payload, contentType, user, pass)
	if err == nil && resp.Status == http.StatusTooManyRequests {
		c.throttle(resp.retryAfter)
	}
	if err != nil || resp.Status != http.StatusUnauthorized || c.creds.file == "" {
		return resp, err
	}
	if nu, np, rerr := c.creds.get(c.name, true); rerr == nil && (nu != user || np != pass) {
		return c.send(ctx, call, method, path, payload, contentType, nu, np)
	}
	// The file could not be read again, or holds the same credentials:
	// the 401 is the answer.
	return resp, nil
}

// throttled is what is left of the wait a 429 asked for (0 when none).
func (c *Client) throttled() time.Duration {
	until := c.quietUntil.Load()
	if until == 0 {
		return 0
	}
	return time.Duration(until - c.settings.Clock.Now().UnixNano())
}

// throttle starts the wait after a 429: retryAfter as the node asked,
// within (0, maxThrottle], or defaultThrottle. A later 429 replaces it.
func (c *Client) throttle(retryAfter time.Duration) {
	if retryAfter <= 0 {
		retryAfter = defaultThrottle
	}
	c.quietUntil.Store(c.settings.Clock.Now().Add(min(retryAfter, maxThrottle)).UnixNano())
}

// send performs one exchange. Only failures to get an answer are errors.
func (c *Client) send(ctx context.Context, call, method, path string, payload []byte, contentType, user, pass string) (*Response, error) {
	s := &c.settings
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: building request: %w", c.name, call, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", s.UserAgent)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for name, vs := range s.Header {
		req.Header[name] = append([]string(nil), vs...)
	}
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := s.HTTPClient.Do(req)
	if err != nil {
		return nil, &TransportError{Client: c.name, Call: call, Err: scrubURLError(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.MaxResponseBytes+1))
	if err != nil {
		return nil, &TransportError{Client: c.name, Call: call, Err: fmt.Errorf("reading response: %w", err)}
	}
	if int64(len(body)) > s.MaxResponseBytes {
		return nil, &ResponseError{Client: c.name, Call: call, Err: fmt.Errorf("response body exceeds %d bytes", s.MaxResponseBytes)}
	}
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: body, user: user, pass: pass, header: s.Header}
	if v := resp.Header.Get("Retry-After"); v != "" {
		out.retryAfter = parseRetryAfter(v, s.Clock.Now())
	}
	return out, nil
}

// scrubURLError removes userinfo from a *url.Error's URL. Our own
// requests never carry userinfo, but a redirect target chosen by the
// server might.
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

// credentials are the Basic auth pair: fixed (from the URL, or none), or
// read from a file and read again on demand.
type credentials struct {
	file string

	mu         sync.Mutex
	loaded     bool
	user, pass string
}

// get returns the pair, reading the file the first time and when reload
// is set.
func (cr *credentials) get(client string, reload bool) (user, pass string, err error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.file == "" || (cr.loaded && !reload) {
		return cr.user, cr.pass, nil
	}
	data, err := os.ReadFile(cr.file)
	if err != nil {
		return "", "", &CredentialsError{Client: client, Path: cr.file, Err: err}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	u, p, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
	if !ok || u == "" {
		// Never quote the content: it is the secret.
		return "", "", &CredentialsError{Client: client, Path: cr.file, Err: errors.New(`want "user:password" on the first line`)}
	}
	cr.user, cr.pass, cr.loaded = u, p, true
	return u, p, nil
}
