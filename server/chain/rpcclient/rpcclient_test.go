package rpcclient

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func newClient(t *testing.T, h http.HandlerFunc, opts ...Option) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New("test", srv.URL, Settings{MaxResponseBytes: 64, UserAgent: "ua/1"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The observer's duration is read from the client's clock: a call during
// which the fake clock moves 3 s is observed as 3 s, whatever it took.
func TestObserveUsesTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	type seen struct {
		call string
		d    time.Duration
		err  error
	}
	var got []seen
	c := newClient(t, func(w http.ResponseWriter, _ *http.Request) { clk.Step(3 * time.Second) },
		WithClock(clk), WithObserver(func(call string, d time.Duration, err error) { got = append(got, seen{call, d, err}) }))
	call := func() (err error) {
		defer c.Observe("ping")(&err)
		_, err = c.Do(context.Background(), "ping", http.MethodGet, "/", nil, "")
		return errors.New("boom")
	}
	if err := call(); err == nil {
		t.Fatal("want the call's error")
	}
	if len(got) != 1 || got[0].call != "ping" || got[0].d != 3*time.Second || got[0].err == nil || got[0].err.Error() != "boom" {
		t.Fatalf("observed %+v, want one ping of 3s with its error", got)
	}
}

func TestDoSendsHeadersAndCapsTheBody(t *testing.T) {
	var ua, accept, ct string
	body := "x"
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		ua, accept, ct = r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("Content-Type")
		_, _ = w.Write([]byte(body))
	})
	resp, err := c.Do(context.Background(), "post", http.MethodPost, "/p", []byte("{}"), "application/json")
	if err != nil || resp.Status != 200 || string(resp.Body) != "x" {
		t.Fatalf("Do = %+v, %v", resp, err)
	}
	if ua != "ua/1" || accept != "application/json" || ct != "application/json" {
		t.Errorf("headers: User-Agent %q, Accept %q, Content-Type %q", ua, accept, ct)
	}
	body = strings.Repeat("y", 65)
	_, err = c.Do(context.Background(), "post", http.MethodGet, "/", nil, "")
	var re *ResponseError
	if !errors.As(err, &re) || !IsUnavailable(err) || !strings.HasPrefix(err.Error(), "test post: invalid response: ") {
		t.Fatalf("oversized body: %v, want a *ResponseError naming client and call", err)
	}
}

func TestNewRefusesCredentialsTwiceAndHidesThePassword(t *testing.T) {
	_, err := New("test", "http://u:hunter22@h", Settings{}, []Option{WithCredentialsFile("/x")})
	if err == nil || !strings.HasPrefix(err.Error(), "test: ") {
		t.Fatalf("URL and file: %v", err)
	}
	_, err = New("test", "ftp://u:hunter22@h", Settings{}, nil)
	if err == nil || strings.Contains(err.Error(), "hunter22") {
		t.Fatalf("bad scheme: %v", err)
	}
	c, err := New("test", "http://u:hunter22@h/base/", Settings{}, nil)
	if err != nil || c.URL() != "http://h/base" {
		t.Fatalf("URL() = %v, %v", c, err)
	}
}

func TestCredentialsFileReadAgainOn401(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".cookie")
	if err := os.WriteFile(file, []byte("u:old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var tries int
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		tries++
		if u, p, _ := r.BasicAuth(); u != "u" || p != "new" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}, WithCredentialsFile(file))
	resp, err := c.Do(context.Background(), "c", http.MethodGet, "/", nil, "")
	if err != nil || resp.Status != http.StatusUnauthorized || tries != 1 {
		t.Fatalf("unchanged file: %v, %v after %d tries; want the 401 once", resp, err, tries)
	}
	if err := os.WriteFile(file, []byte("u:new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tries = 0
	resp, err = c.Do(context.Background(), "c", http.MethodGet, "/", nil, "")
	if err != nil || resp.Status != http.StatusOK || tries != 2 {
		t.Fatalf("rewritten file: %v, %v after %d tries; want 200 on the retry", resp, err, tries)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	c2 := newClient(t, func(http.ResponseWriter, *http.Request) {}, WithCredentialsFile(file))
	_, err = c2.Do(context.Background(), "c", http.MethodGet, "/", nil, "")
	var ce *CredentialsError
	if !errors.As(err, &ce) || !errors.Is(err, fs.ErrNotExist) || !IsUnavailable(err) {
		t.Fatalf("missing file: %v, want an unavailable *CredentialsError", err)
	}
}

func TestRedact(t *testing.T) {
	r := &Response{user: "u", pass: "s3cret"}
	token := base64.StdEncoding.EncodeToString([]byte("u:s3cret"))
	if got := r.Redact("echo s3cret and Basic " + token); strings.Contains(got, "s3cret") || strings.Contains(got, token) {
		t.Errorf("Redact left the secret: %q", got)
	}
	short := &Response{user: "u", pass: "abc"}
	if got := short.Redact("abc"); got != "abc" {
		t.Errorf("a password under 4 bytes is left alone, got %q", got)
	}
}

func TestIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("other"), false},
		{context.DeadlineExceeded, true},
		{&HTTPError{StatusCode: 503}, true},
		{&HTTPError{StatusCode: 429}, true},
		{&HTTPError{StatusCode: 404}, false},
		{&TransportError{Err: errors.New("refused")}, true},
		{&TransportError{Err: context.Canceled}, false},
		{fmt.Errorf("wrapped: %w", &ResponseError{Err: errors.New("bad")}), true},
		{&CredentialsError{Err: fs.ErrPermission}, false},
		{&CredentialsError{Err: fs.ErrNotExist}, true},
	} {
		if got := IsUnavailable(tc.err); got != tc.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&HTTPError{Client: "node", Call: "info", StatusCode: 503, Body: "busy"}, "node info: HTTP 503 Service Unavailable: busy"},
		{&TransportError{Client: "btcnode", Call: "getblock", Err: errors.New("refused")}, "btcnode getblock: refused"},
		{&TransportError{Call: "broadcast", Err: errors.New("refused")}, "broadcast: refused"},
		{&CredentialsError{Client: "btcnode", Path: "/c", Err: errors.New("gone")}, "btcnode: credentials file /c: gone"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestNewHTTPErrorReadsRetryAfter(t *testing.T) {
	c := newClient(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("  slow\ndown  "))
	})
	resp, err := c.Do(context.Background(), "info", http.MethodGet, "/", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	he := NewHTTPError("node", "info", resp, 200)
	if he.RetryAfter != 7*time.Second || he.Body != "slow down" || RetryAfter(he) != 7*time.Second {
		t.Fatalf("%+v", he)
	}
	// A 503 holds nothing back: only a 429 asks this client to wait.
	if _, err := c.Do(context.Background(), "info", http.MethodGet, "/", nil, ""); err != nil {
		t.Fatalf("call after a 503: %v", err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 0 ", 0},
		{"-3", 0},
		{"soon", 0},
		{"99999999999", 0}, // does not fit: ignored, not wrapped around
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// After a 429 the client sends nothing until the wait the node asked for
// has passed: calls fail at once with a *ThrottledError that says how long
// is left, counts as unavailable and as never sent.
func TestWaitsOutA429(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	var hits int
	retryAfter := "30"
	c := newClient(t, func(w http.ResponseWriter, _ *http.Request) {
		hits++
		if retryAfter != "none" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(http.StatusTooManyRequests)
	}, WithClock(clk))
	do := func() error {
		_, err := c.Do(context.Background(), "info", http.MethodGet, "/", nil, "")
		return err
	}
	if err := do(); err != nil || hits != 1 {
		t.Fatalf("first call: %v, %d hits; want the 429 answered", err, hits)
	}
	clk.Step(10 * time.Second)
	err := do()
	te, ok := errors.AsType[*ThrottledError](err)
	if !ok || hits != 1 {
		t.Fatalf("call during the wait: %v, %d hits; want a *ThrottledError and nothing sent", err, hits)
	}
	if te.RetryAfter != 20*time.Second || RetryAfter(err) != 20*time.Second || !IsUnavailable(err) || !IsThrottled(err) || !te.NotSent() {
		t.Fatalf("%+v: want 20s left, unavailable, not sent", te)
	}
	if want := "test info: not sent: the node is rate limiting this client (HTTP 429) for 20s more"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	for _, tc := range []struct {
		header string
		wait   time.Duration // how long the next 429 holds calls back
	}{
		{"none", defaultThrottle},
		{"3600", maxThrottle},
		{"5", 5 * time.Second},
	} {
		clk.Step(maxThrottle) // every wait so far is over
		retryAfter = tc.header
		before := hits
		if err := do(); err != nil || hits != before+1 {
			t.Fatalf("Retry-After %s: the call after the wait: %v", tc.header, err)
		}
		clk.Step(tc.wait - time.Millisecond)
		if err := do(); RetryAfter(err) != time.Millisecond || hits != before+1 {
			t.Fatalf("Retry-After %s: 1ms before the end: %v (%d hits)", tc.header, err, hits-before)
		}
		clk.Step(time.Millisecond)
		if err := do(); err != nil || hits != before+2 {
			t.Fatalf("Retry-After %s: at the end: %v (%d hits)", tc.header, err, hits-before)
		}
	}
}

func TestExcerpt(t *testing.T) {
	if got := Excerpt([]byte("a\x00b\xffc"), 100); got != "a b\uFFFDc" {
		t.Errorf("control and invalid bytes: %q", got)
	}
	// "é" is two bytes: a cut inside it backs off to the rune's start.
	if got := Excerpt([]byte("aé"), 2); got != "a…" {
		t.Errorf("cut: %q", got)
	}
}
