package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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
	if e.Reason != ReasonBadNonce && e.Reason != ReasonTooMuchChaining {
		return nil, fmt.Errorf("node: reason %q carries no nonce data", e.Reason)
	}
	var d NonceRejection
	if err := e.decodeData(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// FeeRejection is reason_data of FeeTooLow, in µSTX.
type FeeRejection struct {
	Expected uint64 `json:"expected"` // minimum fee the node wants
	Actual   uint64 `json:"actual"`   // fee the tx paid
}

// Fee decodes reason_data of a FeeTooLow rejection.
func (e *RejectionError) Fee() (*FeeRejection, error) {
	if e.Reason != ReasonFeeTooLow {
		return nil, fmt.Errorf("node: reason %q carries no fee data", e.Reason)
	}
	var d FeeRejection
	if err := e.decodeData(&d); err != nil {
		return nil, err
	}
	return &d, nil
}

// FundsRejection is reason_data of NotEnoughFunds, in µSTX.
type FundsRejection struct {
	Expected uint64 // amount needed (transfer amount and/or fee)
	Actual   uint64 // amount available
}

// Funds decodes reason_data of a NotEnoughFunds rejection, whose amounts are
// u128 hex strings rather than JSON numbers.
func (e *RejectionError) Funds() (*FundsRejection, error) {
	if e.Reason != ReasonNotEnoughFunds {
		return nil, fmt.Errorf("node: reason %q carries no funds data", e.Reason)
	}
	var raw struct {
		Expected string `json:"expected"`
		Actual   string `json:"actual"`
	}
	if err := e.decodeData(&raw); err != nil {
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

func (e *RejectionError) decodeData(v any) error {
	if len(e.ReasonData) == 0 {
		return fmt.Errorf("node: %s rejection has no reason_data", e.Reason)
	}
	if err := json.Unmarshal(e.ReasonData, v); err != nil {
		return fmt.Errorf("node: decoding %s reason_data: %w", e.Reason, err)
	}
	return nil
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

// HTTPError is any other non-2xx response.
type HTTPError struct {
	Call       string
	StatusCode int
	Body       string // sanitised excerpt, at most ~200 bytes
	// RetryAfter is the Retry-After header in seconds form, if a proxy sent one.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("node %s: HTTP %d", e.Call, e.StatusCode)
	if t := http.StatusText(e.StatusCode); t != "" {
		msg += " " + t
	}
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// TransportError is a failure to get a response at all: DNS, connection
// refused or reset, TLS, timeout, or the body read failing midway.
type TransportError struct {
	Call string
	Err  error
}

func (e *TransportError) Error() string { return "node " + e.Call + ": " + e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// ResponseError is a 2xx response whose body is not in the node's format,
// typically a misconfigured proxy or a node version we don't understand.
type ResponseError struct {
	Call string
	Err  error
}

func (e *ResponseError) Error() string {
	return "node " + e.Call + ": invalid response: " + e.Err.Error()
}
func (e *ResponseError) Unwrap() error { return e.Err }

// IsUnavailable reports whether err means the node cannot serve us right now:
// transport failures and timeouts, 5xx and 429 statuses, and unintelligible
// 2xx bodies. It is false for rejections, decode errors, other 4xx, for
// ErrTxIndexDisabled (a lasting node setting, not an outage), and for
// cancellation by the caller (that is not the node's fault).
func IsUnavailable(err error) bool {
	if err == nil || errors.Is(err, ErrTxIndexDisabled) {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.StatusCode >= 500 || he.StatusCode == http.StatusTooManyRequests
	}
	var te *TransportError
	if errors.As(err, &te) {
		return !errors.Is(err, context.Canceled)
	}
	var re *ResponseError
	if errors.As(err, &re) {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// statusError classifies a non-2xx response.
func statusError(call string, status int, hdr http.Header, body []byte) error {
	if status == http.StatusBadRequest {
		if call == CallBroadcast {
			if rej := parseRejection(body); rej != nil {
				return rej
			}
		}
		mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type"))
		if mt == "text/plain" || bytes.HasPrefix(bytes.TrimSpace(body), []byte("Failed to decode")) {
			return &DecodeError{Call: call, Message: excerpt(body)}
		}
	}
	he := &HTTPError{Call: call, StatusCode: status, Body: excerpt(body)}
	if secs, err := strconv.Atoi(strings.TrimSpace(hdr.Get("Retry-After"))); err == nil && secs >= 0 {
		he.RetryAfter = time.Duration(secs) * time.Second
	}
	return he
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

// excerpt makes b safe to embed in an error: valid UTF-8, control characters
// replaced by spaces, trimmed, and cut to maxErrorExcerpt bytes.
func excerpt(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), "\uFFFD"))
	s = strings.TrimSpace(s)
	if len(s) <= maxErrorExcerpt {
		return s
	}
	cut := maxErrorExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
