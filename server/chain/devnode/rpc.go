package devnode

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"

	"k8s.io/utils/clock"

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
	msgReadBody        = decodePrefix + "Failed to read body"
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

// rpcServer is the node's RPC front: it serves the HTTP routes from the
// other parts and applies the node-wide faults to every request.
type rpcServer struct {
	clock     clock.WithTicker // times the injected latency
	faults    *faults
	chain     *chain
	ledger    *ledger
	pool      *mempool
	contracts *contracts
	schedule  poxSchedule // 3.x or 4.x (Config.PoXSBTCContract)
	noTxIndex bool        // Config.NoTxIndex

	// onDelay, when set (tests only, before any request), is called as a
	// request starts its injected latency: a synchronisation point.
	onDelay func()
}

func (s *rpcServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	k, fail := s.faults.request()
	if k.down {
		hangUp(w)
		return
	}
	if k.latency > 0 {
		if s.onDelay != nil {
			s.onDelay()
		}
		if !wait(s.clock, r, k.latency) {
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
		writeJSON(w, http.StatusOK, s.info(atTip))
	case get && path == "/v2/pox":
		writeJSON(w, http.StatusOK, s.pox())
	case get && path == "/v2/fees/transfer":
		writeJSON(w, http.StatusOK, s.faults.snapshot().feeRate)
	case post && path == "/v2/fees/transaction":
		s.postFeeRate(w, r)
	case post && path == "/v2/transactions":
		s.postTransaction(w, r, false)
	case post && callReadPath.MatchString(path):
		s.postCallRead(w, r, callReadPath.FindStringSubmatch(path))
	case get && accountPath.MatchString(path):
		s.getAccount(w, r, accountPath.FindStringSubmatch(path)[1], atTip)
	case get && unconfirmedPath.MatchString(path):
		if r.ContentLength > 0 {
			writeText(w, http.StatusBadRequest, msgUnconfirmedBody)
			return
		}
		s.getUnconfirmed(w, unconfirmedPath.FindStringSubmatch(path)[1])
	case get && transactionPath.MatchString(path):
		if r.ContentLength > 0 { // request parsing comes before the txindex check
			writeText(w, http.StatusBadRequest, msgTxBody)
			return
		}
		s.getTransaction(w, transactionPath.FindStringSubmatch(path)[1], atTip)
	default:
		writeText(w, http.StatusNotFound, msgNoSuchPath)
	}
}

// postTransaction admits a posted tx; with drop it is checked and answered
// as usual but not stored (a front end that does not relay).
func (s *rpcServer) postTransaction(w http.ResponseWriter, r *http.Request, drop bool) {
	// The node checks the declared length before the content type.
	body, ok := readBody(w, r, MaxPayloadLen, msgEmptyBody, msgBodyTooBig)
	if !ok {
		return
	}
	raw, msg := txBytes(contentType(r), body)
	if msg != "" {
		writeText(w, http.StatusBadRequest, msg)
		return
	}
	tx, err := stacks.DecodeTransaction(raw)
	if err != nil {
		writeText(w, http.StatusBadRequest, msgDeserializeTx+err.Error())
		return
	}
	checked := precheck(tx, raw)
	checked.drop = drop
	txid, rej := s.pool.offer(checked)
	if rej != nil {
		writeJSON(w, http.StatusBadRequest, rej)
		return
	}
	writeJSON(w, http.StatusOK, txid.String())
}

// txBytes extracts the tx from a POST /v2/transactions body of content
// type ct, or returns the 400 text that refuses it.
func txBytes(ct string, body []byte) ([]byte, string) {
	switch {
	case ct == "":
		return nil, msgMissingCT
	case ct == "application/octet-stream": // exact: no parameters allowed
		return body, ""
	case !isJSON(ct):
		return nil, msgWrongCT
	}
	var req struct {
		Tx         *string `json:"tx"`
		Attachment *string `json:"attachment"`
	}
	if json.Unmarshal(body, &req) != nil || req.Tx == nil {
		return nil, msgBadJSONBody
	}
	// hex_bytes: even-length hex, no 0x prefix.
	raw, err := hex.DecodeString(*req.Tx)
	if err != nil {
		return nil, msgBadJSONTx
	}
	if req.Attachment != nil {
		if _, err := hex.DecodeString(*req.Attachment); err != nil {
			return nil, msgBadAttachment
		}
	}
	return raw, ""
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
func (s *rpcServer) getAccount(w http.ResponseWriter, r *http.Request, principal string, h uint64) {
	p, err := stacks.ParsePrincipal(principal)
	if err != nil {
		writeText(w, http.StatusBadRequest, msgBadPrincipal)
		return
	}
	key := p.String()
	a := s.ledger.accountAt(key, h)

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

func (s *rpcServer) getUnconfirmed(w http.ResponseWriter, txidHex string) {
	raw, ok := s.pool.rawOf(routeTxID(txidHex))
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
func (s *rpcServer) getTransaction(w http.ResponseWriter, txidHex string, h uint64) {
	if s.noTxIndex {
		writeText(w, http.StatusNotImplemented, msgTxIndexOff)
		return
	}
	m, blockID, ok := s.chain.minedAt(routeTxID(txidHex), h)
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

// routeTxID decodes a txid its route's regex matched (64 hex digits).
func routeTxID(txidHex string) stacks.TxID {
	var txid stacks.TxID
	_, _ = hex.Decode(txid[:], []byte(txidHex))
	return txid
}
