package faucet

import (
	"errors"
	"fmt"
)

// Reason classifies a failed drip. The HTTP layer maps it to a status code and
// shows it to users, so each value is stable and documented.
type Reason string

const (
	// ReasonExhausted: no key can afford the drip.
	ReasonExhausted Reason = "exhausted"
	// ReasonBusy: every key is at its in-flight cap or the mempool chaining limit.
	ReasonBusy Reason = "busy"
	// ReasonNodeUnavailable: the Stacks node did not answer usefully.
	ReasonNodeUnavailable Reason = "node_unavailable"
	// ReasonRejected: the node refused the transaction for a reason retries cannot fix.
	ReasonRejected Reason = "rejected"
	// ReasonStackingUnavailable: the stacking amount cannot be computed (no PoX info);
	// the faucet never silently falls back to the default amount.
	ReasonStackingUnavailable Reason = "stacking_amount_unavailable"
	// ReasonStoreUnavailable: the state store (SQLite file, Postgres) cannot
	// be read or written; no transaction was sent.
	ReasonStoreUnavailable Reason = "store_unavailable"
	// ReasonDisabled: the node is mainnet, or the node reports a chain id
	// other than the configured one.
	ReasonDisabled Reason = "disabled"
)

// Error is a drip failure. Message is safe to show to users (no node URL, no
// key, no raw node output); Err is the internal cause for logs.
type Error struct {
	Reason  Reason
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Reason, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Reason, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf extracts the reason of a drip error ("" when err is not an *Error).
func ReasonOf(err error) Reason {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return ""
}

func failf(reason Reason, cause error, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), Err: cause}
}
