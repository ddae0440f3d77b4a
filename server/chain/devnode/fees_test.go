package devnode

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// payloadOf returns the serialised TransactionPayload of a single-sig
// standard tx: what follows the header, auth and post-condition list.
func payloadOf(t *testing.T, tx *stacks.Transaction) []byte {
	t.Helper()
	bare := *tx
	bare.PostConditions = nil
	p := bare.Serialize()[txOverheadLen:]
	if full := tx.Serialize(); !bytes.HasSuffix(full, p) {
		t.Fatal("payload is not the tail of the serialised tx")
	}
	return p
}

func (h *harness) postFee(body string) response {
	return h.do(http.MethodPost, "/v2/fees/transaction", "application/json", []byte(body))
}

func TestFeeTransactionFixtureRequest(t *testing.T) {
	h := newHarness(t, Config{FeeRate: 3})
	r := h.postFee(string(fixture(t, "v2-fees-transaction-request.json")))
	if r.status != http.StatusOK || r.contentType != "application/json" {
		t.Fatalf("got %d %s %s", r.status, r.contentType, r.body)
	}
	// Same keys in the same order as the node (serde order, kept verbatim by
	// the stacks.js mock; the openapi example was re-serialised sorted).
	if got, want := keysOf(t, []byte(r.body)), keysOf(t, fixture(t, "v2-fees-transaction-response-stacksjs.json")); !reflect.DeepEqual(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	var est node.FeeEstimate
	if err := json.Unmarshal([]byte(r.body), &est); err != nil {
		t.Fatal(err)
	}
	// estimated_len 350 beats the 47-byte payload + 115.
	const l = 350
	want := []node.FeeRateEstimation{{FeeRate: 3, Fee: 3 * l}, {FeeRate: 4.5, Fee: 1575}, {FeeRate: 6, Fee: 6 * l}}
	if !reflect.DeepEqual(est.Estimations, want) || est.EstimatedCostScalar != l {
		t.Fatalf("got %+v", est)
	}
}

func TestFeeTransactionRule(t *testing.T) {
	h := newHarness(t, Config{})
	payload := "021af942874ce525e87f21bbe8c121b12fac831d02f4086765742d696e666f0b7570646174652d696e666f00000000"
	plen := uint64(len(payload) / 2)
	for _, tc := range []struct {
		name string
		rate uint64
		body string
		l    uint64
	}{
		{"no estimated_len", 1, `{"transaction_payload":"` + payload + `"}`, plen + txOverheadLen},
		{"0x prefix, short estimated_len", 1, `{"transaction_payload":"0x` + payload + `","estimated_len":10}`, plen + txOverheadLen},
		{"rate 0 still pays the length", 0, `{"transaction_payload":"` + payload + `","estimated_len":400}`, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.n.SetFeeRate(tc.rate)
			r := h.postFee(tc.body)
			if r.status != http.StatusOK {
				t.Fatalf("got %d %s", r.status, r.body)
			}
			var est node.FeeEstimate
			if err := json.Unmarshal([]byte(r.body), &est); err != nil {
				t.Fatal(err)
			}
			if len(est.Estimations) != 3 {
				t.Fatalf("%d estimations", len(est.Estimations))
			}
			prev := uint64(0)
			for i, e := range est.Estimations {
				if e.Fee < tc.l || e.Fee < prev {
					t.Fatalf("estimation %d: fee %d, floor %d, previous %d", i, e.Fee, tc.l, prev)
				}
				prev = e.Fee
			}
			if est.Low() != max(tc.rate*tc.l, tc.l) {
				t.Fatalf("low fee %d", est.Low())
			}
		})
	}
}

func TestFeeTransactionNoEstimate(t *testing.T) {
	h := newHarness(t, Config{})
	h.n.SetNoFeeEstimate(true)
	r := h.postFee(string(fixture(t, "v2-fees-transaction-request.json")))
	if want := compactFixture(t, "v2-fees-transaction-error-noestimate.json"); r.status != http.StatusBadRequest || r.body != want {
		t.Fatalf("got %d %s, want 400 %s", r.status, r.body, want)
	}
	payload, _ := hex.DecodeString("021af942874ce525e87f21bbe8c121b12fac831d02f4086765742d696e666f0b7570646174652d696e666f00000000")
	_, err := h.c.TransactionFeeEstimate(context.Background(), payload, 350)
	if !errors.Is(err, node.ErrNoFeeEstimate) {
		t.Fatalf("client err %v, want ErrNoFeeEstimate", err)
	}
	h.n.SetNoFeeEstimate(false)
	if _, err := h.c.TransactionFeeEstimate(context.Background(), payload, 350); err != nil {
		t.Fatal(err)
	}
}

func TestFeeTransactionDecodeErrors(t *testing.T) {
	h := newHarness(t, Config{})
	for _, tc := range []struct {
		name, method, ct, body string
		status                 int
		prefix                 string
	}{
		{"wrong method", http.MethodGet, "", "", http.StatusNotFound, msgNoSuchPath},
		{"no content type", http.MethodPost, "", `{"transaction_payload":"00"}`, http.StatusBadRequest, msgFeeWrongCT},
		{"octet-stream", http.MethodPost, "application/octet-stream", `{}`, http.StatusBadRequest, msgFeeWrongCT},
		{"empty", http.MethodPost, "application/json", "", http.StatusBadRequest, msgFeeEmptyBody},
		{"not json", http.MethodPost, "application/json", "x", http.StatusBadRequest, msgFeeBadJSON},
		{"no payload", http.MethodPost, "application/json", `{"estimated_len":5}`, http.StatusBadRequest, msgFeeBadJSON},
		{"bad hex", http.MethodPost, "application/json", `{"transaction_payload":"zz"}`, http.StatusBadRequest, msgFeeBadHex},
		{"bad payload", http.MethodPost, "application/json", `{"transaction_payload":"09"}`, http.StatusBadRequest, msgFeeBadPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			r := h.do(tc.method, "/v2/fees/transaction", tc.ct, body)
			if r.status != tc.status || !strings.HasPrefix(r.body, tc.prefix) || r.contentType != "text/plain" {
				t.Fatalf("got %d %s %q, want %d %q", r.status, r.contentType, r.body, tc.status, tc.prefix)
			}
		})
	}
}

// TestFeeTransactionSendManyEndToEnd estimates a send-many's fee through
// the node client and pays it.
func TestFeeTransactionSendManyEndToEnd(t *testing.T) {
	w := newWallet(t)
	h := newSendManyHarness(t, w)
	h.n.SetFeeRate(2)
	entries := []stacks.SendManyEntry{
		{To: newWallet(t).principal(), Amount: 1_000, Memo: []byte("a")},
		{To: newWallet(t).principal(), Amount: 2_000},
		{To: newWallet(t).principal(), Amount: 3_000, Memo: []byte("memo")},
	}
	draft, err := stacks.NewSendMany(stacks.SendManyParams{Recipients: entries, Fee: 1}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	txLen := uint64(len(draft.Serialize()))
	est, err := h.c.TransactionFeeEstimate(context.Background(), payloadOf(t, draft), txLen)
	if err != nil {
		t.Fatal(err)
	}
	if est.Low() != 2*txLen || est.Middle() != 3*txLen || est.High() != 4*txLen {
		t.Fatalf("fees %d/%d/%d for %d bytes", est.Low(), est.Middle(), est.High(), txLen)
	}
	// Without estimated_len the devnode still covers the post-condition-free
	// tx length, and answers no more than with it here.
	est0, err := h.c.TransactionFeeEstimate(context.Background(), payloadOf(t, draft), 0)
	if err != nil {
		t.Fatal(err)
	}
	if est0.Low() > est.Low() {
		t.Fatalf("no-len low fee %d > %d", est0.Low(), est.Low())
	}
	tx, err := stacks.NewSendMany(stacks.SendManyParams{Recipients: entries, Fee: est.Middle()}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	txid := h.mustAccept(tx)
	mineOne(t, h, txid)
	checkMined(t, h, txid, "(ok true)", false)
}
