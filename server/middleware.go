package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
)

// observe is the outermost layer: it resolves the client IP once, then
// writes one access-log line and one metric sample per request.
func (s *server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.cfg.Clock.Now()
		ri := &reqInfo{route: routeUnmatched, clientIP: clientIP(r, s.cfg.TrustedProxyHops)}
		r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri))
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		d := s.cfg.Clock.Since(start)
		status := rec.statusCode()
		method := methodLabel(r.Method)
		s.metrics.observeHTTP(ri.route, method, status, d)

		s.log.LogAttrs(r.Context(), accessLogLevel(ri.route), "http request",
			slog.String("method", method),
			slog.String("route", ri.route),
			slog.String("path", r.URL.Path), // no query: it is user input of any size
			slog.Int("status", status),
			// "1.5ms" in either log format: slog's JSON writes a
			// Duration as integer nanoseconds.
			slog.String("duration", d.String()),
			slog.Int64("bytes", rec.bytes),
			slog.String("client_ip", addrString(ri.clientIP)),
		)
	})
}

// accessLogLevel is info for what people and clients do, debug for what
// machines repeat: probes, scrapes and the page's polling of the faucet's
// facts and of a drip's progress would drown the log.
func accessLogLevel(route string) slog.Level {
	switch route {
	case "/healthz", "/readyz", "/metrics", pathInfo, pathDrip:
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// cors allows any page (or the configured origin) to call the API. Bearer
// tokens are sent by scripts on purpose; the page's session cookie counts
// only on requests from the faucet's own origin (identity.Service.Person),
// and credentials are never allowed cross-origin, so a wildcard is safe.
func (s *server) cors(next http.Handler) http.Handler {
	origin := s.cfg.CORSOrigin
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		if origin != "*" {
			h.Add("Vary", "Origin")
		}
		// Let browser clients read the rate-limit wait and state, the v1
		// deprecation warning and the status ETag.
		h.Set("Access-Control-Expose-Headers", "Retry-After, RateLimit, RateLimit-Policy, Warning, WWW-Authenticate, ETag, "+headerFaucets)
		next.ServeHTTP(w, r)
	})
}

// recoverPanics turns a handler panic into a logged 500 with a JSON body
// instead of a dropped connection, and never shows the panic to the client.
func (s *server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if rec, ok := w.(*recorder); !ok || !rec.wrote {
				writeError(w, http.StatusInternalServerError, errorBody{Error: "internal error", Reason: reasonInternal})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// recorder captures the status and size of a response.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote && code >= 200 {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// WriteString writes s without first copying it into a []byte when the
// writer beneath can (net/http's can): drip bodies carry whole
// transactions in hex.
func (r *recorder) WriteString(s string) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	n, err := io.WriteString(r.ResponseWriter, s)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flush, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) statusCode() int {
	if !r.wrote {
		return http.StatusOK // nothing written: net/http sends 200
	}
	return r.status
}

// methodLabel maps arbitrary client methods onto a fixed set so a metric
// label cannot be flooded.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}
