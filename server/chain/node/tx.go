package node

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Bodies of the node's handler-level 404s (gettransaction.rs,
// gettransaction_unconfirmed.rs). Only these mean "not there": a route miss
// ("No such file or directory": a node before 3.1.0.0.8, or a proxy that
// does not forward the path) or a proxy's own 404 page stays an *HTTPError,
// so "could not ask" is never read as "not mined" or "not pending".
const (
	notFoundMinedPrefix   = "No such transaction "
	notFoundMempoolPrefix = "Transaction "
	notFoundMempoolSuffix = " not found in mempool or unconfirmed microblock stream"
)

// MinedTx is the body of GET /v3/transaction/{txid}. Field order and tags
// follow the node's TransactionResponse, so marshalling yields its format.
type MinedTx struct {
	// IndexBlockHash is the StacksBlockId of the block holding the tx,
	// 64 lowercase hex without 0x.
	IndexBlockHash string `json:"index_block_hash"`
	// Tx is the consensus-serialised tx in hex ("BTC(txid)" for a burnchain op).
	Tx string `json:"tx"`
	// Result is the Clarity result as the node prints it, e.g. "(ok true)".
	// A mined tx may have failed: "(err u1)" still paid its fee.
	Result string `json:"result"`
	// BlockHeight is the block's height, null when the block is not an
	// ancestor of the node's tip. Nodes before Dec 2025 omit it.
	BlockHeight *uint64 `json:"block_height"`
	// IsCanonical is false when the tx was mined only in a fork the node
	// no longer follows; nil on nodes that predate the field.
	IsCanonical *bool `json:"is_canonical,omitempty"`
}

// IsOK reports whether the tx's result is (ok …), i.e. it took effect.
func (m *MinedTx) IsOK() bool { return strings.HasPrefix(m.Result, "(ok ") }

// Transaction looks a mined transaction up by txid (GET /v3/transaction/{txid};
// needs txindex on the node). It returns ErrTxNotFound (wrapped) when the node
// does not know it as mined, ErrTxIndexDisabled (wrapped) on 501. Both errors
// also wrap the *HTTPError. txid may carry 0x and upper case: the node's route
// only matches 64 lowercase hex digits, so it is normalised first.
//
// A found tx is confirmed on the node's chain only if IsCanonical is not
// false; check IsOK for whether it succeeded.
func (c *Client) Transaction(ctx context.Context, txid string) (tx *MinedTx, err error) {
	id, err := NormalizeTxID(txid)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", CallTransaction, err)
	}
	defer c.rc.Observe(CallTransaction)(&err)
	resp, err := c.rc.Do(ctx, CallTransaction, http.MethodGet, "/v3/transaction/"+id, nil, "")
	if err != nil {
		return nil, err
	}
	switch {
	case resp.Status == http.StatusNotFound && bytes.HasPrefix(bytes.TrimSpace(resp.Body), []byte(notFoundMinedPrefix)):
		return nil, sentinel(ErrTxNotFound, statusError(CallTransaction, resp))
	case resp.Status == http.StatusNotImplemented:
		return nil, sentinel(ErrTxIndexDisabled, statusError(CallTransaction, resp))
	case resp.Status/100 != 2:
		return nil, statusError(CallTransaction, resp)
	}
	tx = new(MinedTx)
	if err := json.Unmarshal(resp.Body, tx); err != nil {
		return nil, responseError(CallTransaction, err)
	}
	if err := tx.check(id); err != nil {
		return nil, responseError(CallTransaction, err)
	}
	return tx, nil
}

// check validates a decoded body for the requested txid and lower-cases the
// block id.
func (m *MinedTx) check(txid string) error {
	if m.Result == "" {
		return errors.New("transaction: missing result")
	}
	ibh := strings.ToLower(m.IndexBlockHash)
	if len(ibh) != 64 || !isHex(ibh) {
		return fmt.Errorf("transaction: index_block_hash %q is not 32 bytes of hex", excerpt([]byte(m.IndexBlockHash)))
	}
	m.IndexBlockHash = ibh
	return checkTxHex(m.Tx, txid, true)
}

// checkTxHex requires that a hex tx body hashes to txid, so that a proxy or
// cache answering for another tx is not taken as an answer for ours. Mined
// burnchain ops are stored as "BTC(txid)" and are let through when allowBTC.
func checkTxHex(tx, txid string, allowBTC bool) error {
	if tx == "" {
		return errors.New("missing tx")
	}
	if allowBTC && strings.HasPrefix(tx, "BTC(") {
		return nil
	}
	raw, err := hex.DecodeString(tx)
	if err != nil {
		return fmt.Errorf("tx is not hex: %w", err)
	}
	if sum := sha512.Sum512_256(raw); hex.EncodeToString(sum[:]) != txid {
		return fmt.Errorf("tx hashes to %x, not the requested %s", sum, txid)
	}
	return nil
}

// MempoolTx reports whether the node holds txid unconfirmed
// (GET /v2/transactions/unconfirmed/{txid}); false on the node's 404.
//
// Like the node's mempool table, the answer stays true for a tx that was
// mined recently (until the node garbage-collects it, 256 blocks after it
// arrived), so true means "the node has it", not "not yet mined".
func (c *Client) MempoolTx(ctx context.Context, txid string) (found bool, err error) {
	id, err := NormalizeTxID(txid)
	if err != nil {
		return false, fmt.Errorf("node %s: %w", CallMempoolTx, err)
	}
	defer c.rc.Observe(CallMempoolTx)(&err)
	resp, err := c.rc.Do(ctx, CallMempoolTx, http.MethodGet, "/v2/transactions/unconfirmed/"+id, nil, "")
	if err != nil {
		return false, err
	}
	if resp.Status == http.StatusNotFound && isMempoolNotFound(resp.Body) {
		return false, nil
	}
	if resp.Status/100 != 2 {
		return false, statusError(CallMempoolTx, resp)
	}
	var w struct {
		Tx     string          `json:"tx"`
		Status json.RawMessage `json:"status"` // "Mempool" or {"Microblock":{…}}
	}
	if err := json.Unmarshal(resp.Body, &w); err != nil {
		return false, responseError(CallMempoolTx, err)
	}
	if len(w.Status) == 0 || bytes.Equal(w.Status, []byte("null")) {
		return false, responseError(CallMempoolTx, errors.New("missing status"))
	}
	if err := checkTxHex(w.Tx, id, false); err != nil {
		return false, responseError(CallMempoolTx, err)
	}
	return true, nil
}

func isMempoolNotFound(body []byte) bool {
	s := strings.TrimSpace(string(body))
	return strings.HasPrefix(s, notFoundMempoolPrefix) && strings.HasSuffix(s, notFoundMempoolSuffix)
}
