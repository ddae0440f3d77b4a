// Package node is a typed client for the Stacks node (stacks-core) HTTP RPC,
// covering the endpoints a testnet STX faucet needs: /v2/info, /v2/pox,
// /v2/accounts/{principal}, POST /v2/transactions, /v2/fees/transfer,
// POST /v2/fees/transaction,
// /v2/transactions/unconfirmed/{txid}, /v3/transaction/{txid} and
// POST /v2/contracts/call-read (CallReadOnly, and for SIP-010 tokens
// TokenBalance and TokenMetadata).
//
// The response types carry the node's own snake_case JSON names and marshal
// back into the node's wire format, so a simulated node in tests can serve
// them unchanged.
//
// Errors are typed so callers can map them to HTTP statuses:
//
//   - *RejectionError: the mempool refused a transaction (HTTP 400 JSON);
//   - *DecodeError: the node could not parse the request (HTTP 400 text/plain);
//   - *HTTPError: any other non-2xx status;
//   - *TransportError: connection failures and timeouts;
//   - *ResponseError: a 2xx response whose body is not what the node sends,
//     including a token getter's answer of the wrong type (ErrNotUint,
//     ErrNotASCII, ErrDecimalsRange);
//   - *ReadOnlyError: a read-only call the node ran and refused (okay false).
//
// Transaction also wraps ErrTxNotFound (the node's 404 for a txid it has not
// indexed as mined) or ErrTxIndexDisabled (501: the node runs without txindex)
// around the *HTTPError, for errors.Is. TransactionFeeEstimate likewise wraps
// ErrNoFeeEstimate (400 NoEstimateAvailable) or ErrFeeEstimationDisabled.
//
// IsUnavailable reports whether an error means "the node is not usable right
// now" (retry later or fail over) as opposed to "this request is wrong".
//
// Error messages never contain the userinfo of the base URL and include at
// most a short, sanitised excerpt of response bodies.
//
// The HTTP half (options, timeouts, auth, the transport, HTTP and response
// error types) is package rpcclient, shared with the Bitcoin client btcnode.
package node
