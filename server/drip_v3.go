package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// v3Success is the incumbent's v3 answer. amount.stx is µSTX as a decimal
// string (a JSON number would lose precision in JavaScript).
type v3Success struct {
	Transaction v3Tx     `json:"transaction"`
	Amount      v3Amount `json:"amount"`
}

type v3Tx struct {
	TxID  string `json:"tx_id"`
	Chain string `json:"chain"`
}

// v3Amount names the asset paid and its amount in base units, a decimal
// string: {"stx": µSTX}, {"btc": sats}, {"<token>": base units}.
type v3Amount map[string]string

// v3Error is every v3 failure: the incumbent's {error}, and where it says
// too little, a detail of ours.
type v3Error struct {
	Error string `json:"error"`
	// Detail says why, where the incumbent's text is terse ("Invalid
	// testnet Stacks address"): an addition clients may ignore.
	Detail string `json:"detail,omitempty"`
}

// Fixed v3 texts for malformed requests.
const (
	v3InvalidAddress = "Invalid testnet Stacks address"
	v3NeedBody       = `body must be a JSON object with an address, e.g. {"address":"ST…"}`
)

// handleDripV3 serves POST /extended/v3/faucets/{asset} with a JSON body
// {"address":"…"} and, for STX, an optional "stacking": true, through the
// same judge, checks, limits and drip path as v1. The incumbent's v3 has
// no options and drops unknown fields; this one reads "stacking" so that
// every door gives it one meaning: STX's stacking drip, a 400 elsewhere.
func (s *server) handleDripV3(a *asset) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if s.refuseOff(w, a.name, true) {
			return
		}
		q, status, msg := readV3Body(r)
		detail := ""
		if status == 0 {
			k, bad := a.judge(q)
			if bad == nil {
				p, fail := s.dispense(w.Header(), r, k)
				if fail != nil {
					fail.writeV3(w)
					return
				}
				writeJSON(w, http.StatusOK, v3Success{Transaction: v3Tx{TxID: "0x" + p.txid, Chain: a.chain},
					Amount: v3Amount{string(a.name): strconv.FormatUint(p.amount, 10)}})
				return
			}
			status, msg, detail = bad.status, bad.v3, bad.v3Detail
		}
		s.metrics.observeDrip(a.name, reasonInvalidRequest)
		writeJSON(w, status, v3Error{Error: msg, Detail: detail})
	}
}

// readV3Body reads a v3 request of any asset: the address only from a
// JSON body {"address": "…"}, trimmed, and an optional boolean
// "stacking". On failure it returns the status and the {error} text.
func readV3Body(r *http.Request) (question, int, string) {
	var none question
	if q, err := url.ParseQuery(r.URL.RawQuery); err != nil || q.Has("address") {
		// A proxy limiting on the URL would see another address than the
		// one paid; v3 takes it from the body only.
		return none, http.StatusBadRequest, "the address must be sent in the JSON body, not in the query string: " + v3NeedBody
	}
	var body []byte
	if r.Body != nil {
		b, err := readBody(r.Body, r.ContentLength, maxBodyBytes+1)
		if err != nil {
			return none, http.StatusBadRequest, "could not read the request body"
		}
		body = b
	}
	if len(body) > maxBodyBytes {
		return none, http.StatusRequestEntityTooLarge, "request body too large"
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return none, http.StatusBadRequest, v3NeedBody
	}
	if ct := r.Header.Get("Content-Type"); !isJSONMediaType(ct) {
		if ct == "" {
			ct = "none"
		}
		return none, http.StatusUnsupportedMediaType, "Unsupported Media Type: " + shorten(ct) + "; send application/json"
	}
	var v struct {
		Address  *string          `json:"address"`
		Stacking *json.RawMessage `json:"stacking"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "address" {
				return none, http.StatusBadRequest, "body/address must be a string"
			}
			return none, http.StatusBadRequest, v3NeedBody
		}
		return none, http.StatusBadRequest, "malformed JSON body"
	}
	if dec.More() || dec.InputOffset() < int64(len(bytes.TrimRight(body, " \t\r\n"))) {
		return none, http.StatusBadRequest, "malformed JSON body"
	}
	if v.Address == nil {
		return none, http.StatusBadRequest, "body must have required property 'address'"
	}
	if bytes.Count(body, []byte(`"address"`)) > 1 && topLevelKeys(body)["address"] > 1 {
		// The decoder keeps the last; a proxy may have read the first.
		return none, http.StatusBadRequest, "address given more than once"
	}
	addr := strings.TrimSpace(*v.Address)
	if addr == "" {
		return none, http.StatusBadRequest, "body/address must not be empty"
	}
	q := question{address: []string{addr}}
	switch {
	case v.Stacking == nil: // absent or null
	case bytes.Count(body, []byte(`"stacking"`)) > 1 && topLevelKeys(body)["stacking"] > 1:
		return none, http.StatusBadRequest, "stacking given more than once"
	case string(*v.Stacking) == "true", string(*v.Stacking) == "false":
		q.stacking = []string{string(*v.Stacking)}
	default:
		return none, http.StatusBadRequest, "body/stacking must be a boolean"
	}
	return q, 0, ""
}

// readBody reads at most limit bytes of body into a buffer sized by the
// declared length (a drip's body is some 60 bytes: io.ReadAll would start
// at 512 and may grow).
func readBody(body io.Reader, declared int64, limit int) ([]byte, error) {
	size := limit
	if declared >= 0 && declared < int64(limit) {
		size = int(declared) + 1 // room to see the end without growing
	}
	b := make([]byte, 0, size)
	lr := io.LimitReader(body, int64(limit))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // a body longer than declared
		}
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF:
			return b, nil
		case err != nil:
			return b, err
		}
	}
}

// topLevelKeys counts the keys of the JSON object body (already decoded
// once, so well formed).
func topLevelKeys(body []byte) map[string]int {
	keys := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return keys
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		if k, ok := tok.(string); ok {
			keys[k]++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
	}
	return keys
}

// isJSONMediaType accepts application/json and any application/*+json.
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
