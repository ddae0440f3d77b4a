package devnode

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// POST /v2/fees/transaction (stacks-core net/api/postfeerate.rs). The decode
// messages keep the node's "Failed to decode: " prefix; apart from the
// content-type one their wording is approximate.
const (
	msgFeeWrongCT     = decodePrefix + "Invalid content-type: expected application/json"
	msgFeeEmptyBody   = decodePrefix + "Invalid Http request: expected non-empty body for PostFeeRate"
	msgFeeBodyTooBig  = decodePrefix + "Invalid Http request: PostFeeRate body is too big"
	msgFeeBadJSON     = decodePrefix + "Failed to parse JSON body"
	msgFeeBadHex      = decodePrefix + "Bad hex string"
	msgFeeBadPayload  = decodePrefix + "Failed to parse transaction payload: "
	msgNoEstimateData = "No estimate available for the provided payload."
	msgEstimateFailed = "Estimation could not be performed"
)

// txOverheadLen is what a single-sig standard-auth transaction with no
// post-conditions adds to its payload: version 1, chain id 4, auth type 1,
// hash mode 1, signer 20, nonce 8, fee 8, key encoding 1, signature 65,
// anchor mode 1, post-condition mode 1, post-condition count 4.
const txOverheadLen = 115

// costScalarChangeByByte is what the node's default metric
// (ProportionalDotProduct over a 2 MiB block) reports: 10000 / 2097152.
const costScalarChangeByByte = 10000.0 / (2 << 20)

// feeEstimateMultipliers scale the fee-rate setting into the low, middle
// and high estimations.
var feeEstimateMultipliers = [3]float64{1, 1.5, 2}

// estimatorError is EstimatorError::into_json.
type estimatorError struct {
	Error      string `json:"error"`
	Reason     string `json:"reason"`
	ReasonData struct {
		Message string `json:"message"`
	} `json:"reason_data"`
}

func (s *rpcServer) postFeeRate(w http.ResponseWriter, r *http.Request) {
	if !isJSON(contentType(r)) {
		writeText(w, http.StatusBadRequest, msgFeeWrongCT)
		return
	}
	// The node wants 0 < length < MAX_PAYLOAD_LEN.
	body, ok := readBody(w, r, MaxPayloadLen-1, msgFeeEmptyBody, msgFeeBodyTooBig)
	if !ok {
		return
	}
	var req struct {
		EstimatedLen       *uint64 `json:"estimated_len"`
		TransactionPayload *string `json:"transaction_payload"`
	}
	if json.Unmarshal(body, &req) != nil || req.TransactionPayload == nil {
		writeText(w, http.StatusBadRequest, msgFeeBadJSON)
		return
	}
	h := strings.TrimPrefix(*req.TransactionPayload, "0x")
	payload, err := hex.DecodeString(h)
	if err != nil {
		writeText(w, http.StatusBadRequest, msgFeeBadHex)
		return
	}
	if err := decodePayload(payload); err != nil {
		writeText(w, http.StatusBadRequest, msgFeeBadPayload+err.Error())
		return
	}
	var estimatedLen uint64
	if req.EstimatedLen != nil {
		estimatedLen = *req.EstimatedLen
	}

	k := s.faults.snapshot()
	if k.noFeeEstimate {
		e := estimatorError{Error: msgEstimateFailed, Reason: node.ReasonNoEstimateAvailable}
		e.ReasonData.Message = msgNoEstimateData
		writeJSON(w, http.StatusBadRequest, e)
		return
	}
	writeJSON(w, http.StatusOK, feeEstimate(k.feeRate, uint64(len(payload)), estimatedLen))
}

// decodePayload checks that payload is a transaction payload the devnode
// understands by decoding it behind a dummy single-sig header.
func decodePayload(payload []byte) error {
	b := make([]byte, 0, txOverheadLen+len(payload))
	b = append(b, stacks.TxVersionTestnet, 0x80, 0, 0, 0, stacks.AuthTypeStandard, stacks.HashModeP2PKH)
	b = append(b, make([]byte, 20+8+8)...)
	b = append(b, byte(stacks.KeyEncodingCompressed))
	b = append(b, make([]byte, stacks.SignatureLen)...)
	b = append(b, stacks.AnchorModeAny, stacks.PostConditionModeAllow, 0, 0, 0, 0)
	_, err := stacks.DecodeTransaction(append(b, payload...))
	return err
}

// feeEstimate is the devnode's approximation of the node's estimator; see
// doc.go. Costs are not modelled, so estimated_cost is zero and the cost
// scalar is the length the fee is charged for.
func feeEstimate(rate, payloadLen, estimatedLen uint64) node.FeeEstimate {
	length := max(estimatedLen, payloadLen+txOverheadLen)
	est := node.FeeEstimate{
		EstimatedCostScalar:    length,
		Estimations:            make([]node.FeeRateEstimation, len(feeEstimateMultipliers)),
		CostScalarChangeByByte: costScalarChangeByByte,
	}
	for i, m := range feeEstimateMultipliers {
		feeRate := float64(rate) * m
		fee := uint64(math.Min(math.Ceil(feeRate*float64(length)), math.MaxUint64/2))
		est.Estimations[i] = node.FeeRateEstimation{FeeRate: feeRate, Fee: max(fee, length)}
	}
	return est
}
