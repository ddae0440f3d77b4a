package rpcclient

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// HTTPError is a non-2xx answer that the client has no closer reading of.
type HTTPError struct {
	Client     string // the node client: "node" or "btcnode"
	Call       string
	StatusCode int
	Body       string // sanitised excerpt
	// RetryAfter is the Retry-After header in seconds form, if a proxy sent one.
	RetryAfter time.Duration
}

// NewHTTPError is the *HTTPError of resp, its body cut to maxBody bytes.
func NewHTTPError(client, call string, resp *Response, maxBody int) *HTTPError {
	return &HTTPError{Client: client, Call: call, StatusCode: resp.Status, Body: resp.Excerpt(maxBody), RetryAfter: resp.retryAfter}
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date (RFC 9110), relative to now. 0 when absent, unreadable or
// past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 32); err == nil {
		return time.Duration(max(secs, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("%s: HTTP %d", prefix(e.Client, e.Call), e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		msg += " " + t
	}
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// TransportError is a failure to get an answer at all: DNS, connection
// refused or reset, TLS, timeout, or the body read failing midway.
type TransportError struct {
	Client string
	Call   string
	Err    error
}

func (e *TransportError) Error() string { return prefix(e.Client, e.Call) + ": " + e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// ThrottledError is a call the client did not send: the node answered an
// earlier call 429 and asked to wait, and the wait has not ended. Sending
// anyway would only lengthen a rate limiter's penalty. The request surely
// never reached the node.
type ThrottledError struct {
	Client string
	Call   string
	// RetryAfter is what is left of the node's wait.
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%s: not sent: the node is rate limiting this client (HTTP 429) for %s more",
		prefix(e.Client, e.Call), e.RetryAfter.Round(time.Millisecond))
}

// NotSent says the request never left: a broadcast held back is no
// broadcast in doubt.
func (e *ThrottledError) NotSent() bool { return true }

// IsThrottled reports whether err is the node's rate limiting: a 429
// answer, or a call held back while the wait it asked for lasts.
func IsThrottled(err error) bool {
	if _, ok := errors.AsType[*ThrottledError](err); ok {
		return true
	}
	he, ok := errors.AsType[*HTTPError](err)
	return ok && he.StatusCode == http.StatusTooManyRequests
}

// RetryAfter is how long the node asked the caller to wait, from err: the
// Retry-After of a 429 or 503 answer, or what is left of a wait that held
// a call back (*ThrottledError). 0 when err says nothing of it.
func RetryAfter(err error) time.Duration {
	if te, ok := errors.AsType[*ThrottledError](err); ok {
		return te.RetryAfter
	}
	if he, ok := errors.AsType[*HTTPError](err); ok &&
		(he.StatusCode == http.StatusTooManyRequests || he.StatusCode == http.StatusServiceUnavailable) {
		return he.RetryAfter
	}
	return 0
}

// ResponseError is an answer that is not what the node sends: a proxy's
// page, a truncated or oversized body, a result of the wrong shape, or a
// node version the client does not understand.
type ResponseError struct {
	Client string
	Call   string
	Err    error
}

func (e *ResponseError) Error() string {
	return prefix(e.Client, e.Call) + ": invalid response: " + e.Err.Error()
}
func (e *ResponseError) Unwrap() error { return e.Err }

// CredentialsError is a credentials file that cannot be read or parsed.
// A missing file counts as unavailable: Core deletes its cookie when it
// stops and writes it when it starts.
type CredentialsError struct {
	Client string
	Path   string
	Err    error
}

func (e *CredentialsError) Error() string {
	msg := "credentials file " + e.Path + ": " + e.Err.Error()
	if e.Client != "" {
		msg = e.Client + ": " + msg
	}
	return msg
}
func (e *CredentialsError) Unwrap() error { return e.Err }

// prefix is how an error names its client and call: "node info".
func prefix(client, call string) string {
	if client == "" {
		return call
	}
	return client + " " + call
}

// IsUnavailable reports whether err means the node cannot serve us right
// now, so the caller should retry later or fail over: transport failures
// and timeouts, 5xx and 429 statuses, calls held back by a 429's wait,
// answers not in the node's format, and a missing credentials file. It is false for cancellation by the
// caller (that is not the node's fault) and for every other error; each
// client adds what its node says of itself.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var (
		he *HTTPError
		te *TransportError
		re *ResponseError
		ce *CredentialsError
		th *ThrottledError
	)
	switch {
	case errors.As(err, &th):
		return true
	case errors.As(err, &he):
		return he.StatusCode >= 500 || he.StatusCode == http.StatusTooManyRequests
	case errors.As(err, &te):
		return !errors.Is(err, context.Canceled)
	case errors.As(err, &re):
		return true
	case errors.As(err, &ce):
		return errors.Is(err, fs.ErrNotExist)
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// Excerpt makes b safe to embed in an error: valid UTF-8, control
// characters replaced by spaces, trimmed, and cut to maxLen bytes (on a
// rune boundary, marked with an ellipsis), so that logs stay small and a
// hostile peer cannot stuff them.
func Excerpt(b []byte, maxLen int) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), "\uFFFD"))
	s = strings.TrimSpace(s)
	if len(s) <= maxLen {
		return s
	}
	cut := maxLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
