package server

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// maxBodyBytes is how much of a drip request body is read, only to recognise
// an address sent the old way; the body is never needed otherwise.
const maxBodyBytes = 4 << 10

// dripSuccess is the incumbent's 200 body. The published OpenAPI schema
// forbids additional properties, so it has exactly these three fields.
type dripSuccess struct {
	Success bool   `json:"success"`
	TxID    string `json:"txId"`  // 0x + 64 hex
	TxRaw   string `json:"txRaw"` // hex, no 0x
}

// writeDripSuccess writes dripSuccess{true, txID, rawHex} as the generic
// encoder would, without copying rawHex: a batched drip answers with its
// whole send-many call, tens of kilobytes of hex that every drip of the
// batch shares. Hex and a 0x txid need no escaping.
func writeDripSuccess(w http.ResponseWriter, txID, rawHex string) {
	head := `{"success":true,"txId":"` + txID + `","txRaw":"`
	const tail = `"}`
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(rawHex)+len(tail)))
	writeJSONBytes(w, http.StatusOK, []byte(head))
	_, _ = io.WriteString(w, rawHex)
	_, _ = io.WriteString(w, tail)
}

// handleDrip serves POST /extended/v1/faucets/{asset}?address=…: STX
// with &stacking=…, BTC with &large=… or &xlarge=…. Every input check
// happens here, before the engine, so a malformed request never takes a
// rate-limit slot.
func (s *server) handleDrip(a *asset) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if s.refuseOff(w, a.name, false) {
			return
		}
		k, bad := s.parseDrip(r, a)
		if bad != nil {
			s.metrics.observeDrip(a.name, reasonInvalidRequest)
			writeError(w, bad.status, bad.body)
			return
		}
		p, fail := s.dispense(w.Header(), r, k)
		if fail != nil {
			fail.writeV1(w, s.cfg.Clock.Now())
			return
		}
		a.writeV1(w, p)
	}
}

// Headers carrying a proof-of-work solution (see package guard).
const (
	headerChallenge = "X-Faucet-Challenge"
	headerSolution  = "X-Faucet-Solution"
)

// parseDrip reads a v1 drip of a from its query.
func (s *server) parseDrip(r *http.Request, a *asset) (ask, *refusal) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return ask{}, badRequest("invalid_query", "invalid query string")
	}
	in := question{address: q["address"], stacking: q["stacking"]}
	if a.sizes {
		in.large, in.xlarge = q["large"], q["xlarge"]
	}
	if len(in.address) == 0 || strings.TrimSpace(in.address[0]) == "" {
		if addr, stacking, ok := addressFromBody(r); ok {
			if !a.bodyAddress {
				return ask{}, s.bodyRefusal(r, a, addr, stacking)
			}
			// The incumbent's v1 BTC route reads the address from a JSON
			// body when the query has none.
			in.address = []string{addr}
		}
	}
	return a.judge(in)
}

// bodyRefusal answers an address sent in the body of a route that takes
// it only in the query, as the incumbent does: Hiro dropped body
// parameters so that proxies can rate-limit on the URL. It shows the
// query form of the same request.
func (s *server) bodyRefusal(r *http.Request, a *asset, addr string, stacking bool) *refusal {
	u := s.queryForm(r, a, addr, stacking && a.admits(a, dripOptions{stacking: true}) == nil)
	return &refusal{status: http.StatusBadRequest, v3: v3NeedBody, body: errorBody{
		Error:  "POST body is no longer supported, parameters must be passed as query parameters, e.g. " + u,
		Reason: "address_in_body",
		Help:   "Example curl request: curl -X POST '" + u + "'",
	}}
}

// shortName is a client's asset name fit to quote back.
func shortName(name string) string {
	if !safeToken(name, "-_.") || len(name) > 64 {
		return "that asset"
	}
	return name
}

// addressFromBody looks for an address in a JSON or form body (any
// Content-Type; clients label bodies inconsistently). Only the first
// maxBodyBytes are read.
func addressFromBody(r *http.Request) (addr string, stacking, ok bool) {
	if r.Body == nil {
		return "", false, false
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "", false, false
	}
	if b[0] == '{' {
		var v struct {
			Address  any `json:"address"`
			Stacking any `json:"stacking"`
		}
		if json.Unmarshal(b, &v) != nil {
			return "", false, false
		}
		a, _ := v.Address.(string)
		switch st := v.Stacking.(type) {
		case bool:
			stacking = st
		case string:
			stacking = st == "true"
		}
		a = strings.TrimSpace(a)
		return a, stacking, a != ""
	}
	vals, _ := url.ParseQuery(string(b)) // partial results are fine
	a := strings.TrimSpace(vals.Get("address"))
	return a, vals.Get("stacking") == "true", a != ""
}

// queryForm is the URL of a request in its query-string form. The host
// and address come from the client, so they are used only when they
// contain nothing that could break out of a quoted shell word.
func (s *server) queryForm(r *http.Request, a *asset, addr string, stacking bool) string {
	host := r.Host
	if host == "" || !safeToken(host, ".-:[]") {
		host = "<host>"
	}
	scheme := "https"
	if h := strings.ToLower(host); strings.HasPrefix(h, "localhost") || strings.HasPrefix(h, "127.") || strings.HasPrefix(h, "[::1]") {
		scheme = "http"
	}
	if !safeToken(addr, ".-_") || len(addr) > 160 {
		addr = "ST…"
	}
	u := scheme + "://" + host + "/extended/v1/faucets/" + string(a.name) + "?address=" + addr
	if stacking {
		u += "&stacking=true"
	}
	return u
}

// safeToken reports whether s holds only ASCII letters, digits and extra.
func safeToken(s, extra string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(extra, c) >= 0) {
			return false
		}
	}
	return s != ""
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// dripFailure is a refused or failed drip, rendered by each API version in
// its own shape: v1 keeps the incumbent's {success:false, error} plus our
// reason fields, v3 answers {error} only, with the incumbent's v3 statuses.
type dripFailure struct {
	status     int
	reason     string
	message    string
	detail     string
	retryAfter int64 // seconds; set for 429
	v3Status   int   // 0 = status
	v3Message  string
	// authenticate is the WWW-Authenticate challenge of a 401.
	authenticate string
}

// writeV1 renders the failure for /extended/v1/faucets/{asset}.
func (f *dripFailure) writeV1(w http.ResponseWriter, now time.Time) {
	f.headers(w.Header())
	writeError(w, f.status, f.body(now))
}

// headers sets Retry-After and WWW-Authenticate when the failure has them.
func (f *dripFailure) headers(h http.Header) {
	if f.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(f.retryAfter, 10))
	}
	if f.authenticate != "" {
		h.Set("WWW-Authenticate", f.authenticate)
	}
}

// body is the failure as v1 (and the MCP tools) write it.
func (f *dripFailure) body(now time.Time) errorBody {
	body := errorBody{Error: f.message, Reason: f.reason, Detail: f.detail}
	if f.retryAfter > 0 {
		body.RetryAfterSeconds = f.retryAfter
		body.NextAllowedAt = now.Add(time.Duration(f.retryAfter) * time.Second).UTC().Format(time.RFC3339)
	}
	return body
}

// writeV3 renders the failure for /extended/v3/faucets/{asset}: the
// incumbent's {error} with its v3 status.
func (f *dripFailure) writeV3(w http.ResponseWriter) {
	f.headers(w.Header())
	st := f.status
	if f.v3Status != 0 {
		st = f.v3Status
	}
	writeJSON(w, st, v3Error{Error: f.v3Message})
}

// Texts of v3 failures: the incumbent's, word for word, so clients that
// match on them keep working.
const (
	v3Unavailable = "Faucet is temporarily unavailable, please try again later"
	v3OutOfFunds  = "The faucet is temporarily out of funds, please try again later"
	v3Failed      = "Faucet request failed, please try again later"
	v3TooMany     = "Too many requests"
)

// retryAfterSeconds rounds d up to whole seconds, at least 1: Retry-After
// has one-second resolution and 0 would invite an immediate retry.
func retryAfterSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 1
	}
	secs := int64(d / time.Second)
	if d%time.Second != 0 {
		secs++
	}
	return secs
}

func hexString(b []byte) string { return hex.EncodeToString(b) }
