package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

// Mempool rejection reasons: the exact "reason" strings of stacks-core's
// MemPoolRejection::into_json, which differ from the Rust variant names in
// places (TransferRecipientIsSender -> TransferRecipientCannotEqualSender).
const (
	ReasonSerialization                        = "Serialization"
	ReasonDeserialization                      = "Deserialization"
	ReasonSignatureValidation                  = "SignatureValidation" // also chain-id mismatch and high-S signatures
	ReasonFeeTooLow                            = "FeeTooLow"
	ReasonBadNonce                             = "BadNonce" // tx nonce below the account nonce
	ReasonTooMuchChaining                      = "TooMuchChaining"
	ReasonNotEnoughFunds                       = "NotEnoughFunds"
	ReasonNoSuchContract                       = "NoSuchContract"
	ReasonNoSuchPublicFunction                 = "NoSuchPublicFunction"
	ReasonBadFunctionArgument                  = "BadFunctionArgument"
	ReasonContractAlreadyExists                = "ContractAlreadyExists"
	ReasonPoisonMicroblocksDoNotConflict       = "PoisonMicroblocksDoNotConflict"
	ReasonPoisonMicroblockHasUnknownPubKeyHash = "PoisonMicroblockHasUnknownPubKeyHash"
	ReasonPoisonMicroblockIsInvalid            = "PoisonMicroblockIsInvalid"
	ReasonBadAddressVersionByte                = "BadAddressVersionByte"
	ReasonNoCoinbaseViaMempool                 = "NoCoinbaseViaMempool"
	ReasonNoTenureChangeViaMempool             = "NoTenureChangeViaMempool"
	ReasonServerFailureNoSuchChainTip          = "ServerFailureNoSuchChainTip"
	ReasonServerFailureDatabase                = "ServerFailureDatabase"
	ReasonServerFailureOther                   = "ServerFailureOther"
	ReasonConflictingNonceInMempool            = "ConflictingNonceInMempool" // same nonce pending with fee >= ours
	ReasonBadTransactionVersion                = "BadTransactionVersion"
	ReasonTransferRecipientCannotEqualSender   = "TransferRecipientCannotEqualSender"
	ReasonTransferAmountMustBePositive         = "TransferAmountMustBePositive"
	ReasonEstimatorError                       = "EstimatorError"
	ReasonTemporarilyBlacklisted               = "TemporarilyBlacklisted"
)

// maxErrorExcerpt bounds how much of a response body an error carries, so
// logs stay small and a hostile peer cannot stuff them.
const maxErrorExcerpt = 200

// RejectionError is a mempool rejection from POST /v2/transactions
// (HTTP 400, JSON body {"error","reason","reason_data"?,"txid"}).
type RejectionError struct {
	// Reason is the machine-readable code, one of the Reason* constants.
	Reason string
	// ReasonData is the optional reason-specific object; nil when absent.
	ReasonData json.RawMessage
	// TxID is the rejected tx's id, normalised to 64 lowercase hex when valid.
	TxID string
	// Message is the body's "error" field, normally "transaction rejected".
	Message string
}

func (e *RejectionError) Error() string {
	var b strings.Builder
	b.WriteString("node rejected transaction")
	if e.TxID != "" {
		b.WriteString(" " + e.TxID)
	}
	b.WriteString(": " + e.Reason)
	if len(e.ReasonData) > 0 {
		var compact bytes.Buffer
		data := []byte(e.ReasonData)
		if json.Compact(&compact, data) == nil {
			data = compact.Bytes()
		}
		b.WriteString(" " + excerpt(data))
	}
	return b.String()
}

// IsServerFailure reports whether the node blamed itself (database, missing
// chain tip while syncing, internal error) rather than the transaction.
func (e *RejectionError) IsServerFailure() bool {
	return strings.HasPrefix(e.Reason, "ServerFailure")
}

// DataMessage returns reason_data.message, which many reasons carry, or "".
func (e *RejectionError) DataMessage() string {
	var d struct {
		Message string `json:"message"`
	}
	if len(e.ReasonData) == 0 || json.Unmarshal(e.ReasonData, &d) != nil {
		return ""
	}
	return d.Message
}

// NonceRejection is reason_data of BadNonce and TooMuchChaining.
// For TooMuchChaining, Expected is the highest admissible nonce.
type NonceRejection struct {
	Expected  uint64 `json:"expected"`
	Actual    uint64 `json:"actual"`
	Principal string `json:"principal"`
	IsOrigin  bool   `json:"is_origin"` // false: the sponsor's nonce is wrong
	Message   string `json:"message,omitempty"`
}

// Nonce decodes reason_data of a BadNonce or TooMuchChaining rejection.
func (e *RejectionError) Nonce() (*NonceRejection, error) {
	return reasonData[NonceRejection](e, "nonce", ReasonBadNonce, ReasonTooMuchChaining)
}

// FeeRejection is reason_data of FeeTooLow, in µSTX.
type FeeRejection struct {
	Expected uint64 `json:"expected"` // minimum fee the node wants
	Actual   uint64 `json:"actual"`   // fee the tx paid
}

// Fee decodes reason_data of a FeeTooLow rejection.
func (e *RejectionError) Fee() (*FeeRejection, error) {
	return reasonData[FeeRejection](e, "fee", ReasonFeeTooLow)
}

// FundsRejection is reason_data of NotEnoughFunds, in µSTX.
type FundsRejection struct {
	Expected uint64 // amount needed (transfer amount and/or fee)
	Actual   uint64 // amount available
}

// Funds decodes reason_data of a NotEnoughFunds rejection, whose amounts are
// u128 hex strings rather than JSON numbers.
func (e *RejectionError) Funds() (*FundsRejection, error) {
	type u128s struct {
		Expected string `json:"expected"`
		Actual   string `json:"actual"`
	}
	raw, err := reasonData[u128s](e, "funds", ReasonNotEnoughFunds)
	if err != nil {
		return nil, err
	}
	exp, err := ParseU128(raw.Expected)
	if err != nil {
		return nil, fmt.Errorf("node: NotEnoughFunds expected: %w", err)
	}
	act, err := ParseU128(raw.Actual)
	if err != nil {
		return nil, fmt.Errorf("node: NotEnoughFunds actual: %w", err)
	}
	return &FundsRejection{Expected: exp, Actual: act}, nil
}

// reasonData decodes e's reason_data as a T, which only the reasons
// carry; what names the data in the error for another reason.
func reasonData[T any](e *RejectionError, what string, reasons ...string) (*T, error) {
	if !slices.Contains(reasons, e.Reason) {
		return nil, fmt.Errorf("node: reason %q carries no %s data", e.Reason, what)
	}
	if len(e.ReasonData) == 0 {
		return nil, fmt.Errorf("node: %s rejection has no reason_data", e.Reason)
	}
	d := new(T)
	if err := json.Unmarshal(e.ReasonData, d); err != nil {
		return nil, fmt.Errorf("node: decoding %s reason_data: %w", e.Reason, err)
	}
	return d, nil
}

// DecodeError means the node could not parse our request (HTTP 400 with a
// text/plain "Failed to decode: …" body). Retrying the same bytes won't help.
type DecodeError struct {
	Call    string
	Message string // body excerpt
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("node %s: request not decodable by node: %s", e.Call, e.Message)
}

// Sentinels that a call wraps, for errors.Is, around the *HTTPError it
// came from (see sentinel).
var (
	// ErrTxNotFound is wrapped by Transaction's error when the node answers
	// its own 404 "No such transaction …": it has not indexed txid as mined
	// (unknown, still in the mempool, or mined before txindex was turned on).
	ErrTxNotFound = errors.New("node: transaction not found")
	// ErrTxIndexDisabled is wrapped by Transaction's error when the node
	// answers 501: it runs without txindex and cannot look mined txs up.
	// Retrying the same node will not help, so IsUnavailable is false for it.
	ErrTxIndexDisabled = errors.New("node: transaction index not enabled")
	// ErrNoFeeEstimate is wrapped by TransactionFeeEstimate's error when the
	// node answers 400 {"reason":"NoEstimateAvailable",…}: its estimator has
	// no data for this kind of payload yet (typical on a young or quiet
	// chain). Fall back to a length-based fee.
	ErrNoFeeEstimate = errors.New("node: no fee estimate available")
	// ErrFeeEstimationDisabled is wrapped by TransactionFeeEstimate's error
	// when the node answers 400 with the bare JSON string "Fee estimation not
	// supported on this node" ([fee_estimation] disabled = true).
	ErrFeeEstimationDisabled = errors.New("node: fee estimation disabled")
)

// sentinelError lets a response match both a sentinel (errors.Is) and the
// *HTTPError it came from (errors.As), with the HTTPError's message.
type sentinelError struct {
	sentinel error
	err      error
}

func sentinel(s, err error) error        { return &sentinelError{sentinel: s, err: err} }
func (e *sentinelError) Error() string   { return e.err.Error() }
func (e *sentinelError) Unwrap() []error { return []error{e.sentinel, e.err} }

// The errors of getting an answer at all, shared with btcnode (their
// Client field is "node" here):
//
//   - HTTPError: a non-2xx status with no closer reading (not a rejection
//     or a decode error);
//   - TransportError: no response at all (DNS, refused, reset, TLS,
//     timeout, the body read failing midway);
//   - ResponseError: a 2xx response whose body is not in the node's
//     format, typically a misconfigured proxy or a node version we don't
//     understand;
//   - ThrottledError: a call not sent, because the node answered 429 and
//     the wait it asked for has not passed.
type (
	HTTPError      = rpcclient.HTTPError
	TransportError = rpcclient.TransportError
	ResponseError  = rpcclient.ResponseError
	ThrottledError = rpcclient.ThrottledError
)

// RetryAfter is how long the node asked to wait, from err
// (rpcclient.RetryAfter): 0 when it did not say.
func RetryAfter(err error) time.Duration { return rpcclient.RetryAfter(err) }

// IsThrottled reports whether err is the node's rate limiting
// (rpcclient.IsThrottled).
func IsThrottled(err error) bool { return rpcclient.IsThrottled(err) }

func responseError(call string, err error) error {
	return &ResponseError{Client: name, Call: call, Err: err}
}

// IsUnavailable reports whether err means the node cannot serve us right now:
// transport failures and timeouts, 5xx and 429 statuses, and unintelligible
// 2xx bodies (rpcclient.IsUnavailable). It is false for rejections, decode
// errors, other 4xx, for ErrTxIndexDisabled (a lasting node setting, not an
// outage: the 501 it wraps would count otherwise), and for cancellation by
// the caller (that is not the node's fault).
func IsUnavailable(err error) bool {
	return !errors.Is(err, ErrTxIndexDisabled) && rpcclient.IsUnavailable(err)
}

// statusError classifies a non-2xx response.
func statusError(call string, resp *rpcclient.Response) error {
	if resp.Status == http.StatusBadRequest {
		if call == CallBroadcast {
			if rej := parseRejection(resp.Body); rej != nil {
				return rej
			}
		}
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if mt == "text/plain" || bytes.HasPrefix(bytes.TrimSpace(resp.Body), []byte("Failed to decode")) {
			return &DecodeError{Call: call, Message: resp.Excerpt(maxErrorExcerpt)}
		}
	}
	return rpcclient.NewHTTPError(name, call, resp, maxErrorExcerpt)
}

// parseRejection returns nil unless body is a mempool rejection object.
// Content-Type is not checked: proxies sometimes rewrite it.
func parseRejection(body []byte) *RejectionError {
	var w struct {
		Error      string          `json:"error"`
		Reason     string          `json:"reason"`
		ReasonData json.RawMessage `json:"reason_data"`
		TxID       string          `json:"txid"`
	}
	if err := json.Unmarshal(body, &w); err != nil || w.Reason == "" {
		return nil //nolint:nilerr // a body that is not a rejection is no rejection
	}
	rej := &RejectionError{Reason: w.Reason, Message: w.Error}
	if d := bytes.TrimSpace(w.ReasonData); len(d) > 0 && !bytes.Equal(d, []byte("null")) {
		rej.ReasonData = w.ReasonData
	}
	if id, err := NormalizeTxID(w.TxID); err == nil {
		rej.TxID = id
	} else {
		rej.TxID = excerpt([]byte(w.TxID))
	}
	return rej
}

// excerpt makes b safe to embed in an error (rpcclient.Excerpt).
func excerpt(b []byte) string { return rpcclient.Excerpt(b, maxErrorExcerpt) }
