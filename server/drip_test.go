package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

var txIDPattern = regexp.MustCompile(`^0x[0-9a-f]{64}$`)

// assertDripOK checks a 200 drip answer against the incumbent's schema and
// the transaction it describes, and returns the decoded transaction.
func assertDripOK(t *testing.T, h *harness, w *httptest.ResponseRecorder, recipient string, amount uint64) *stacks.Transaction {
	t.Helper()
	body := w.Body.Bytes()
	if w.Code != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", w.Code, body)
	}
	m := decodeMap(t, body)
	assertKeys(t, m, "success", "txId", "txRaw")
	if m["success"] != true {
		t.Errorf("success = %v", m["success"])
	}
	txID, _ := m["txId"].(string)
	if !txIDPattern.MatchString(txID) {
		t.Errorf("txId = %q, want 0x + 64 lowercase hex", txID)
	}
	rawHex, _ := m["txRaw"].(string)
	raw, err := hex.DecodeString(rawHex)
	if err != nil {
		t.Fatalf("txRaw is not hex: %v", err)
	}
	tx, err := stacks.DecodeTransaction(raw)
	if err != nil {
		t.Fatalf("txRaw does not decode: %v", err)
	}
	if got := tx.Payload.Recipient.String(); got != recipient {
		t.Errorf("recipient = %s, want %s", got, recipient)
	}
	if tx.Payload.Amount != amount {
		t.Errorf("amount = %d, want %d", tx.Payload.Amount, amount)
	}
	if got := tx.TxID().Hex0x(); got != txID {
		t.Errorf("txId %s is not the id of txRaw (%s)", txID, got)
	}
	if err := tx.Verify(); err != nil {
		t.Errorf("signature: %v", err)
	}
	if st := h.dn.TxStatus(tx.TxID()); st.State != devnode.TxPending {
		t.Errorf("node has the tx as %v, want pending", st.State)
	}
	return tx
}

func TestDripSuccess(t *testing.T) {
	h := newHarness(t, options{})
	to := newRecipient(t)
	w := h.drip("address=" + to)
	tx := assertDripOK(t, h, w, to, faucet.DefaultAmount)
	if got := tx.SenderAddress(); got != h.keys[0].TestnetAddress() {
		t.Errorf("sender = %s, want the faucet key %s", got, h.keys[0].TestnetAddress())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	if ao := w.Header().Get("Access-Control-Allow-Origin"); ao != "*" {
		t.Errorf("Access-Control-Allow-Origin = %q", ao)
	}
	// The body is written by hand; it must be what the encoder writes.
	want, err := marshalJSON(dripSuccess{Success: true, TxID: tx.TxID().Hex0x(), TxRaw: hex.EncodeToString(tx.Serialize())})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Body.String(); got != string(want) {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
	if n := w.Header().Get("Content-Length"); n != strconv.Itoa(len(want)) {
		t.Errorf("Content-Length %s, want %d", n, len(want))
	}
}

// TestDripAnyBody: with the address in the query, whatever body and
// Content-Type clients send is ignored (explorer PR#2821 sends JSON with no
// body; old clients send form or JSON bodies).
func TestDripAnyBody(t *testing.T) {
	h := newHarness(t, options{})
	cases := map[string]struct {
		body, contentType string
	}{
		"no body":                 {"", ""},
		"json type, empty body":   {"", "application/json"},
		"null":                    {"null", "application/json"},
		"empty object":            {"{}", "application/json"},
		"other address in body":   {`{"address":"ST000000000000000000002AMW42H"}`, "application/json"},
		"form":                    {"stacking=false", "application/x-www-form-urlencoded"},
		"garbage, odd type":       {"\x00\x01not json", "application/octet-stream"},
		"text type with json":     {`{"a":1}`, "text/plain"},
		"large body is not read":  {strings.Repeat("x", 64<<10), "application/json"},
		"multipart content type":  {"--b\r\n\r\n--b--", "multipart/form-data; boundary=b"},
		"json with trailing junk": {`{"address":1}junk`, "application/json"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			to := newRecipient(t)
			hdr := map[string]string{}
			if c.contentType != "" {
				hdr["Content-Type"] = c.contentType
			}
			w := h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+to, strings.NewReader(c.body), hdr)
			assertDripOK(t, h, w, to, faucet.DefaultAmount)
		})
	}
}

func TestDripStacking(t *testing.T) {
	h := newHarness(t, options{})
	to := newRecipient(t)
	w := h.drip("address=" + to + "&stacking=true")
	// min_amount_ustx plus the engine's default 20% padding.
	want := devnode.DefaultMinAmountUstx * 120 / 100
	assertDripOK(t, h, w, to, want)

	w = h.drip("address=" + newRecipient(t) + "&stacking=false")
	if w.Code != http.StatusOK {
		t.Fatalf("stacking=false: %d %s", w.Code, w.Body)
	}
}

// badChecksum returns a fresh testnet address with its last character changed.
func badChecksum(t *testing.T) string {
	t.Helper()
	a := newRecipient(t)
	last := a[len(a)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return a[:len(a)-1] + string(repl)
}

func TestDripBadRequest(t *testing.T) {
	h := newHarness(t, options{})
	good := newRecipient(t)
	mainnet := newKey(t).Address(stacks.AddressVersionMainnetSingleSig).String()
	mainnetMulti := newKey(t).Address(stacks.AddressVersionMainnetMultiSig).String()
	cases := map[string]struct {
		query       string
		body        string
		contentType string
		wantErr     string // substring of "error"
		wantReason  string
		wantHelp    string // substring of "help"; "" means no help field
	}{
		"no address":    {query: "", wantErr: "address required", wantReason: "address_required"},
		"empty address": {query: "address=", wantErr: "address required", wantReason: "address_required"},
		"blank address": {query: "address=%20%20", wantErr: "address required", wantReason: "address_required"},
		"only stacking": {query: "stacking=true", wantErr: "address required", wantReason: "address_required"},
		"empty json body": {
			query: "", body: "{}", contentType: "application/json",
			wantErr: "address required", wantReason: "address_required",
		},
		"address in json body": {
			body: `{"address":"` + good + `"}`, contentType: "application/json",
			wantErr: "query parameter", wantReason: "address_in_body",
			wantHelp: "curl -X POST 'https://example.com/extended/v1/faucets/stx?address=" + good + "'",
		},
		"address and stacking in json body, no content type": {
			body:    `{"address":"` + good + `","stacking":true}`,
			wantErr: "query parameter", wantReason: "address_in_body",
			wantHelp: "?address=" + good + "&stacking=true'",
		},
		"address in form body": {
			body: "address=" + good, contentType: "application/x-www-form-urlencoded",
			wantErr: "query parameter", wantReason: "address_in_body",
			wantHelp: "?address=" + good + "'",
		},
		"hostile address in body is not echoed": {
			body: `{"address":"x'; rm -rf /"}`, contentType: "application/json",
			wantErr: "query parameter", wantReason: "address_in_body",
			wantHelp: "?address=ST…'",
		},
		"bad checksum": {
			query: "address=" + badChecksum(t), wantErr: "invalid address: ", wantReason: "invalid_address",
		},
		"bad character": {
			query: "address=" + good[:5] + "U" + good[6:], wantErr: "bad character", wantReason: "invalid_address",
		},
		"too short": {
			query: "address=ST12", wantErr: "bad length", wantReason: "invalid_address",
		},
		"not an address": {
			query: "address=hello", wantErr: "invalid address: ", wantReason: "invalid_address",
		},
		"bad contract name": {
			query: "address=" + good + ".1bad", wantErr: "bad contract name", wantReason: "invalid_address",
		},
		"mainnet SP": {
			query: "address=" + mainnet, wantErr: mainnet + " is a mainnet address", wantReason: "mainnet_address",
		},
		"mainnet SM": {
			query: "address=" + mainnetMulti, wantErr: "testnet address (ST…)", wantReason: "mainnet_address",
		},
		"address twice": {
			query: "address=" + good + "&address=" + newRecipient(t), wantErr: "more than once", wantReason: "invalid_address",
		},
		"stacking yes":   {query: "address=" + good + "&stacking=yes", wantErr: "invalid stacking value, use true or false", wantReason: "invalid_stacking"},
		"stacking 1":     {query: "address=" + good + "&stacking=1", wantErr: "invalid stacking value, use true or false", wantReason: "invalid_stacking"},
		"stacking TRUE":  {query: "address=" + good + "&stacking=TRUE", wantErr: "invalid stacking value, use true or false", wantReason: "invalid_stacking"},
		"stacking empty": {query: "address=" + good + "&stacking=", wantErr: "invalid stacking value, use true or false", wantReason: "invalid_stacking"},
		"stacking twice": {query: "address=" + good + "&stacking=true&stacking=false", wantErr: "more than once", wantReason: "invalid_stacking"},
		"bad query":      {query: "address=%zz", wantErr: "invalid query string", wantReason: "invalid_query"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			hdr := map[string]string{}
			if c.contentType != "" {
				hdr["Content-Type"] = c.contentType
			}
			w := h.do(http.MethodPost, "http://example.com/extended/v1/faucets/stx?"+c.query, strings.NewReader(c.body), hdr)
			m := assertError(t, w, http.StatusBadRequest, c.wantErr)
			if m["reason"] != c.wantReason {
				t.Errorf("reason = %v, want %s", m["reason"], c.wantReason)
			}
			help, hasHelp := m["help"].(string)
			switch {
			case c.wantHelp == "" && hasHelp:
				t.Errorf("unexpected help %q", help)
			case c.wantHelp != "" && !strings.Contains(help, c.wantHelp):
				t.Errorf("help = %q, want it to contain %q", help, c.wantHelp)
			case c.wantHelp != "" && !strings.Contains(w.Body.String(), c.wantHelp):
				// Read in a terminal: "&" must not arrive as \u0026.
				t.Errorf("raw body %s does not contain %q", w.Body, c.wantHelp)
			}
		})
	}
	if n := h.dn.MempoolSize(); n != 0 {
		t.Errorf("invalid requests reached the node: mempool has %d txs", n)
	}
}

// TestDripBadChecksumMessage pins the parser's precise reason in the answer.
func TestDripBadChecksumMessage(t *testing.T) {
	h := newHarness(t, options{})
	bad := badChecksum(t)
	_, perr := stacks.ParseTestnetPrincipal(bad)
	if perr == nil {
		t.Fatal("test address unexpectedly valid")
	}
	w := h.drip("address=" + bad)
	m := assertError(t, w, http.StatusBadRequest, "bad checksum")
	if m["error"] != "invalid address: "+perr.Error() {
		t.Errorf("error = %q, want %q", m["error"], "invalid address: "+perr.Error())
	}
}

// TestInvalidRequestsDoNotConsumeRateLimit: with one drip allowed per address
// and per IP, any number of rejected requests leave that one drip available.
func TestInvalidRequestsDoNotConsumeRateLimit(t *testing.T) {
	h := newHarness(t, options{limits: guard.Limits{
		PerAddress:         guard.Limit{Requests: 1, Window: time.Hour},
		StackingPerAddress: guard.Limit{Requests: 1, Window: time.Hour},
		PerIP:              guard.Limit{Requests: 1, Window: time.Hour},
	}})
	to := newRecipient(t)
	for _, q := range []string{
		"address=" + to + "&stacking=maybe",
		"address=" + to + "&stacking=",
		"address=" + badChecksum(t),
		"address=" + newKey(t).Address(stacks.AddressVersionMainnetSingleSig).String(),
		"",
		"address=" + to + "&address=" + to,
	} {
		if w := h.drip(q); w.Code != http.StatusBadRequest {
			t.Fatalf("%q: status %d, want 400", q, w.Code)
		}
	}
	w := h.drip("address=" + to)
	assertDripOK(t, h, w, to, faucet.DefaultAmount)
	// The slot is now really used.
	assertError(t, h.drip("address="+to), http.StatusTooManyRequests, "Too many requests")
}

func TestDripRateLimited(t *testing.T) {
	h := newHarness(t, options{limits: guard.Limits{
		PerAddress: guard.Limit{Requests: 2, Window: time.Minute},
	}})
	to := newRecipient(t)
	for i := range 2 {
		if w := h.drip("address=" + to); w.Code != http.StatusOK {
			t.Fatalf("drip %d: %d %s", i, w.Code, w.Body)
		}
	}
	w := h.drip("address=" + to)
	m := assertError(t, w, http.StatusTooManyRequests, "Too many requests")
	if m["error"] != "Too many requests" {
		t.Errorf("error = %q", m["error"])
	}
	if m["reason"] != "rate_limited" {
		t.Errorf("reason = %v", m["reason"])
	}
	ra := w.Header().Get("Retry-After")
	secs, err := strconv.Atoi(ra)
	if err != nil || secs < 1 || secs > 60 {
		t.Fatalf("Retry-After = %q, want integer seconds in [1,60]", ra)
	}
	if got, _ := m["retry_after_seconds"].(float64); int(got) != secs {
		t.Errorf("retry_after_seconds = %v, want %d (the header)", m["retry_after_seconds"], secs)
	}
	next, err := time.Parse(time.RFC3339, m["next_allowed_at"].(string))
	if err != nil || next.Before(time.Now()) {
		t.Errorf("next_allowed_at = %v (%v)", m["next_allowed_at"], err)
	}
	if got := w.Header().Get("Access-Control-Expose-Headers"); !strings.Contains(got, "Retry-After") || !strings.Contains(got, "RateLimit-Policy") {
		t.Errorf("Retry-After not exposed to browsers: %q", got)
	}
	// Another address is not affected.
	if w := h.drip("address=" + newRecipient(t)); w.Code != http.StatusOK {
		t.Fatalf("other address: %d %s", w.Code, w.Body)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		0:                       1,
		-time.Second:            1,
		time.Nanosecond:         1,
		time.Second:             1,
		time.Second + 1:         2,
		59*time.Second + 999999: 60,
		48 * time.Hour:          172800,
	} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestDripForbidden(t *testing.T) {
	t.Run("mainnet node", func(t *testing.T) {
		h := newHarness(t, options{})
		h.dn.SetMainnet(true)
		w := h.drip("address=" + newRecipient(t))
		m := assertError(t, w, http.StatusForbidden, "Faucet is not available")
		if m["reason"] != "disabled" {
			t.Errorf("reason = %v", m["reason"])
		}
		if d, _ := m["detail"].(string); !strings.Contains(d, "mainnet") {
			t.Errorf("detail = %q, want the cause", d)
		}
	})
	t.Run("suspended", func(t *testing.T) {
		h := newHarness(t, options{disabled: true})
		w := h.drip("address=" + newRecipient(t))
		m := assertError(t, w, http.StatusForbidden, "Faucet is not available")
		if d, _ := m["detail"].(string); !strings.Contains(d, "suspended") {
			t.Errorf("detail = %q", d)
		}
		// Status is still served.
		if w := h.do(http.MethodGet, "/extended/v1/status", nil, nil); w.Code != http.StatusOK {
			t.Errorf("status while suspended: %d", w.Code)
		}
		// Invalid input is still a 400, not a 403.
		assertError(t, h.drip("address=nope"), http.StatusBadRequest, "invalid address")
	})
}

// assertNoInternals checks an error body leaks nothing of the node or Go.
func assertNoInternals(t *testing.T, h *harness, body string) {
	t.Helper()
	host := strings.TrimPrefix(h.nodeSrv.URL, "http://")
	for _, leak := range []string{host, "127.0.0.1", "http://", "dial", "connection", "EOF", "goroutine", ".go:", "node info", "node broadcast"} {
		if strings.Contains(body, leak) {
			t.Errorf("body leaks %q: %s", leak, body)
		}
	}
}

func TestDripServerErrors(t *testing.T) {
	t.Run("node down", func(t *testing.T) {
		h := newHarness(t, options{})
		h.dn.SetDown(true)
		w := h.drip("address=" + newRecipient(t))
		m := assertError(t, w, http.StatusInternalServerError, "unavailable")
		if m["reason"] != "node_unavailable" {
			t.Errorf("reason = %v", m["reason"])
		}
		assertNoInternals(t, h, w.Body.String())
		// The cause is in the log instead.
		if logs := h.logs.String(); !strings.Contains(logs, `"msg":"drip failed"`) || !strings.Contains(logs, "node_unavailable") {
			t.Errorf("internal error not logged:\n%s", logs)
		}
	})
	t.Run("node hangs up after the chain check", func(t *testing.T) {
		// The connection drops after the request was sent: the node may
		// hold the tx. The drip answers its txid (an error would invite a
		// retry and a second payment), and the engine delivers the bytes
		// once the node is back.
		h := newHarness(t, options{})
		if w := h.drip("address=" + newRecipient(t)); w.Code != http.StatusOK {
			t.Fatalf("first drip: %d %s", w.Code, w.Body)
		}
		h.dn.SetDown(true)
		w := h.drip("address=" + newRecipient(t))
		if w.Code != http.StatusOK {
			t.Fatalf("in-doubt drip: %d %s", w.Code, w.Body)
		}
		var body dripSuccess
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		txid, err := stacks.ParseTxID(body.TxID)
		if err != nil {
			t.Fatal(err)
		}
		if st := h.dn.TxStatus(txid); st.State != devnode.TxUnknown {
			t.Fatalf("tx %v at a down node", st)
		}
		h.dn.SetDown(false)
		if err := h.f.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := h.dn.TxStatus(txid); st.State != devnode.TxPending {
			t.Fatalf("after the node came back: %+v, want the tx in the mempool", st)
		}
	})
	t.Run("stacking amount unavailable", func(t *testing.T) {
		h := newHarness(t, options{})
		h.dn.SetMinAmountUstx(0) // the engine refuses a zero PoX minimum
		w := h.drip("address=" + newRecipient(t) + "&stacking=true")
		m := assertError(t, w, http.StatusInternalServerError, "stacking amount")
		if m["reason"] != "stacking_amount_unavailable" {
			t.Errorf("reason = %v", m["reason"])
		}
		assertNoInternals(t, h, w.Body.String())
		// The default tier does not depend on PoX.
		if w := h.drip("address=" + newRecipient(t)); w.Code != http.StatusOK {
			t.Errorf("default drip: %d %s", w.Code, w.Body)
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		h := newHarness(t, options{unfunded: true})
		w := h.drip("address=" + newRecipient(t))
		m := assertError(t, w, http.StatusInternalServerError, "out of funds")
		if m["reason"] != "exhausted" {
			t.Errorf("reason = %v", m["reason"])
		}
	})
	t.Run("failed drips are not charged", func(t *testing.T) {
		h := newHarness(t, options{limits: guard.Limits{
			PerAddress: guard.Limit{Requests: 1, Window: time.Hour},
		}})
		to := newRecipient(t)
		h.dn.SetDown(true)
		assertError(t, h.drip("address="+to), http.StatusInternalServerError, "")
		h.dn.SetDown(false)
		w := h.drip("address=" + to)
		assertDripOK(t, h, w, to, faucet.DefaultAmount)
	})
}

// TestDripOutlivesClient: a client that hangs up mid-drip does not abort the
// broadcast, so the transaction is still placed and charged.
func TestDripOutlivesClient(t *testing.T) {
	h := newHarness(t, options{})
	h.dn.SetLatency(100 * time.Millisecond)
	to := newRecipient(t)
	ctx, cancel := context.WithCancel(context.Background())
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/extended/v1/faucets/stx?address="+to, nil)
	r.RemoteAddr = "192.0.2.10:1"
	time.AfterFunc(50*time.Millisecond, cancel)
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, r)
	assertDripOK(t, h, w, to, faucet.DefaultAmount)
}
