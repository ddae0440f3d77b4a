package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// assertV3Error checks a v3 failure: the status and a body that is exactly
// {"error": …}, as the incumbent's v3 schema allows.
func assertV3Error(t *testing.T, w interface {
	Result() *http.Response
}, body []byte, status int, wantErr string) {
	t.Helper()
	res := w.Result()
	if res.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", res.StatusCode, status, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want JSON", ct)
	}
	m := decodeMap(t, body)
	if _, ok := m["detail"]; ok {
		// Ours beside the incumbent's text, where that text is terse.
		assertKeys(t, m, "error", "detail")
	} else {
		assertKeys(t, m, "error")
	}
	if msg, _ := m["error"].(string); !strings.Contains(msg, wantErr) {
		t.Errorf("error = %q, want it to contain %q", msg, wantErr)
	}
}

func TestDripV3Success(t *testing.T) {
	h := newHarness(t, options{})
	to := newRecipient(t)
	w := h.dripV3(`{"address":"`+to+`"}`, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	m := decodeMap(t, w.Body.Bytes())
	assertKeys(t, m, "transaction", "amount")
	txm, _ := m["transaction"].(map[string]any)
	assertKeys(t, txm, "tx_id", "chain")
	if txm["chain"] != "stacks" {
		t.Errorf("chain = %v", txm["chain"])
	}
	amount, _ := m["amount"].(map[string]any)
	assertKeys(t, amount, "stx")
	if amount["stx"] != "500000000" {
		t.Errorf("amount.stx = %v, want \"500000000\"", amount["stx"])
	}
	txid, _ := txm["tx_id"].(string)
	id, err := stacks.ParseTxID(txid)
	if err != nil || !strings.HasPrefix(txid, "0x") || txid != strings.ToLower(txid) {
		t.Fatalf("tx_id %q: %v", txid, err)
	}
	if st := h.dn.TxStatus(id); st.State == devnode.TxUnknown {
		t.Fatalf("the node does not know tx %s", txid)
	}
	if n := h.dn.MempoolSize(); n != 1 {
		t.Fatalf("mempool holds %d txs, want 1", n)
	}
	h.dn.Mine()
	p, _ := stacks.ParsePrincipal(to)
	if bal, _ := h.dn.PrincipalAccount(p); bal != faucet.DefaultAmount {
		t.Errorf("recipient balance %d, want %d", bal, faucet.DefaultAmount)
	}
}

// v3 reads "stacking" as v1 does: true is STX's stacking drip (PoX's
// minimum plus padding, from the stacking bucket), false or absent the
// default drip; anything but a boolean, or given twice, is a 400.
func TestDripV3Stacking(t *testing.T) {
	h := newHarness(t, options{limits: guard.Limits{StackingPerAddress: guard.Limit{Requests: 1, Window: time.Hour}}})
	want, err := h.f.StackingAmount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	to := newRecipient(t)
	w := h.dripV3(`{"address":"`+to+`","stacking":true}`, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("stacking: status %d: %s", w.Code, w.Body)
	}
	if a := decodeMap(t, w.Body.Bytes())["amount"].(map[string]any)["stx"]; a != strconv.FormatUint(want, 10) || want <= faucet.DefaultAmount {
		t.Errorf("stacking amount %v, want %d", a, want)
	}
	h.dn.Mine()
	p, _ := stacks.ParsePrincipal(to)
	if bal, _ := h.dn.PrincipalAccount(p); bal != want {
		t.Errorf("recipient balance %d, want %d", bal, want)
	}
	// The stacking bucket (1 an hour) is spent; the default drip is not.
	w = h.dripV3(`{"address":"`+to+`","stacking":true}`, nil)
	assertV3Error(t, w, w.Body.Bytes(), http.StatusTooManyRequests, "Too many requests")
	for _, body := range []string{`{"address":"` + to + `","stacking":false}`, `{"stacking":null,"address":"` + newRecipient(t) + `"}`} {
		w = h.dripV3(body, nil)
		if w.Code != http.StatusOK || decodeMap(t, w.Body.Bytes())["amount"].(map[string]any)["stx"] != "500000000" {
			t.Errorf("%s: %d %s, want the default drip", body, w.Code, w.Body)
		}
	}
	for body, wantErr := range map[string]string{
		`{"address":"` + to + `","stacking":"true"}`:                 "body/stacking must be a boolean",
		`{"address":"` + to + `","stacking":1}`:                      "body/stacking must be a boolean",
		`{"address":"` + to + `","stacking":true,"stacking":false}`:  "stacking given more than once",
		`{"address":"` + to + `","stacking":false,"stacking":false}`: "stacking given more than once",
	} {
		w := h.dripV3(body, nil)
		assertV3Error(t, w, w.Body.Bytes(), http.StatusBadRequest, wantErr)
	}
}

// Stacking drips are STX only: v3 refuses stacking:true for a token, as
// v1, eligibility and MCP do, and sends nothing.
func TestDripV3StackingOnATokenIsRefused(t *testing.T) {
	h := sbtcHarness(t, options{})
	w := h.do(http.MethodPost, "/extended/v3/faucets/sbtc", strings.NewReader(`{"address":"`+newRecipient(t)+`","stacking":true}`),
		map[string]string{"Content-Type": "application/json"})
	assertV3Error(t, w, w.Body.Bytes(), http.StatusBadRequest, "stacking drips are STX only")
	if n := h.dn.MempoolSize(); n != 0 {
		t.Errorf("a refused drip sent %d txs", n)
	}
	w = h.do(http.MethodPost, "/extended/v3/faucets/sbtc", strings.NewReader(`{"address":"`+newRecipient(t)+`","stacking":false}`),
		map[string]string{"Content-Type": "application/json"})
	if w.Code != http.StatusOK {
		t.Errorf("stacking:false on sBTC: %d %s", w.Code, w.Body)
	}
}

// A mainnet address gets the incumbent's v3 text, word for word, and a
// detail saying what v1 says: that it is a mainnet address, and which to
// use instead.
func TestDripV3MainnetAddressExplained(t *testing.T) {
	h := sbtcHarness(t, options{})
	mainnet := newKey(t).Address(stacks.AddressVersionMainnetSingleSig).String()
	for asset, label := range map[string]string{"stx": "STX", "sbtc": "sBTC"} {
		for _, addr := range []string{mainnet, mainnet + ".some-contract"} {
			w := h.do(http.MethodPost, "/extended/v3/faucets/"+asset, strings.NewReader(`{"address":"`+addr+`"}`),
				map[string]string{"Content-Type": "application/json"})
			m := decodeMap(t, w.Body.Bytes())
			want := "invalid address: " + addr + " is a mainnet address; this faucet sends testnet " + label + ", use a testnet address (ST…)"
			if w.Code != http.StatusBadRequest || m["error"] != v3InvalidAddress || m["detail"] != want || len(m) != 2 {
				t.Errorf("%s, %s: %d %s, want 400 {error: %q, detail: %q}", asset, addr, w.Code, w.Body, v3InvalidAddress, want)
			}
			v1 := h.do(http.MethodPost, "/extended/v1/faucets/"+asset+"?address="+addr, nil, nil)
			if decodeMap(t, v1.Body.Bytes())["error"] != want {
				t.Errorf("%s, %s: v1 says %s; v3's detail should say the same", asset, addr, v1.Body)
			}
		}
	}
}

func TestDripV3ContractPrincipal(t *testing.T) {
	h := newHarness(t, options{})
	w := h.dripV3(`{"address":"`+newRecipient(t)+`.some-contract"}`, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if n := h.dn.MempoolSize(); n != 1 {
		t.Fatalf("mempool holds %d txs, want 1", n)
	}
}

func TestDripV3AcceptsJSONMediaTypes(t *testing.T) {
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json"} {
		h := newHarness(t, options{})
		w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, map[string]string{"Content-Type": ct})
		if w.Code != http.StatusOK {
			t.Errorf("Content-Type %q: status %d: %s", ct, w.Code, w.Body)
		}
	}
}

func TestDripV3BadRequests(t *testing.T) {
	to := "ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXQ"
	mainnet := "SP3FBR2AGK5H9QBDH3EEN6DF8EK8JY7RX8QJ5SVTE"
	cases := map[string]struct {
		target, body, ct string
		status           int
		wantErr          string
	}{
		"query-string address":            {target: "?address=" + to, status: 400, wantErr: "JSON body"},
		"query-string address with body":  {target: "?address=" + to, body: `{"address":"` + to + `"}`, ct: "application/json", status: 400, wantErr: "query string"},
		"no body":                         {status: 400, wantErr: "address"},
		"no body with JSON type":          {ct: "application/json", status: 400, wantErr: "address"},
		"form body":                       {body: "address=" + to, ct: "application/x-www-form-urlencoded", status: 415, wantErr: "Unsupported Media Type"},
		"multipart body":                  {body: "--x\r\n", ct: "multipart/form-data; boundary=x", status: 415, wantErr: "Unsupported Media Type"},
		"text body":                       {body: `{"address":"` + to + `"}`, ct: "text/plain", status: 415, wantErr: "Unsupported Media Type"},
		"JSON without a type":             {body: `{"address":"` + to + `"}`, status: 415, wantErr: "Unsupported Media Type"},
		"malformed JSON":                  {body: `{"address": `, ct: "application/json", status: 400, wantErr: "malformed JSON"},
		"trailing garbage":                {body: `{"address":"` + to + `"} x`, ct: "application/json", status: 400, wantErr: "malformed JSON"},
		"two objects":                     {body: `{"address":"` + to + `"}{}`, ct: "application/json", status: 400, wantErr: "malformed JSON"},
		"array":                           {body: `["` + to + `"]`, ct: "application/json", status: 400, wantErr: "address"},
		"missing address":                 {body: `{}`, ct: "application/json", status: 400, wantErr: "address"},
		"null address":                    {body: `{"address":null}`, ct: "application/json", status: 400, wantErr: "address"},
		"numeric address":                 {body: `{"address":42}`, ct: "application/json", status: 400, wantErr: "address"},
		"empty address":                   {body: `{"address":""}`, ct: "application/json", status: 400, wantErr: "address"},
		"not an address":                  {body: `{"address":"not-an-address"}`, ct: "application/json", status: 400, wantErr: v3InvalidAddress},
		"mainnet address":                 {body: `{"address":"` + mainnet + `"}`, ct: "application/json", status: 400, wantErr: v3InvalidAddress},
		"checksum typo":                   {body: `{"address":"ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXR"}`, ct: "application/json", status: 400, wantErr: v3InvalidAddress},
		"mainnet contract principal":      {body: `{"address":"` + mainnet + `.some-contract"}`, ct: "application/json", status: 400, wantErr: v3InvalidAddress},
		"body too large":                  {body: `{"address":"` + to + `","pad":"` + strings.Repeat("x", maxBodyBytes) + `"}`, ct: "application/json", status: 413, wantErr: "too large"},
		"invalid principal contract name": {body: `{"address":"` + to + `.1bad"}`, ct: "application/json", status: 400, wantErr: v3InvalidAddress},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, options{})
			hdr := map[string]string{}
			if tc.ct != "" {
				hdr["Content-Type"] = tc.ct
			}
			var body *strings.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			var w = h.do(http.MethodPost, "/extended/v3/faucets/stx"+tc.target, readerOrNil(body), hdr)
			assertV3Error(t, w, w.Body.Bytes(), tc.status, tc.wantErr)
			if m := decodeMap(t, w.Body.Bytes()); tc.wantErr == v3InvalidAddress {
				detail, _ := m["detail"].(string)
				if m["error"] != v3InvalidAddress || !strings.HasPrefix(detail, "invalid address: ") {
					t.Errorf("error = %v, detail %q: want exactly %q and v1's reason as the detail", m["error"], detail, v3InvalidAddress)
				}
			}
			if n := h.dn.MempoolSize(); n != 0 {
				t.Errorf("a refused request broadcast %d txs", n)
			}
			if got := counterValue(t, h.reg, "faucet_drips_total", map[string]string{"asset": "stx", "outcome": "error", "reason": reasonInvalidRequest}); got != 1 {
				t.Errorf("invalid_request counter = %v, want 1", got)
			}
		})
	}
}

// v1 and v3 share the engine's limits: an address that used its allowance
// through v1 is limited on v3 too, with Retry-After.
func TestDripV3SharesLimitsWithV1(t *testing.T) {
	h := newHarness(t, options{limits: guard.Limits{PerAddress: guard.Limit{Requests: 1, Window: time.Hour}}})
	to := newRecipient(t)
	if w := h.drip("address=" + to); w.Code != http.StatusOK {
		t.Fatalf("v1 status %d: %s", w.Code, w.Body)
	}
	w := h.dripV3(`{"address":"`+to+`"}`, nil)
	assertV3Error(t, w, w.Body.Bytes(), http.StatusTooManyRequests, "Too many requests")
	if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q", ra)
	}
}

// Failures carry the incumbent's v3 statuses and texts.
func TestDripV3Failures(t *testing.T) {
	t.Run("suspended", func(t *testing.T) {
		h := newHarness(t, options{disabled: true})
		w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil)
		assertV3Error(t, w, w.Body.Bytes(), http.StatusForbidden, "STX faucet is not available")
	})
	t.Run("out of funds", func(t *testing.T) {
		h := newHarness(t, options{unfunded: true})
		w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil)
		assertV3Error(t, w, w.Body.Bytes(), http.StatusServiceUnavailable, v3OutOfFunds)
	})
	t.Run("node down", func(t *testing.T) {
		h := newHarness(t, options{})
		h.dn.SetDown(true)
		w := h.dripV3(`{"address":"`+newRecipient(t)+`"}`, nil)
		assertV3Error(t, w, w.Body.Bytes(), http.StatusServiceUnavailable, v3Unavailable)
		if strings.Contains(w.Body.String(), h.nodeSrv.URL) {
			t.Errorf("the node URL leaked: %s", w.Body)
		}
	})
	t.Run("wrong method", func(t *testing.T) {
		h := newHarness(t, options{})
		w := h.do(http.MethodGet, "/extended/v3/faucets/stx", nil, nil)
		if w.Code != http.StatusMethodNotAllowed || !strings.Contains(w.Header().Get("Allow"), "POST") {
			t.Errorf("GET: status %d, Allow %q", w.Code, w.Header().Get("Allow"))
		}
	})
}
