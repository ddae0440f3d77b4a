package server

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
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

// handleDrip serves POST /extended/v1/faucets/stx?address=…&stacking=…
// and, for a token, POST /extended/v1/faucets/{token}?address=…. Every input
// check happens here, before the engine, so a malformed request never
// takes a rate-limit slot.
func (s *server) handleDrip(asset faucet.Asset) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if s.refuseOff(w, asset, false) {
			return
		}
		req, bad := s.parseDrip(r, asset)
		if bad != nil {
			s.metrics.observeDrip(asset, reasonInvalidRequest, nil)
			writeError(w, http.StatusBadRequest, *bad)
			return
		}
		res, fail := s.dispense(w.Header(), r, req)
		if fail != nil {
			fail.writeV1(w, s.cfg.Now())
			return
		}
		writeDripSuccess(w, res.TxID.Hex0x(), res.TxRawHex())
	}
}

// Headers carrying a proof-of-work solution (see package guard).
const (
	headerChallenge = "X-Faucet-Challenge"
	headerSolution  = "X-Faucet-Solution"
)

// parseDrip validates the query of a drip of asset. It returns the 400
// body on failure.
func (s *server) parseDrip(r *http.Request, asset faucet.Asset) (faucet.Request, *errorBody) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return faucet.Request{}, &errorBody{Error: "invalid query string", Reason: "invalid_query"}
	}
	addrs := q["address"]
	if len(addrs) == 0 || strings.TrimSpace(addrs[0]) == "" {
		if addr, stacking, ok := addressFromBody(r); ok {
			// Hiro dropped body parameters so proxies can rate-limit on the
			// URL; point old clients at the query form.
			return faucet.Request{}, &errorBody{
				Error:  "address must be sent as a query parameter, not in the request body",
				Reason: "address_in_body",
				Help:   s.helpCommand(r, asset, addr, stacking && asset.IsSTX()),
			}
		}
		return faucet.Request{}, &errorBody{Error: "address required", Reason: "address_required"}
	}
	if len(addrs) > 1 {
		// Ambiguous: a proxy may limit on one value while we would pay another.
		return faucet.Request{}, &errorBody{Error: "address given more than once", Reason: "invalid_address"}
	}
	stacking := false
	switch v := q["stacking"]; {
	case len(v) == 0:
	case len(v) > 1:
		return faucet.Request{}, &errorBody{Error: "stacking given more than once", Reason: "invalid_stacking"}
	case v[0] == "true":
		stacking = true
	case v[0] == "false":
	default:
		return faucet.Request{}, &errorBody{Error: "invalid stacking value, use true or false", Reason: "invalid_stacking"}
	}
	if stacking && !asset.IsSTX() {
		return faucet.Request{}, &errorBody{Error: "stacking drips are STX only; drop stacking=true for " + s.assetLabel(asset), Reason: "invalid_stacking"}
	}

	// Pasted addresses often carry a newline. The parser's messages are
	// precise and quote at most a bounded prefix of the input.
	p, bad := s.parseRecipient(strings.TrimSpace(addrs[0]), asset)
	if bad != nil {
		return faucet.Request{}, bad
	}
	return faucet.Request{Recipient: p, Asset: asset, Stacking: stacking}, nil
}

// parseRecipient reads a Stacks recipient as the drip endpoints do.
func (s *server) parseRecipient(addr string, asset faucet.Asset) (stacks.Principal, *errorBody) {
	if addr == "" {
		return stacks.Principal{}, &errorBody{Error: "address required", Reason: "address_required"}
	}
	p, err := stacks.ParseTestnetPrincipal(addr)
	switch {
	case errors.Is(err, stacks.ErrMainnetAddress):
		return p, &errorBody{
			Error:  "invalid address: " + shorten(addr) + " is a mainnet address; this faucet sends testnet " + s.assetLabel(asset) + ", use a testnet address (ST…)",
			Reason: "mainnet_address",
		}
	case err != nil:
		return p, &errorBody{Error: "invalid address: " + err.Error(), Reason: "invalid_address"}
	}
	return p, nil
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

// helpCommand renders the query-string form of a request as a curl command.
// The host and address come from the client, so they are used only when
// they contain nothing that could break out of the quoted shell word.
func (s *server) helpCommand(r *http.Request, asset faucet.Asset, addr string, stacking bool) string {
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
	u := scheme + "://" + host + "/extended/v1/faucets/" + string(asset) + "?address=" + addr
	if stacking {
		u += "&stacking=true"
	}
	return "curl -X POST '" + u + "'"
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

// Fixed user-facing texts per failure. They are ours, not the engine's, so
// no internal detail can reach a client through them.
var dripErrorText = map[faucet.Reason]string{
	faucet.ReasonExhausted:           "The faucet is temporarily out of funds; try again later",
	faucet.ReasonBusy:                "The faucet is busy; try again in a minute",
	faucet.ReasonNodeUnavailable:     "The Stacks node is unavailable; try again shortly",
	faucet.ReasonRejected:            "The Stacks node refused the faucet transaction",
	faucet.ReasonStackingUnavailable: "The stacking amount is unavailable (no PoX information from the node); try again shortly",
	faucet.ReasonStoreUnavailable:    "The faucet's state store is unavailable; try again shortly",
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

// dripFailure maps an engine error to the failure and logs its internal cause.
func (s *server) dripFailure(r *http.Request, req faucet.Request, adm guard.Admission, err error) *dripFailure {
	var fe *faucet.Error
	if !errors.As(err, &fe) {
		s.metrics.observeDrip(req.Asset, reasonInternal, nil)
		s.log.Error("drip failed", "recipient", req.Recipient.String(), "err", err)
		return &dripFailure{status: http.StatusInternalServerError, reason: reasonInternal, message: "Internal error", v3Message: v3Failed}
	}
	reason := string(fe.Reason)
	level := slog.LevelWarn
	switch fe.Reason {
	case faucet.ReasonDisabled:
		level = slog.LevelInfo
	case faucet.ReasonRejected:
		level = slog.LevelError
	}
	s.log.Log(r.Context(), level, "drip failed",
		"reason", reason, "message", fe.Message, "err", fe.Err,
		"recipient", req.Recipient.String(), "asset", string(req.Asset), "stacking", req.Stacking, "client_ip", addrString(adm.ClientIP))

	if fe.Reason == faucet.ReasonDisabled {
		s.metrics.observeDrip(req.Asset, reason, nil)
		// The engine's disabled messages name only the cause (a mainnet
		// node, another chain id), so they are shown as detail.
		return s.disabledFailure(req.Asset, fe.Message)
	}
	text, known := dripErrorText[fe.Reason]
	if !known {
		reason, text = reasonInternal, "Internal error"
	}
	s.metrics.observeDrip(req.Asset, reason, nil)
	f := &dripFailure{status: http.StatusInternalServerError, reason: reason, message: text, v3Status: http.StatusServiceUnavailable, v3Message: v3Unavailable}
	switch fe.Reason {
	case faucet.ReasonExhausted:
		f.v3Message = v3OutOfFunds
		if !req.Asset.IsSTX() {
			// The incumbent's v1 sBTC faucet answers an empty faucet with
			// 503, its STX one with 500; every token answers as sBTC.
			f.status = http.StatusServiceUnavailable
		}
	case faucet.ReasonRejected:
		f.v3Status, f.v3Message = http.StatusInternalServerError, v3Failed
	}
	if !known {
		f.v3Status, f.v3Message = http.StatusInternalServerError, v3Failed
	}
	return f
}

// disabledFailure is the 403 of a faucet that cannot pay asset on this
// chain or that its operator suspended; detail names which. v3 answers
// with the incumbent's per-asset text.
func (s *server) disabledFailure(asset faucet.Asset, detail string) *dripFailure {
	return &dripFailure{status: http.StatusForbidden, reason: string(faucet.ReasonDisabled), message: "Faucet is not available", detail: detail,
		v3Message: s.assetOff(asset).v3Message}
}

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
