package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

func TestTransactionFeeEstimateRequestMatchesFixture(t *testing.T) {
	var want feeEstimateRequest
	if err := json.Unmarshal(fixture(t, "v2-fees-transaction-request.json"), &want); err != nil {
		t.Fatal(err)
	}
	payload, err := hex.DecodeString(want.TransactionPayload)
	if err != nil {
		t.Fatal(err)
	}
	var gotBody []byte
	var gotCT, gotMethod, gotPath string
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		gotMethod, gotPath, gotCT = r.Method, r.URL.Path, r.Header.Get("Content-Type")
		gotBody, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(fixture(t, "v2-fees-transaction-response.json"))
	})
	if _, err := c.TransactionFeeEstimate(context.Background(), payload, want.EstimatedLen); err != nil {
		t.Fatal(err)
	}
	if gotMethod != http.MethodPost || gotPath != "/v2/fees/transaction" || gotCT != "application/json" {
		t.Fatalf("request %s %s (%s)", gotMethod, gotPath, gotCT)
	}
	var got, wantMap map[string]any
	if err := json.Unmarshal(gotBody, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(fixture(t, "v2-fees-transaction-request.json"), &wantMap)
	if !reflect.DeepEqual(got, wantMap) {
		t.Fatalf("body %s, want the fixture %v", gotBody, wantMap)
	}
	if bytes.Contains(gotBody, []byte(`"0x`)) {
		t.Fatalf("payload hex has 0x: %s", gotBody)
	}
}

func TestTransactionFeeEstimateOmitsZeroLen(t *testing.T) {
	var gotBody []byte
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		gotBody, _ = io.ReadAll(r.Body)
		_, _ = w.Write(fixture(t, "v2-fees-transaction-response.json"))
	})
	if _, err := c.TransactionFeeEstimate(context.Background(), []byte{0x02}, 0); err != nil {
		t.Fatal(err)
	}
	if string(gotBody) != `{"transaction_payload":"02"}` {
		t.Fatalf("body %s", gotBody)
	}
}

func TestTransactionFeeEstimateDecodesFixtures(t *testing.T) {
	for _, tc := range []struct {
		name string
		want FeeEstimate
	}{
		{"v2-fees-transaction-response.json", FeeEstimate{
			EstimatedCost:       ExecutionCost{ReadCount: 19, ReadLength: 4814, Runtime: 7175000, WriteCount: 2, WriteLength: 1020},
			EstimatedCostScalar: 14,
			Estimations: []FeeRateEstimation{
				{FeeRate: 1.2410714285714286, Fee: 17},
				{FeeRate: 8.958333333333332, Fee: 125},
				{FeeRate: 10, Fee: 140},
			},
			CostScalarChangeByByte: 0.00476837158203125,
		}},
		{"v2-fees-transaction-response-stacksjs.json", FeeEstimate{
			EstimatedCost:       ExecutionCost{WriteLength: 1138, WriteCount: 10, ReadLength: 60638, ReadCount: 34, Runtime: 645443},
			EstimatedCostScalar: 12,
			Estimations: []FeeRateEstimation{
				{FeeRate: 1083.4556141387698, Fee: 13001},
				{FeeRate: 1083.4556141387698, Fee: 13001},
				{FeeRate: 1083.4556141387698, Fee: 13001},
			},
			CostScalarChangeByByte: 0.00476837158203125,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := fixture(t, tc.name)
			var calls []string
			c := newTestClient(t, respond(http.StatusOK, "application/json", body),
				rpcclient.WithObserver(func(call string, _ time.Duration, _ error) { calls = append(calls, call) }))
			got, err := c.TransactionFeeEstimate(context.Background(), []byte{0x02, 0x1a}, 350)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", *got, tc.want)
			}
			if got.Low() != tc.want.Estimations[0].Fee || got.Middle() != tc.want.Estimations[1].Fee || got.High() != tc.want.Estimations[2].Fee {
				t.Fatal("Low/Middle/High")
			}
			if len(calls) != 1 || calls[0] != CallFeeTransaction {
				t.Fatalf("observer calls %v", calls)
			}
			// Marshalling gives back the node's wire format.
			out, _ := json.Marshal(got)
			var a, b any
			_ = json.Unmarshal(out, &a)
			_ = json.Unmarshal(body, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("round trip %s", out)
			}
		})
	}
}

func TestTransactionFeeEstimateErrors(t *testing.T) {
	t.Run("no estimate", func(t *testing.T) {
		var obsErr error
		c := newTestClient(t, respond(http.StatusBadRequest, "application/json", fixture(t, "v2-fees-transaction-error-noestimate.json")),
			rpcclient.WithObserver(func(_ string, _ time.Duration, err error) { obsErr = err }))
		_, err := c.TransactionFeeEstimate(context.Background(), []byte{0x02}, 200)
		if !errors.Is(err, ErrNoFeeEstimate) {
			t.Fatalf("err %v, want ErrNoFeeEstimate", err)
		}
		var he *HTTPError
		if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest || he.Call != CallFeeTransaction {
			t.Fatalf("err %#v, want a 400 *HTTPError", err)
		}
		if IsUnavailable(err) || errors.Is(err, ErrFeeEstimationDisabled) {
			t.Fatal("wrong classification")
		}
		if !errors.Is(obsErr, ErrNoFeeEstimate) {
			t.Fatalf("observer saw %v", obsErr)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		c := newTestClient(t, respond(http.StatusBadRequest, "application/json", []byte(`"Fee estimation not supported on this node"`)))
		_, err := c.TransactionFeeEstimate(context.Background(), []byte{0x02}, 200)
		if !errors.Is(err, ErrFeeEstimationDisabled) || errors.Is(err, ErrNoFeeEstimate) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("database error", func(t *testing.T) {
		c := newTestClient(t, respond(http.StatusBadRequest, "application/json",
			[]byte(`{"error":"Estimation could not be performed","reason":"DatabaseError","reason_data":{"message":"x"}}`)))
		_, err := c.TransactionFeeEstimate(context.Background(), []byte{0x02}, 200)
		var he *HTTPError
		if !errors.As(err, &he) || errors.Is(err, ErrNoFeeEstimate) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("decode error", func(t *testing.T) {
		c := newTestClient(t, respond(http.StatusBadRequest, "text/plain", []byte("Failed to decode: Invalid content-type: expected application/json")))
		_, err := c.TransactionFeeEstimate(context.Background(), []byte{0x02}, 200)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("err %v, want *DecodeError", err)
		}
	})
	t.Run("bad 200 body", func(t *testing.T) {
		for _, body := range []string{`not json`, `{"estimations":[{"fee":1,"fee_rate":1}]}`} {
			c := newTestClient(t, respond(http.StatusOK, "application/json", []byte(body)))
			_, err := c.TransactionFeeEstimate(context.Background(), []byte{0x02}, 200)
			var re *ResponseError
			if !errors.As(err, &re) || !IsUnavailable(err) {
				t.Fatalf("%s: err %v, want *ResponseError", body, err)
			}
		}
	})
	t.Run("503", func(t *testing.T) {
		c := newTestClient(t, respond(http.StatusServiceUnavailable, "text/plain", []byte("busy")))
		_, err := c.TransactionFeeEstimate(context.Background(), []byte{0x02}, 200)
		if !IsUnavailable(err) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("local checks", func(t *testing.T) {
		called := false
		c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) { called = true })
		if _, err := c.TransactionFeeEstimate(context.Background(), nil, 200); err == nil {
			t.Fatal("empty payload accepted")
		}
		if _, err := c.TransactionFeeEstimate(context.Background(), make([]byte, MaxTxBytes/2), 0); err == nil {
			t.Fatal("oversized payload accepted")
		}
		if called {
			t.Fatal("request sent")
		}
	})
	t.Run("no userinfo in errors", func(t *testing.T) {
		c, err := New("http://user:s3cret@" + closedAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.TransactionFeeEstimate(context.Background(), []byte{0x02}, 200)
		var te *TransportError
		if !errors.As(err, &te) || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("err %v", err)
		}
	})
}
