package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

// fixtureTxID is the txid of the tx in the v3-transaction fixtures
// (sha512/256 of its bytes, see the source notes).
const fixtureTxID = "73e0cc579aeb7385c7a6a4cb63db46927566695dae537a8409d0de62e6e30eeb"

// fixtureTxHex returns the "tx" of the v3-transaction fixture.
func fixtureTxHex(t *testing.T) string {
	t.Helper()
	var m struct{ Tx string }
	if err := json.Unmarshal(fixture(t, "v3-transaction.json"), &m); err != nil {
		t.Fatal(err)
	}
	return m.Tx
}

// txIDForms are spellings of fixtureTxID the client must normalise to the
// node's route form (64 lowercase hex, no 0x).
var txIDForms = []string{
	fixtureTxID,
	"0x" + fixtureTxID,
	"0X" + strings.ToUpper(fixtureTxID),
	" " + strings.ToUpper(fixtureTxID) + "\n",
}

func TestTransactionFixtures(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	boolp := func(v bool) *bool { return &v }
	tests := []struct {
		file      string
		height    *uint64
		canonical *bool
	}{
		// The OpenAPI example: what nodes before Dec 2025 send.
		{"v3-transaction.json", nil, nil},
		// TransactionResponse as the current struct serialises it.
		{"v3-transaction-with-height.derived.json", u64(1234), boolp(true)},
	}
	for _, tc := range tests {
		for _, id := range txIDForms {
			t.Run(tc.file+"/"+strings.TrimSpace(id[:4]), func(t *testing.T) {
				body := fixture(t, tc.file)
				c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodGet || r.URL.Path != "/v3/transaction/"+fixtureTxID || r.URL.RawQuery != "" {
						t.Errorf("unexpected request %s %s", r.Method, r.URL)
					}
					if got := r.Header.Get("Accept"); got != "application/json" {
						t.Errorf("Accept = %q", got)
					}
					respond(200, "application/json", body)(w, r)
				})
				tx, err := c.Transaction(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if tx.IndexBlockHash != "e0b6c25b1dac0c0e1c75e41ab46bd6d70d9a2d02ffed8f2c0733b6e686289c38" ||
					tx.Result != "(ok true)" || tx.Tx != fixtureTxHex(t) || !tx.IsOK() {
					t.Errorf("got %+v", tx)
				}
				if (tx.BlockHeight == nil) != (tc.height == nil) || tx.BlockHeight != nil && *tx.BlockHeight != *tc.height {
					t.Errorf("BlockHeight = %v, want %v", tx.BlockHeight, tc.height)
				}
				if (tx.IsCanonical == nil) != (tc.canonical == nil) || tx.IsCanonical != nil && *tx.IsCanonical != *tc.canonical {
					t.Errorf("IsCanonical = %v, want %v", tx.IsCanonical, tc.canonical)
				}
			})
		}
	}
}

// MinedTx marshals back into the node's wire format, key order included.
func TestMinedTxRoundTrip(t *testing.T) {
	raw := fixture(t, "v3-transaction-with-height.derived.json")
	var m MinedTx
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, raw); err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Errorf("marshal\n got %s\nwant %s", got, want.String())
	}
	// A block off the tip's ancestry: the node sends block_height null.
	m.BlockHeight, m.IsCanonical = nil, new(bool)
	got, _ = json.Marshal(m)
	if !bytes.Contains(got, []byte(`"block_height":null,"is_canonical":false}`)) {
		t.Errorf("non-canonical marshal: %s", got)
	}
}

func TestMinedTxIsOK(t *testing.T) {
	for result, want := range map[string]bool{
		"(ok true)": true, "(ok u1)": true, "(err u1)": false, "(err none)": false, "": false, "(okay)": false,
	} {
		if got := (&MinedTx{Result: result}).IsOK(); got != want {
			t.Errorf("IsOK(%q) = %v", result, got)
		}
	}
}

func TestTransactionNotFound(t *testing.T) {
	// gettransaction.rs: HttpNotFound::new(format!("No such transaction {txid:?}\n")),
	// text/plain; Txid's Debug is plain lowercase hex.
	body := "No such transaction " + fixtureTxID + "\n"
	for _, id := range txIDForms {
		c := newTestClient(t, respond(404, "text/plain", []byte(body)))
		tx, err := c.Transaction(context.Background(), id)
		if tx != nil || !errors.Is(err, ErrTxNotFound) || errors.Is(err, ErrTxIndexDisabled) {
			t.Fatalf("%q: got %v, %v; want ErrTxNotFound", id, tx, err)
		}
		var he *HTTPError
		if !errors.As(err, &he) || he.StatusCode != 404 || he.Call != CallTransaction || IsUnavailable(err) {
			t.Fatalf("err = %v (%T), want a wrapped *HTTPError 404", err, err)
		}
		if want := "node transaction: HTTP 404 Not Found: No such transaction " + fixtureTxID; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err, want)
		}
	}
}

// Other 404s mean the lookup could not be made, not that the tx is unmined.
func TestTransactionOther404s(t *testing.T) {
	for name, body := range map[string]string{
		"route miss (node before 3.1.0.0.8)": "No such file or directory",
		"proxy page":                         "<html><body>404 Not Found</body></html>",
		"empty":                              "",
	} {
		t.Run(name, func(t *testing.T) {
			c := newTestClient(t, respond(404, "text/plain", []byte(body)))
			_, err := c.Transaction(context.Background(), fixtureTxID)
			var he *HTTPError
			if errors.Is(err, ErrTxNotFound) || !errors.As(err, &he) || he.StatusCode != 404 {
				t.Fatalf("err = %v (%T), want a plain *HTTPError 404", err, err)
			}
			found, err := c.MempoolTx(context.Background(), fixtureTxID)
			if found || !errors.As(err, &he) || he.StatusCode != 404 || he.Call != CallMempoolTx {
				t.Fatalf("MempoolTx = %v, %v; want a plain *HTTPError 404", found, err)
			}
		})
	}
}

func TestTransactionIndexDisabled(t *testing.T) {
	// gettransaction.rs: HttpNotImplemented::new("Transaction indexing is not enabled"), text/plain.
	c := newTestClient(t, respond(501, "text/plain", []byte("Transaction indexing is not enabled")))
	_, err := c.Transaction(context.Background(), "0x"+fixtureTxID)
	if !errors.Is(err, ErrTxIndexDisabled) || errors.Is(err, ErrTxNotFound) {
		t.Fatalf("err = %v, want ErrTxIndexDisabled", err)
	}
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 501 || he.Body != "Transaction indexing is not enabled" {
		t.Fatalf("err = %v (%T), want a wrapped *HTTPError 501", err, err)
	}
	// A lasting node setting: retrying the same node will not help.
	if IsUnavailable(err) || IsUnavailable(wrap(err)) {
		t.Error("ErrTxIndexDisabled must not be unavailable")
	}
	if !strings.Contains(err.Error(), "501 Not Implemented") {
		t.Errorf("Error() = %q", err)
	}
}

func TestTransactionServerErrors(t *testing.T) {
	// gettransaction.rs answers 500 "Failed to load transaction: …" on a DB error.
	c := newTestClient(t, respond(500, "text/plain", []byte("Failed to load transaction: DBError(…)\n")))
	_, err := c.Transaction(context.Background(), fixtureTxID)
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 500 || !IsUnavailable(err) ||
		errors.Is(err, ErrTxNotFound) || errors.Is(err, ErrTxIndexDisabled) {
		t.Fatalf("err = %v (%T)", err, err)
	}
	// A 400 text body (e.g. a GET with a body) is a decode error, as elsewhere.
	c = newTestClient(t, respond(400, "text/plain", []byte("Failed to decode: Invalid Http request: expected 0-length body for GetTransaction")))
	_, err = c.Transaction(context.Background(), fixtureTxID)
	var de *DecodeError
	if !errors.As(err, &de) || de.Call != CallTransaction {
		t.Fatalf("err = %v (%T), want *DecodeError", err, err)
	}
}

func TestTransactionMalformedBodies(t *testing.T) {
	good := func(mut func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(fixture(t, "v3-transaction-with-height.derived.json"), &m); err != nil {
			t.Fatal(err)
		}
		mut(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	otherTx := strings.Replace(fixtureTxHex(t), "1a", "1b", 1) // nonce 26 → 27: another txid
	tests := map[string]string{
		"not json":               "Transaction indexing is not enabled",
		"empty":                  "",
		"null":                   "null",
		"array":                  "[]",
		"truncated":              good(func(map[string]any) {})[:50],
		"missing result":         good(func(m map[string]any) { delete(m, "result") }),
		"missing tx":             good(func(m map[string]any) { delete(m, "tx") }),
		"missing index hash":     good(func(m map[string]any) { delete(m, "index_block_hash") }),
		"short index hash":       good(func(m map[string]any) { m["index_block_hash"] = "e0b6c25b" }),
		"0x index hash":          good(func(m map[string]any) { m["index_block_hash"] = "0x" + m["index_block_hash"].(string)[2:] }),
		"tx not hex":             good(func(m map[string]any) { m["tx"] = "0x" + m["tx"].(string) }),
		"tx of another txid":     good(func(m map[string]any) { m["tx"] = otherTx }),
		"block_height string":    good(func(m map[string]any) { m["block_height"] = "1234" }),
		"block_height negative":  good(func(m map[string]any) { m["block_height"] = -1 }),
		"is_canonical string":    good(func(m map[string]any) { m["is_canonical"] = "true" }),
		"result not string":      good(func(m map[string]any) { m["result"] = true }),
		"tx as number":           good(func(m map[string]any) { m["tx"] = 1 }),
		"index_block_hash array": good(func(m map[string]any) { m["index_block_hash"] = []int{1} }),
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			c := newTestClient(t, respond(200, "application/json", []byte(body)))
			tx, err := c.Transaction(context.Background(), fixtureTxID)
			var re *ResponseError
			if tx != nil || !errors.As(err, &re) || re.Call != CallTransaction || !IsUnavailable(err) {
				t.Fatalf("got %+v, %v (%T); want *ResponseError", tx, err, err)
			}
		})
	}
	// Mined burnchain ops are indexed as "BTC(txid)", not hex.
	t.Run("burnchain op", func(t *testing.T) {
		body := good(func(m map[string]any) { m["tx"] = "BTC(" + strings.Repeat("ab", 32) + ")" })
		c := newTestClient(t, respond(200, "application/json", []byte(body)))
		if tx, err := c.Transaction(context.Background(), fixtureTxID); err != nil || !strings.HasPrefix(tx.Tx, "BTC(") {
			t.Fatalf("got %+v, %v", tx, err)
		}
	})
	// Upper-case block ids from a lenient proxy are normalised.
	t.Run("upper-case index hash", func(t *testing.T) {
		body := good(func(m map[string]any) { m["index_block_hash"] = strings.ToUpper(m["index_block_hash"].(string)) })
		c := newTestClient(t, respond(200, "application/json", []byte(body)))
		tx, err := c.Transaction(context.Background(), fixtureTxID)
		if err != nil || tx.IndexBlockHash != "e0b6c25b1dac0c0e1c75e41ab46bd6d70d9a2d02ffed8f2c0733b6e686289c38" {
			t.Fatalf("got %+v, %v", tx, err)
		}
	})
}

func TestTxLookupInvalidTxID(t *testing.T) {
	var requests, observed atomic.Int32
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		respond(500, "", nil)(w, r)
	}, rpcclient.WithObserver(func(string, time.Duration, error) { observed.Add(1) }))
	for _, id := range []string{"", "0x", fixtureTxID[:63], fixtureTxID + "0", "0x0x" + fixtureTxID[4:], strings.Repeat("g", 64), "../" + fixtureTxID[3:]} {
		if tx, err := c.Transaction(context.Background(), id); tx != nil || err == nil || !strings.HasPrefix(err.Error(), "node transaction: txid") {
			t.Errorf("Transaction(%q) = %v, %v", id, tx, err)
		}
		if found, err := c.MempoolTx(context.Background(), id); found || err == nil || !strings.HasPrefix(err.Error(), "node mempool_tx: txid") {
			t.Errorf("MempoolTx(%q) = %v, %v", id, found, err)
		}
	}
	if requests.Load() != 0 || observed.Load() != 0 {
		t.Errorf("invalid txids made %d requests, %d observations", requests.Load(), observed.Load())
	}
}

func TestMempoolTx(t *testing.T) {
	txHex := fixtureTxHex(t)
	tests := []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		// UnconfirmedTransactionResponse {tx, status}; status is the enum
		// UnconfirmedTransactionStatus (unit variant "Mempool" or Microblock{…}).
		{"mempool", 200, `{"tx":"` + txHex + `","status":"Mempool"}`, true},
		{"microblock", 200, `{"tx":"` + txHex + `","status":{"Microblock":{"block_hash":"` + strings.Repeat("ab", 32) + `","seq":3}}}`, true},
		{"not found", 404, "Transaction " + fixtureTxID + " not found in mempool or unconfirmed microblock stream", false},
	}
	for _, tc := range tests {
		for _, id := range txIDForms {
			t.Run(tc.name+"/"+strings.TrimSpace(id[:4]), func(t *testing.T) {
				c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodGet || r.URL.Path != "/v2/transactions/unconfirmed/"+fixtureTxID || r.URL.RawQuery != "" {
						t.Errorf("unexpected request %s %s", r.Method, r.URL)
					}
					ct := "application/json"
					if tc.status != 200 {
						ct = "text/plain"
					}
					respond(tc.status, ct, []byte(tc.body))(w, r)
				})
				found, err := c.MempoolTx(context.Background(), id)
				if err != nil || found != tc.want {
					t.Fatalf("MempoolTx = %v, %v; want %v", found, err, tc.want)
				}
			})
		}
	}
}

func TestMempoolTxErrors(t *testing.T) {
	txHex := fixtureTxHex(t)
	otherTx := strings.Replace(txHex, "1a", "1b", 1)
	for name, body := range map[string]string{
		"not json":       "Mempool",
		"null":           "null",
		"missing tx":     `{"status":"Mempool"}`,
		"missing status": `{"tx":"` + txHex + `"}`,
		"null status":    `{"tx":"` + txHex + `","status":null}`,
		"tx not hex":     `{"tx":"0x` + txHex + `","status":"Mempool"}`,
		"another tx":     `{"tx":"` + otherTx + `","status":"Mempool"}`,
		"burnchain form": `{"tx":"BTC(` + fixtureTxID + `)","status":"Mempool"}`,
	} {
		t.Run(name, func(t *testing.T) {
			c := newTestClient(t, respond(200, "application/json", []byte(body)))
			found, err := c.MempoolTx(context.Background(), fixtureTxID)
			var re *ResponseError
			if found || !errors.As(err, &re) || re.Call != CallMempoolTx {
				t.Fatalf("got %v, %v (%T); want *ResponseError", found, err, err)
			}
		})
	}
	t.Run("500", func(t *testing.T) {
		c := newTestClient(t, respond(500, "text/plain", []byte("Failed to query transaction x: y")))
		found, err := c.MempoolTx(context.Background(), fixtureTxID)
		var he *HTTPError
		if found || !errors.As(err, &he) || he.StatusCode != 500 || !IsUnavailable(err) {
			t.Fatalf("got %v, %v", found, err)
		}
	})
}

func TestTxLookupObserver(t *testing.T) {
	type obs struct {
		call string
		err  error
	}
	var got []obs
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v3/") {
			respond(501, "text/plain", []byte("Transaction indexing is not enabled"))(w, r)
			return
		}
		respond(404, "text/plain", []byte("Transaction "+fixtureTxID+" not found in mempool or unconfirmed microblock stream"))(w, r)
	}, rpcclient.WithObserver(func(call string, _ time.Duration, err error) { got = append(got, obs{call, err}) }))
	_, errTx := c.Transaction(context.Background(), fixtureTxID)
	found, errMem := c.MempoolTx(context.Background(), fixtureTxID)
	if found || errMem != nil || errTx == nil {
		t.Fatalf("results %v %v %v", errTx, found, errMem)
	}
	want := []obs{{CallTransaction, errTx}, {CallMempoolTx, nil}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("observed %+v, want %+v", got, want)
	}
}
