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

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
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
// string: {"stx": µSTX}, {"sbtc": sats}, {"btc": sats}, {"<token>": base
// units}.
type v3Amount map[string]string

// v3Error is every v3 failure: the incumbent answers {error} and nothing else.
type v3Error struct {
	Error string `json:"error"`
}

// Fixed v3 texts for malformed requests.
const (
	v3InvalidAddress = "Invalid testnet Stacks address"
	v3NeedBody       = `body must be a JSON object with an address, e.g. {"address":"ST…"}`
)

// handleDripV3 serves POST /extended/v3/faucets/{stx,<token>} with a JSON
// body {"address":"ST…"}. It sends the default amount (the incumbent
// ignores "stacking" here) through the same checks, limits and engine as
// v1.
func (s *server) handleDripV3(asset faucet.Asset) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if s.refuseOff(w, asset, true) {
			return
		}
		req, status, msg := parseDripV3(r)
		if status != 0 {
			s.metrics.observeDrip(asset, reasonInvalidRequest, nil)
			writeJSON(w, status, v3Error{Error: msg})
			return
		}
		req.Asset = asset
		res, fail := s.dispense(w.Header(), r, req)
		if fail != nil {
			fail.writeV3(w)
			return
		}
		writeJSON(w, http.StatusOK, v3Success{Transaction: v3Tx{TxID: res.TxID.Hex0x(), Chain: "stacks"},
			Amount: v3Amount{string(asset.OrSTX()): strconv.FormatUint(res.Amount, 10)}})
	}
}

// parseDripV3 validates a v3 request: the address only in a JSON body.
// On failure it returns the status and the {error} text.
func parseDripV3(r *http.Request) (faucet.Request, int, string) {
	addr, status, msg := readV3Address(r)
	if status != 0 {
		return faucet.Request{}, status, msg
	}
	p, err := stacks.ParseTestnetPrincipal(addr)
	if err != nil {
		return faucet.Request{}, http.StatusBadRequest, v3InvalidAddress
	}
	return faucet.Request{Recipient: p}, 0, ""
}

// readV3Address reads the address of a v3 request of any asset: only from
// a JSON body {"address": "…"}, trimmed. On failure it returns the status
// and the {error} text.
func readV3Address(r *http.Request) (string, int, string) {
	if q, err := url.ParseQuery(r.URL.RawQuery); err != nil || q.Has("address") {
		// A proxy limiting on the URL would see another address than the
		// one paid; v3 takes it from the body only.
		return "", http.StatusBadRequest, "the address must be sent in the JSON body, not in the query string: " + v3NeedBody
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
		if err != nil {
			return "", http.StatusBadRequest, "could not read the request body"
		}
		body = b
	}
	if len(body) > maxBodyBytes {
		return "", http.StatusRequestEntityTooLarge, "request body too large"
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return "", http.StatusBadRequest, v3NeedBody
	}
	if ct := r.Header.Get("Content-Type"); !isJSONMediaType(ct) {
		if ct == "" {
			ct = "none"
		}
		return "", http.StatusUnsupportedMediaType, "Unsupported Media Type: " + shorten(ct) + "; send application/json"
	}
	var v struct {
		Address *string `json:"address"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "address" {
				return "", http.StatusBadRequest, "body/address must be a string"
			}
			return "", http.StatusBadRequest, v3NeedBody
		}
		return "", http.StatusBadRequest, "malformed JSON body"
	}
	if dec.More() || dec.InputOffset() < int64(len(bytes.TrimRight(body, " \t\r\n"))) {
		return "", http.StatusBadRequest, "malformed JSON body"
	}
	if v.Address == nil {
		return "", http.StatusBadRequest, "body must have required property 'address'"
	}
	addr := strings.TrimSpace(*v.Address)
	if addr == "" {
		return "", http.StatusBadRequest, "body/address must not be empty"
	}
	return addr, 0, ""
}

// isJSONMediaType accepts application/json and any application/*+json.
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
