// Package rpcclient is the HTTP half that the repository's two node
// clients share: node (the Stacks node's REST API) and btcnode (a Bitcoin
// node's JSON-RPC). It holds their options, the exchange of one request
// for a size-capped answer under a per-call timeout, HTTP Basic auth (from
// the URL, or from a credentials file read again when the node answers
// 401), the observer of each call, and the errors that say whether the
// node could be reached at all. What a node answers, and what it means,
// stays with each client.
package rpcclient

import (
	"net/http"
	"time"

	"k8s.io/utils/clock"
)

// Settings are what a caller may choose for a client. Each client passes
// its own defaults to New; the options override them.
type Settings struct {
	// HTTPClient sends the requests. Its own Timeout, if any, still applies
	// in addition to the per-call Timeout.
	HTTPClient *http.Client
	// Timeout bounds each call, through the request context so that it
	// also bounds reading the body; <= 0 leaves only the caller's context.
	Timeout time.Duration
	// Observer, if set, is called once after every call with the call's
	// name, its duration and its final error.
	Observer func(call string, d time.Duration, err error)
	// UserAgent is the User-Agent header.
	UserAgent string
	// MaxResponseBytes caps how much of an answer is read; a longer one is
	// a *ResponseError.
	MaxResponseBytes int64
	// CredentialsFile holds "user:password" on its first line; see
	// WithCredentialsFile.
	CredentialsFile string
	// Clock times the calls for the observer; nil means clock.RealClock{}.
	Clock clock.PassiveClock
	// Header is sent with every request (an API key of a gateway such as
	// Hiro's); see WithHeader.
	Header http.Header
}

// Option configures a client.
type Option func(*Settings)

// WithHTTPClient sets the HTTP client used for requests. Its own Timeout,
// if any, still applies in addition to the per-call timeout. Nil is
// ignored.
func WithHTTPClient(hc *http.Client) Option {
	return func(s *Settings) {
		if hc != nil {
			s.HTTPClient = hc
		}
	}
}

// WithTimeout sets the per-call timeout, applied through the request
// context so it also bounds reading the body. A value <= 0 disables it,
// leaving only the caller's context.
func WithTimeout(d time.Duration) Option {
	return func(s *Settings) { s.Timeout = d }
}

// WithObserver registers fn to be called once after every call with the
// call's name (one of the client's Call* constants, or the method given
// to btcnode's Call), its duration and its final error.
func WithObserver(fn func(call string, d time.Duration, err error)) Option {
	return func(s *Settings) { s.Observer = fn }
}

// WithUserAgent overrides the User-Agent header. Empty is ignored.
func WithUserAgent(ua string) Option {
	return func(s *Settings) {
		if ua != "" {
			s.UserAgent = ua
		}
	}
}

// WithMaxResponseBytes overrides the client's cap on the size of an
// answer; values <= 0 are ignored.
func WithMaxResponseBytes(n int64) Option {
	return func(s *Settings) {
		if n > 0 {
			s.MaxResponseBytes = n
		}
	}
}

// WithCredentialsFile reads the user and password for HTTP Basic auth
// from a file holding "user:password" on its first line: the format of
// Bitcoin Core's .cookie, which Core rewrites with a new password at
// every start. The file is read at the first call and again whenever the
// node answers 401, so a node restart does not need a faucet restart. A
// URL with userinfo and this option together are refused by New.
func WithCredentialsFile(path string) Option {
	return func(s *Settings) { s.CredentialsFile = path }
}

// WithClock sets the clock that times calls for the observer; nil means
// the real clock.
func WithClock(c clock.PassiveClock) Option {
	return func(s *Settings) { s.Clock = c }
}
