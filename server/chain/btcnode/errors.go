package btcnode

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

// JSON-RPC error codes a faucet acts on. The names are Bitcoin Core's
// (src/rpc/protocol.h); btcd's btcjson uses the same numbers, but not
// always for the same cases: see each Is* helper.
const (
	CodeMisc                 = -1     // RPC_MISC_ERROR; btcd: getblockhash out of range
	CodeInvalidAddressOrKey  = -5     // block or transaction not found
	CodeInvalidParameter     = -8     // Core: getblockhash out of range
	CodeDeserialization      = -22    // a transaction that does not decode
	CodeVerify               = -25    // RPC_VERIFY_ERROR: inputs missing or spent
	CodeVerifyRejected       = -26    // RPC_VERIFY_REJECTED: mempool policy or consensus
	CodeVerifyAlreadyInChain = -27    // RPC_VERIFY_ALREADY_IN_CHAIN
	CodeInWarmup             = -28    // RPC_IN_WARMUP: Core still loading
	CodeInvalidRequest       = -32600 // btcd: every handler failure that is a plain Go error
	CodeMethodNotFound       = -32601 // the node does not have this method
	CodeInvalidParams        = -32602
	CodeInternal             = -32603
	CodeParse                = -32700
)

var (
	// ErrBlockNotFound: the node does not know the block hash (-5).
	ErrBlockNotFound = errors.New("block not found")
	// ErrNotInMainChain: btcd knows the block but it is not on its main
	// chain, and btcd only describes main-chain blocks verbosely (Core
	// does, with confirmations -1). BlockRaw still reads it.
	ErrNotInMainChain = errors.New("block not in the main chain")
	// ErrHeightOutOfRange: getblockhash above the tip.
	ErrHeightOutOfRange = errors.New("block height out of range")
	// ErrTxNotFound: neither the mempool nor the transaction index has it.
	ErrTxNotFound = errors.New("transaction not found")
	// ErrTxIndexDisabled: the node runs without -txindex (Core) or
	// --txindex (btcd), so it cannot look up confirmed transactions.
	ErrTxIndexDisabled = errors.New("transaction index disabled on the node")
	// ErrNoFeeEstimate: the node has no fee estimate yet (too few blocks
	// or transactions seen, as on a fresh regtest chain).
	ErrNoFeeEstimate = errors.New("no fee estimate available")
	// ErrMainChain: the node is on Bitcoin mainnet, which a testnet faucet
	// must never spend on.
	ErrMainChain = errors.New("node is on Bitcoin mainnet")
)

// RPCError is a JSON-RPC error object the node answered with.
type RPCError struct {
	Method  string
	Code    int
	Message string // sanitised, at most ~500 bytes

	kind error // a sentinel the call recognised, for errors.Is
}

func (e *RPCError) Error() string {
	return "btcnode " + e.Method + ": RPC error " + strconv.Itoa(e.Code) + ": " + e.Message
}

// Unwrap returns the sentinel the call mapped this error to, if any.
func (e *RPCError) Unwrap() error { return e.kind }

func (e *RPCError) contains(subs ...string) bool {
	m := strings.ToLower(e.Message)
	for _, s := range subs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// AuthError is HTTP 401 (wrong user or password; Core also delays such
// answers) or 403 (Core's -rpcallowip refused our address).
type AuthError struct {
	Method     string
	StatusCode int
}

func (e *AuthError) Error() string {
	if e.StatusCode == http.StatusForbidden {
		return fmt.Sprintf("btcnode %s: HTTP 403 Forbidden: the node refuses RPC from this address", e.Method)
	}
	return fmt.Sprintf("btcnode %s: HTTP %d: authentication failed: wrong RPC user or password", e.Method, e.StatusCode)
}

// The errors of getting an answer at all, shared with node (their Client
// field is "btcnode" here, their Call the RPC method):
//
//   - HTTPError: a non-2xx status without a JSON-RPC error in the body,
//     for example Core's 503 "Work queue depth exceeded";
//   - TransportError: no response at all (refused, reset, DNS, TLS,
//     timeout, the body read failing midway);
//   - ResponseError: an answer that is not JSON-RPC as a node sends it (a
//     proxy's page, a truncated body, a result of the wrong shape);
//   - CredentialsError: a credentials file that cannot be read or parsed.
type (
	HTTPError        = rpcclient.HTTPError
	TransportError   = rpcclient.TransportError
	ResponseError    = rpcclient.ResponseError
	CredentialsError = rpcclient.CredentialsError
)

func responseError(method string, err error) error {
	return &ResponseError{Client: name, Call: method, Err: err}
}

func asRPC(err error) *RPCError {
	var re *RPCError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

// IsAlreadyInChain reports RPC_VERIFY_ALREADY_IN_CHAIN (-27): the
// transaction is confirmed (an output of it is unspent in the UTXO set), so
// a rebroadcast has nothing left to do. Core says "Transaction outputs
// already in utxo set" (28+; "Transaction already in block chain" before),
// btcd "transaction already exists in blockchain". Once every output is
// spent, both answer as for missing inputs instead.
func IsAlreadyInChain(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeVerifyAlreadyInChain
}

// IsAlreadyInMempool reports a resend of a transaction the mempool holds.
// Core answers that with success (the txid), btcd with -26 "already have
// transaction in mempool"; Core's "txn-already-in-mempool" and
// "txn-already-known" (testmempoolaccept, package relay) are matched too.
func IsAlreadyInMempool(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeVerifyRejected &&
		re.contains("already have transaction", "txn-already-in-mempool", "txn-already-known")
}

// IsRejected reports RPC_VERIFY_REJECTED (-26), any policy or consensus
// rejection; the helpers below narrow it down.
func IsRejected(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeVerifyRejected
}

// IsInsufficientFee reports a -26 rejection for paying too little: Core's
// "min relay fee not met", "mempool min fee not met" and "insufficient fee"
// (replacement); btcd's "fees which is under the required amount",
// "insufficient priority", "rejected by the rate limiter due to low fees"
// and "replacement transaction has an insufficient absolute fee / fee rate".
func IsInsufficientFee(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeVerifyRejected && re.contains(
		"min relay fee not met", "mempool min fee not met", "insufficient fee",
		"fees which is under the required amount", "insufficient priority",
		"due to low fees", "insufficient absolute fee")
}

// IsMempoolConflict reports a -26 rejection because an input is already
// spent by a mempool transaction that cannot be replaced: Core's
// "txn-mempool-conflict", btcd's "output already spent in mempool".
func IsMempoolConflict(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeVerifyRejected &&
		re.contains("txn-mempool-conflict", "output already spent in mempool")
}

// IsTooLongMempoolChain reports Core's -26 "too-long-mempool-chain": too
// many unconfirmed ancestors or descendants (25 by default). btcd has no
// such limit and never says it.
func IsTooLongMempoolChain(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeVerifyRejected && re.contains("too-long-mempool-chain")
}

// IsMissingInputs reports RPC_VERIFY_ERROR (-25) for inputs that do not
// exist or are already spent in the chain: Core's
// "bad-txns-inputs-missingorspent" (or, by version, "Missing inputs" /
// "Inputs missing or spent"), btcd's "orphan transaction ... references
// outputs of unknown or fully-spent transaction". -25 alone is not
// enough: btcd also uses it for internal failures.
func IsMissingInputs(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeVerify &&
		re.contains("missingorspent", "missing inputs", "inputs missing", "orphan transaction")
}

// IsInWarmup reports RPC_IN_WARMUP (-28): Core is still starting (loading
// the block index, verifying blocks). btcd opens its RPC port only once
// ready and never sends it.
func IsInWarmup(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeInWarmup
}

// IsMethodNotFound reports -32601: the node does not implement the
// method (btcd has no estimatesmartfee or generatetoaddress, Core no
// estimatefee or generate).
func IsMethodNotFound(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeMethodNotFound
}

// IsScanInProgress reports Core's refusal of a scantxoutset while another
// runs (-8 "Scan already in progress"): it scans one at a time.
func IsScanInProgress(err error) bool {
	re := asRPC(err)
	return re != nil && re.Code == CodeInvalidParameter && re.contains("scan already in progress")
}

// IsAuthError reports a 401 or 403 answer.
func IsAuthError(err error) bool {
	var ae *AuthError
	return errors.As(err, &ae)
}

// IsUnavailable reports whether err means the node cannot serve us right
// now, so the caller should retry later or fail over: what
// rpcclient.IsUnavailable says (transport failures and timeouts, 5xx and
// 429 statuses, answers that are not JSON-RPC, a missing credentials
// file) and Core's warm-up. It is false for RPC errors about the request,
// for authentication failures (a setting, not an outage) and for
// cancellation by the caller.
func IsUnavailable(err error) bool {
	return rpcclient.IsUnavailable(err) || IsInWarmup(err)
}

// Excerpt bounds: bodies are usually proxy pages, messages carry the
// node's reason (with txids) that the Is* helpers read.
const (
	maxBodyExcerpt    = 200
	maxMessageExcerpt = 500
)

// excerpt makes b safe to embed in an error (rpcclient.Excerpt).
func excerpt(b []byte, maxLen int) string { return rpcclient.Excerpt(b, maxLen) }
