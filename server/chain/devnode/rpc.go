package devnode

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Response bodies copied from stacks-core (net/http/mod.rs, httpcore.rs,
// api/posttransaction.rs, api/getaccount.rs, api/gettransaction*.rs).
// DecodeError bodies carry the "Failed to decode: " prefix of
// Error::into_http_error.
const (
	decodePrefix       = "Failed to decode: "
	msgNoSuchPath      = "No such file or directory"
	msgEmptyBody       = decodePrefix + "Invalid Http request: expected non-zero-length body for PostTransaction"
	msgBodyTooBig      = decodePrefix + "Invalid Http request: PostTransaction body is too big"
	msgMissingCT       = decodePrefix + "Missing Content-Type for transaction"
	msgWrongCT         = decodePrefix + "Wrong Content-Type for transaction; expected application/json or application/octet-stream"
	msgBadJSONBody     = decodePrefix + "Failed to parse body"
	msgBadJSONTx       = decodePrefix + "Failed to parse tx"
	msgBadAttachment   = decodePrefix + "Failed to parse attachment"
	msgBadPrincipal    = decodePrefix + "Failed to parse `principal` field"
	msgDeserializeTx   = decodePrefix + "Failed to deserialize posted transaction: "
	msgTxBody          = decodePrefix + "Invalid Http request: expected 0-length body for GetTransaction"
	msgUnconfirmedBody = decodePrefix + "Invalid Http request: expected 0-length body for GetTransactionUnconfirmed"
	msgTxIndexOff      = "Transaction indexing is not enabled"
	// resultTransferOK is the receipt result of a successful STX transfer
	// (stx_transfer returns Value::okay_true(), stored with to_string()) and
	// of a successful send-many (its fold starts from (ok true) and ends
	// with the last stx-transfer?'s (ok true)).
	resultTransferOK   = "(ok true)"
	msgInjectedFailure = "devnode: injected server error"
)

// Route patterns, anchored like the node's regexes. The principal pattern
// is clarity's PRINCIPAL_DATA_REGEX_STRING.
var (
	accountPath     = regexp.MustCompile(`^/v2/accounts/([0123456789ABCDEFGHJKMNPQRSTVWXYZ]{28,41}(\.[a-zA-Z]([a-zA-Z0-9]|[-_]){0,127})?)$`)
	unconfirmedPath = regexp.MustCompile(`^/v2/transactions/unconfirmed/([0-9a-f]{64})$`)
	transactionPath = regexp.MustCompile(`^/v3/transaction/([0-9a-f]{64})$`)
)

// Handler returns the RPC handler. It is safe for concurrent use.
func (n *Node) Handler() http.Handler { return http.HandlerFunc(n.serveHTTP) }

func (n *Node) serveHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	down, latency := n.down, n.latency
	fail := n.errorRate > 0 && n.rng.Float64() < n.errorRate
	n.mu.Unlock()

	if down {
		hangUp(w)
		return
	}
	if latency > 0 {
		if n.onDelay != nil {
			n.onDelay()
		}
		if !wait(r, latency) {
			return
		}
	}
	if fail {
		writeText(w, http.StatusInternalServerError, msgInjectedFailure)
		return
	}

	// stacks-core finds a handler by method and path together, so a known
	// path with the wrong method is the same 404 as an unknown path.
	path := r.URL.Path
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch {
	case get && path == "/v2/info":
		writeJSON(w, http.StatusOK, n.info(atTip))
	case get && path == "/v2/pox":
		writeJSON(w, http.StatusOK, n.pox())
	case get && path == "/v2/fees/transfer":
		n.mu.Lock()
		rate := n.feeRate
		n.mu.Unlock()
		writeJSON(w, http.StatusOK, rate)
	case post && path == "/v2/fees/transaction":
		n.postFeeRate(w, r)
	case post && path == "/v2/transactions":
		n.postTransaction(w, r, false)
	case post && callReadPath.MatchString(path):
		n.postCallRead(w, r, callReadPath.FindStringSubmatch(path))
	case get && accountPath.MatchString(path):
		n.getAccount(w, r, accountPath.FindStringSubmatch(path)[1], atTip)
	case get && unconfirmedPath.MatchString(path):
		if r.ContentLength > 0 {
			writeText(w, http.StatusBadRequest, msgUnconfirmedBody)
			return
		}
		n.getUnconfirmed(w, unconfirmedPath.FindStringSubmatch(path)[1])
	case get && transactionPath.MatchString(path):
		if r.ContentLength > 0 { // request parsing comes before the txindex check
			writeText(w, http.StatusBadRequest, msgTxBody)
			return
		}
		n.getTransaction(w, transactionPath.FindStringSubmatch(path)[1], atTip)
	default:
		writeText(w, http.StatusNotFound, msgNoSuchPath)
	}
}

// wait sleeps d, or less when r's client gives up; it reports whether the
// request is still wanted.
func wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// hangUp closes the connection without writing a response: a dead node.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	// HTTP/2 or a wrapped writer: aborting the handler resets the stream.
	panic(http.ErrAbortHandler)
}

// postTransaction admits a posted tx; with drop it is checked and answered
// as usual but not stored (a front end that does not relay).
func (n *Node) postTransaction(w http.ResponseWriter, r *http.Request, drop bool) {
	// The node checks the declared length before the content type.
	if r.ContentLength == 0 {
		writeText(w, http.StatusBadRequest, msgEmptyBody)
		return
	}
	if r.ContentLength > MaxPayloadLen {
		writeText(w, http.StatusBadRequest, msgBodyTooBig)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxPayloadLen))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeText(w, http.StatusBadRequest, msgBodyTooBig)
		} else {
			writeText(w, http.StatusBadRequest, decodePrefix+"Failed to read body")
		}
		return
	}
	if len(body) == 0 { // chunked request with an empty body
		writeText(w, http.StatusBadRequest, msgEmptyBody)
		return
	}

	var raw []byte
	ct := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Type")))
	switch {
	case ct == "":
		writeText(w, http.StatusBadRequest, msgMissingCT)
		return
	case ct == "application/octet-stream": // exact: no parameters allowed
		raw = body
	case ct == "application/json" || strings.HasPrefix(ct, "application/json;"):
		var req struct {
			Tx         *string `json:"tx"`
			Attachment *string `json:"attachment"`
		}
		if json.Unmarshal(body, &req) != nil || req.Tx == nil {
			writeText(w, http.StatusBadRequest, msgBadJSONBody)
			return
		}
		// hex_bytes: even-length hex, no 0x prefix.
		if raw, err = hex.DecodeString(*req.Tx); err != nil {
			writeText(w, http.StatusBadRequest, msgBadJSONTx)
			return
		}
		if req.Attachment != nil {
			if _, err := hex.DecodeString(*req.Attachment); err != nil {
				writeText(w, http.StatusBadRequest, msgBadAttachment)
				return
			}
		}
	default:
		writeText(w, http.StatusBadRequest, msgWrongCT)
		return
	}

	tx, err := stacks.DecodeTransaction(raw)
	if err != nil {
		writeText(w, http.StatusBadRequest, msgDeserializeTx+err.Error())
		return
	}
	checked := precheck(tx, raw)
	checked.drop = drop
	n.mu.Lock()
	txid, rej := n.admit(checked)
	n.mu.Unlock()
	if rej != nil {
		writeJSON(w, http.StatusBadRequest, rej)
		return
	}
	writeJSON(w, http.StatusOK, txid.String())
}

// accountResponse is AccountEntryResponse with its proofs.
type accountResponse struct {
	Balance      string `json:"balance"`
	Locked       string `json:"locked"`
	UnlockHeight uint64 `json:"unlock_height"`
	Nonce        uint64 `json:"nonce"`
	BalanceProof string `json:"balance_proof"`
	NonceProof   string `json:"nonce_proof"`
}

// getAccount answers an account read as of block h (atTip: the tip).
func (n *Node) getAccount(w http.ResponseWriter, r *http.Request, principal string, h uint64) {
	p, err := stacks.ParsePrincipal(principal)
	if err != nil {
		writeText(w, http.StatusBadRequest, msgBadPrincipal)
		return
	}
	key := p.String()
	n.mu.Lock()
	a := n.past.account(key, h, n.peek(key))
	n.mu.Unlock()

	// get_with_proof: proofs are on unless proof is present and not "1".
	if q := r.URL.Query(); q.Has("proof") && q.Get("proof") != "1" {
		writeJSON(w, http.StatusOK, node.Account{Balance: a.balance, Nonce: a.nonce})
		return
	}
	// node.Account cannot carry proofs; FormatU128 is the encoder it uses.
	resp := accountResponse{Balance: node.FormatU128(a.balance), Locked: node.FormatU128(0), Nonce: a.nonce}
	bp, np := "", "" // the node sends "" for a key that was never written
	if a.hasBalance {
		bp = placeholderProof("balance", key, a.balance)
	}
	if a.nonce > 0 { // the nonce key is first written by a mined tx
		np = placeholderProof("nonce", key, a.nonce)
	}
	resp.BalanceProof, resp.NonceProof = bp, np
	writeJSON(w, http.StatusOK, resp)
}

// placeholderProof is hex standing in for a MARF proof; it is not one.
func placeholderProof(kind, key string, v uint64) string {
	sum := sha512.Sum512_256([]byte(kind + "\x00" + key + "\x00" + node.FormatU128(v)))
	return "0x" + hex.EncodeToString(sum[:])
}

func (n *Node) getUnconfirmed(w http.ResponseWriter, txidHex string) {
	var txid stacks.TxID
	_, _ = hex.Decode(txid[:], []byte(txidHex)) // the route regex guarantees 64 hex digits
	n.mu.Lock()
	e, ok := n.pool[txid]
	var raw []byte
	if ok {
		raw = e.raw
	}
	n.mu.Unlock()
	if !ok {
		writeText(w, http.StatusNotFound, "Transaction "+txidHex+" not found in mempool or unconfirmed microblock stream")
		return
	}
	// UnconfirmedTransactionResponse field order: tx, then status.
	writeJSON(w, http.StatusOK, struct {
		Tx     string `json:"tx"`
		Status string `json:"status"`
	}{hex.EncodeToString(raw), "Mempool"})
}

// getTransaction answers like gettransaction.rs from the devnode's txindex.
// There is one chain and no forks, so every mined tx is an ancestor of the
// tip: block_height is always set and is_canonical true. Mine only includes
// transfers that can pay, so a transfer's result is always "(ok true)"; a
// contract call's is what its execution returned.
//
// A node whose tip is block h does not know txs mined above it.
func (n *Node) getTransaction(w http.ResponseWriter, txidHex string, h uint64) {
	if n.cfg.NoTxIndex {
		writeText(w, http.StatusNotImplemented, msgTxIndexOff)
		return
	}
	var txid stacks.TxID
	_, _ = hex.Decode(txid[:], []byte(txidHex)) // the route regex guarantees 64 hex digits
	n.mu.Lock()
	m, ok := n.confirmed[txid]
	ok = ok && m.height <= h
	var blockID string
	if ok {
		blockID = n.blockIDs[m.height]
	}
	n.mu.Unlock()
	if !ok {
		// Mempool-only txs are not in the txindex table either. The node
		// formats the Txid with Debug (plain hex) and ends with a newline.
		writeText(w, http.StatusNotFound, "No such transaction "+txidHex+"\n")
		return
	}
	height, canonical := m.height, true
	writeJSON(w, http.StatusOK, node.MinedTx{
		IndexBlockHash: blockID,
		Tx:             hex.EncodeToString(m.raw),
		Result:         m.result,
		BlockHeight:    &height,
		IsCanonical:    &canonical,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeText(w, http.StatusInternalServerError, "devnode: encoding response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg)
}
