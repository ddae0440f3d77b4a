package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// What docs/api.md says of a v1 drip's body, case by case: with an
// address in the query the body is never read; without one, an address
// in a JSON or form body (any Content-Type) is refused on the Stacks
// routes with the query form of the same request, and paid on the BTC
// route; a body without an address changes nothing.
func TestV1BodyAsDocumented(t *testing.T) {
	e := newBTCEnv(t, options{})
	post := func(path, body, ct string) *http.Response {
		t.Helper()
		hdr := map[string]string{}
		if ct != "" {
			hdr["Content-Type"] = ct
		}
		return e.do(http.MethodPost, path, strings.NewReader(body), hdr).Result()
	}
	decode := func(r *http.Response) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	t.Run("STX: the query's address wins, the body is not read", func(t *testing.T) {
		to, other := newRecipient(t), newRecipient(t)
		w := e.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, strings.NewReader(`{"address":"`+other+`","stacking":true}`),
			map[string]string{"Content-Type": "application/json"})
		assertDripOK(t, e.harness, w, to, faucet.DefaultAmount)
	})
	for name, c := range map[string]struct{ body, ct string }{
		"JSON":                {`{"address":"%s"}`, "application/json"},
		"JSON, no type":       {`{"address":"%s"}`, ""},
		"form":                {`address=%s`, "application/x-www-form-urlencoded"},
		"form, labelled JSON": {`address=%s`, "application/json"},
		"JSON with stacking":  {`{"address":"%s","stacking":true}`, "text/plain"},
		"blank query address": {`{"address":"%s"}`, "application/json"},
		"address after 4 KiB": {`{"pad":"` + strings.Repeat("x", maxBodyBytes) + `","address":"%s"}`, "application/json"},
	} {
		t.Run("STX, no query address, "+name, func(t *testing.T) {
			to := newRecipient(t)
			path := "/extended/v1/faucets/stx"
			if name == "blank query address" {
				path += "?address=%20"
			}
			before := e.dn.MempoolSize()
			m := decode(post(path, strings.ReplaceAll(c.body, "%s", to), c.ct))
			switch {
			case name == "address after 4 KiB":
				// Past what is read: no address was found.
				if m["reason"] != "address_required" {
					t.Errorf("%v, want address_required", m)
				}
			case m["reason"] != "address_in_body" || !strings.Contains(m["error"].(string), "POST body is no longer supported") ||
				!strings.Contains(m["help"].(string), "?address="+to):
				t.Errorf("%v, want the 400 address_in_body with the query form", m)
			case strings.Contains(c.body, "stacking") != strings.Contains(m["help"].(string), "&stacking=true"):
				t.Errorf("help %q: the body's stacking=true should (only) be repeated when it asked for it", m["help"])
			}
			if e.dn.MempoolSize() != before {
				t.Error("a refused request sent a transaction")
			}
		})
	}
	t.Run("STX, a body without an address", func(t *testing.T) {
		m := decode(post("/extended/v1/faucets/stx", `{"stacking":true,"amount":5}`, "application/json"))
		if m["reason"] != "address_required" {
			t.Errorf("%v, want address_required", m)
		}
	})

	btcDrip := func(t *testing.T, path, body, ct, to string) string {
		t.Helper()
		r := post(path, body, ct)
		m := decode(r)
		txid, _ := m["txid"].(string)
		if r.StatusCode != http.StatusOK || txid == "" {
			t.Fatalf("%d %v", r.StatusCode, m)
		}
		if sats, n, _ := e.paid(txid, to); sats != 10_000 || n != 1 {
			t.Errorf("paid %d sats in %d outputs to %s, want 10000 in one", sats, n, to)
		}
		return txid
	}
	t.Run("BTC: the body's address when the query has none", func(t *testing.T) {
		to := regtestAddresses(t)["p2wpkh"]
		btcDrip(t, "/extended/v1/faucets/btc", `{"address":"`+to+`"}`, "application/json", to)
		to = regtestAddresses(t)["p2tr"]
		btcDrip(t, "/extended/v1/faucets/btc", `address=`+to, "application/x-www-form-urlencoded", to)
	})
	t.Run("BTC: the query's address wins", func(t *testing.T) {
		to, other := regtestAddresses(t)["p2wpkh"], regtestAddresses(t)["p2wpkh"]
		txid := btcDrip(t, "/extended/v1/faucets/btc?address="+to, `{"address":"`+other+`"}`, "application/json", to)
		if sats, _, _ := e.paid(txid, other); sats != 0 {
			t.Errorf("the body's address got %d sats", sats)
		}
	})
}
