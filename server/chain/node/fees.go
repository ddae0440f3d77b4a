package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// CallFeeTransaction is the observer call name of TransactionFeeEstimate.
const CallFeeTransaction = "fee_transaction"

// Estimator error reasons of POST /v2/fees/transaction
// (EstimatorError::into_json).
const (
	ReasonNoEstimateAvailable = "NoEstimateAvailable"
	ReasonDatabaseError       = "DatabaseError"
)

const msgFeeEstimationDisabled = "Fee estimation not supported on this node"

// FeeRateEstimation is one of the node's RPCFeeEstimate entries.
type FeeRateEstimation struct {
	FeeRate float64 `json:"fee_rate"` // µSTX per unit of cost scalar
	Fee     uint64  `json:"fee"`      // total fee in µSTX, at least estimated_len
}

// FeeEstimate is the 200 body of POST /v2/fees/transaction
// (RPCFeeEstimateResponse). Estimations holds exactly three entries, low,
// middle and high, in that order.
type FeeEstimate struct {
	EstimatedCost          ExecutionCost       `json:"estimated_cost"`
	EstimatedCostScalar    uint64              `json:"estimated_cost_scalar"`
	Estimations            []FeeRateEstimation `json:"estimations"`
	CostScalarChangeByByte float64             `json:"cost_scalar_change_by_byte"`
}

// Low, Middle and High return the fees (µSTX) of the three estimations.
func (f *FeeEstimate) Low() uint64    { return f.Estimations[0].Fee }
func (f *FeeEstimate) Middle() uint64 { return f.Estimations[1].Fee }
func (f *FeeEstimate) High() uint64   { return f.Estimations[2].Fee }

// feeEstimateRequest is the node's FeeRateEstimateRequestBody.
type feeEstimateRequest struct {
	EstimatedLen       uint64 `json:"estimated_len,omitempty"`
	TransactionPayload string `json:"transaction_payload"`
}

// TransactionFeeEstimate asks POST /v2/fees/transaction what fee a
// transaction with this payload would need. payload is the consensus
// serialisation of the TransactionPayload only (for a contract call, the
// bytes from the 0x02 type byte to the end of the arguments), not the whole
// transaction. estimatedLen should be the full signed transaction's length:
// the node uses max(estimatedLen, len(payload)) and raises every fee to at
// least that many µSTX, the mempool's minimum relay fee; 0 omits it.
//
// The node's 400 "NoEstimateAvailable" wraps ErrNoFeeEstimate and its
// "estimation disabled" answer wraps ErrFeeEstimationDisabled, both around
// the *HTTPError, for errors.Is.
func (c *Client) TransactionFeeEstimate(ctx context.Context, payload []byte, estimatedLen uint64) (est *FeeEstimate, err error) {
	if len(payload) == 0 {
		return nil, fmt.Errorf("node %s: empty payload", CallFeeTransaction)
	}
	// The JSON body (hex doubles the payload) must stay below MAX_PAYLOAD_LEN.
	if len(payload) > (MaxTxBytes-64)/2 {
		return nil, fmt.Errorf("node %s: payload is %d bytes, too large for the node's request limit", CallFeeTransaction, len(payload))
	}
	reqBody, err := json.Marshal(feeEstimateRequest{EstimatedLen: estimatedLen, TransactionPayload: hex.EncodeToString(payload)})
	if err != nil {
		return nil, fmt.Errorf("node %s: encoding request: %w", CallFeeTransaction, err)
	}
	defer c.rc.Observe(CallFeeTransaction)(&err)
	resp, err := c.rc.Do(ctx, CallFeeTransaction, http.MethodPost, "/v2/fees/transaction", reqBody, "application/json")
	if err != nil {
		return nil, err
	}
	if resp.Status/100 != 2 {
		serr := statusError(CallFeeTransaction, resp)
		if resp.Status == http.StatusBadRequest {
			switch feeErrorKind(resp.Body) {
			case ReasonNoEstimateAvailable:
				return nil, sentinel(ErrNoFeeEstimate, serr)
			case msgFeeEstimationDisabled:
				return nil, sentinel(ErrFeeEstimationDisabled, serr)
			}
		}
		return nil, serr
	}
	est = new(FeeEstimate)
	if err := json.Unmarshal(resp.Body, est); err != nil {
		return nil, responseError(CallFeeTransaction, err)
	}
	if len(est.Estimations) != 3 {
		return nil, responseError(CallFeeTransaction, fmt.Errorf("got %d estimations, want 3 (low, middle, high)", len(est.Estimations)))
	}
	return est, nil
}

// feeErrorKind returns the "reason" of an estimator error object, or the
// string itself when the body is a bare JSON string, else "".
func feeErrorKind(body []byte) string {
	body = bytes.TrimSpace(body)
	var s string
	if json.Unmarshal(body, &s) == nil {
		return s
	}
	var w struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(body, &w) == nil {
		return w.Reason
	}
	return ""
}
