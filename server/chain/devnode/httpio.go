package devnode

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// wait sleeps d on clk, or less when r's client gives up; it reports
// whether the request is still wanted.
func wait(clk clock.Clock, r *http.Request, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-r.Context().Done():
		return false
	}
}

// hangUp closes the connection without writing a response: a dead node.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// HTTP/2 or a wrapped writer: aborting the handler resets the stream.
	panic(http.ErrAbortHandler)
}

// contentType is r's Content-Type as the node compares it: trimmed and
// lowercased.
func contentType(r *http.Request) string {
	return strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Type")))
}

// isJSON reports application/json, with or without parameters.
func isJSON(ct string) bool {
	return ct == "application/json" || strings.HasPrefix(ct, "application/json;")
}

// readBody reads a POST body of 1 to limit bytes as the node's request
// parsers do: the declared length first, then the body itself (a chunked
// one declares none). It answers 400 msgEmpty or msgTooBig, or a read
// failure, and returns false when it has answered.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, msgEmpty, msgTooBig string) ([]byte, bool) {
	if r.ContentLength == 0 {
		writeText(w, http.StatusBadRequest, msgEmpty)
		return nil, false
	}
	if r.ContentLength > limit {
		writeText(w, http.StatusBadRequest, msgTooBig)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeText(w, http.StatusBadRequest, msgTooBig)
		} else {
			writeText(w, http.StatusBadRequest, msgReadBody)
		}
		return nil, false
	}
	if len(body) == 0 { // chunked request with an empty body
		writeText(w, http.StatusBadRequest, msgEmpty)
		return nil, false
	}
	return body, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeText(w, http.StatusInternalServerError, "devnode: encoding response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}
