package devnode

import (
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// maxChaining is MAXIMUM_MEMPOOL_TX_CHAINING: nonces up to
// account nonce + 1 + 25 are admissible.
const maxChaining = node.MaxMempoolTxChaining

// Rejection is a mempool rejection: the JSON body of a 400 from
// POST /v2/transactions. It implements error for Submit callers.
type Rejection struct {
	Reason string         // one of the node.Reason* constants
	Data   map[string]any // reason_data; nil when the reason has none
	TxID   stacks.TxID
}

func (r *Rejection) Error() string {
	if r.Data == nil {
		return fmt.Sprintf("devnode: transaction %s rejected: %s", r.TxID, r.Reason)
	}
	d, _ := json.Marshal(r.Data)
	return fmt.Sprintf("devnode: transaction %s rejected: %s %s", r.TxID, r.Reason, d)
}

// MarshalJSON writes MemPoolRejection::into_json's shape. Keys are in
// alphabetical order at every level, as serde_json emits them; reason_data
// is absent (not null) when there is none.
func (r *Rejection) MarshalJSON() ([]byte, error) {
	type wire struct {
		Error      string         `json:"error"`
		Reason     string         `json:"reason"`
		ReasonData map[string]any `json:"reason_data,omitempty"`
		TxID       string         `json:"txid"`
	}
	return json.Marshal(wire{Error: "transaction rejected", Reason: r.Reason, ReasonData: r.Data, TxID: r.TxID.String()})
}

// DecodeError is a body the node cannot parse (400 text/plain). Message
// is the full body, starting "Failed to decode: ".
type DecodeError struct{ Message string }

func (e *DecodeError) Error() string { return "devnode: " + e.Message }

// ErrDown is returned by Submit while the node is down.
var ErrDown = errors.New("devnode: node is down")

// Submit offers raw consensus bytes to the mempool as POST /v2/transactions
// does, without HTTP or fault latency/error injection (the drop rate and
// SetDown still apply). It returns the txid, and a *Rejection or
// *DecodeError on refusal. A nil error does not mean stored: like the real
// node, an already-known tx and a dropped one also succeed.
func (n *Node) Submit(raw []byte) (stacks.TxID, error) {
	if len(raw) == 0 {
		return stacks.TxID{}, &DecodeError{Message: msgEmptyBody}
	}
	tx, err := stacks.DecodeTransaction(raw)
	if err != nil {
		return stacks.TxID{}, &DecodeError{Message: decodePrefix + "Failed to deserialize posted transaction: " + err.Error()}
	}
	checked := precheck(tx, raw)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return stacks.TxID{}, ErrDown
	}
	txid, rej := n.admit(checked)
	if rej != nil {
		return txid, rej
	}
	return txid, nil
}

// prechecked is a decoded transaction with the work that needs no node
// state done: its txid and its signature's verdict. Done before taking n.mu,
// so broadcasts verify signatures in parallel rather than one at a time
// under the lock every RPC shares; admit still reports the verdict at its
// place in stacks-core's order.
type prechecked struct {
	tx     *stacks.Transaction
	raw    []byte
	txid   stacks.TxID
	sigErr error
}

func precheck(tx *stacks.Transaction, raw []byte) prechecked {
	return prechecked{tx: tx, raw: raw, txid: stacks.TxID(sha512.Sum512_256(raw)), sigErr: tx.Verify()}
}

// admit runs the mempool admission checks in stacks-core's order and stores
// the tx on success. Callers hold n.mu.
func (n *Node) admit(c prechecked) (stacks.TxID, *Rejection) {
	tx, raw, txid := c.tx, c.raw, c.txid
	reject := func(reason string, data map[string]any) (stacks.TxID, *Rejection) {
		n.log.Debug("devnode: tx rejected", "txid", txid.Hex0x(), "reason", reason)
		return txid, &Rejection{Reason: reason, Data: data, TxID: txid}
	}

	// posttransaction.rs: a tx already in the mempool table (pending, or
	// mined and not yet garbage-collected) is answered 200 and not re-checked.
	if _, ok := n.pool[txid]; ok {
		return txid, nil
	}

	// can_admit_mempool_semantic.
	if (tx.Version == stacks.TxVersionMainnet) != n.mainnet {
		return reject(node.ReasonBadTransactionVersion, nil)
	}
	sender := tx.SenderAddress()
	if tx.ContractCall == nil { // the transfer-only semantic checks
		rcpt := tx.Payload.Recipient
		if !rcpt.IsContract() && rcpt.Address == sender {
			return reject(node.ReasonTransferRecipientCannotEqualSender, map[string]any{"recipient": rcpt.String()})
		}
		if tx.Payload.Amount == 0 {
			return reject(node.ReasonTransferAmountMustBePositive, nil)
		}
		if !validAddressVersion(n.mainnet, rcpt.Address.Version) {
			return reject(node.ReasonBadAddressVersionByte, nil)
		}
	}

	// process_transaction_precheck: the signature first (it is checked
	// against the tx's own chain id), then the chain id.
	if err := c.sigErr; err != nil {
		return reject(node.ReasonSignatureValidation, map[string]any{"message": signatureMessage(err)})
	}
	if want := n.chainID(); tx.ChainID != want {
		return reject(node.ReasonSignatureValidation, map[string]any{
			"message": fmt.Sprintf("Invalid tx %s: invalid chain ID %d (expected %d)", txid, tx.ChainID, want),
		})
	}

	// Fee: fee < MINIMUM_TX_FEE || fee / tx_size < MINIMUM_TX_FEE_RATE_PER_BYTE.
	fee, size := tx.Auth.Fee, uint64(len(raw))
	if fee < 1 || fee/size < 1 {
		return reject(node.ReasonFeeTooLow, map[string]any{"expected": max(1, size), "actual": fee})
	}

	// Nonces against confirmed state; higher nonces may chain up to +26.
	principal := sender.String()
	acct := n.peek(principal)
	nonce := tx.Auth.Nonce
	if nonce < acct.nonce {
		return reject(node.ReasonBadNonce, map[string]any{
			"expected": acct.nonce, "actual": nonce, "principal": principal, "is_origin": true,
		})
	}
	if maxNonce := acct.nonce + 1 + maxChaining; nonce > maxNonce {
		return reject(node.ReasonTooMuchChaining, map[string]any{
			"message":  "Nonce would exceed chaining limit in mempool",
			"expected": maxNonce, "actual": nonce, "principal": principal, "is_origin": true,
		})
	}

	// Funds (can_include_tx step 6/7): a transfer's origin must cover
	// amount + fee (computed as u128, it cannot wrap); a contract call's
	// payer only the fee, since what the call will move is unknown until it
	// runs.
	prior := n.pending[principal][nonce]
	amount := tx.Payload.Amount
	if tx.ContractCall != nil {
		amount = 0
	}
	needLo, needHi := bits.Add64(amount, fee, 0)
	avail := acct.balance
	if !n.cfg.ConfirmedBalanceOnly {
		for _, e := range n.pending[principal] {
			if e == prior {
				continue // the tx this one would replace does not count
			}
			avail = subSat(avail, e.spend())
		}
	}
	if needHi != 0 || needLo > avail {
		return reject(node.ReasonNotEnoughFunds, map[string]any{
			"expected": formatU128(needHi, needLo), "actual": node.FormatU128(avail),
		})
	}

	// Payload checks come after the balance: the contract must be deployed
	// (only Config.SendManyContract and Config.TokenAsset's can be), the
	// function public, the arguments well-typed.
	var call []transfer
	var tokenCall *tokenCall
	if tx.ContractCall != nil {
		var reason string
		var data map[string]any
		if call, tokenCall, reason, data = n.checkContractCall(tx.ContractCall); reason != "" {
			return reject(reason, data)
		}
	}

	// try_add_tx: same origin nonce pending → replace only for a strictly
	// higher total fee.
	if prior != nil && fee <= prior.tx.Auth.Fee {
		return reject(node.ReasonConflictingNonceInMempool, nil)
	}

	// Accepted. The drop fault answers success but keeps nothing, not even
	// the replacement of the prior tx.
	if n.dropRate > 0 && n.rng.Float64() < n.dropRate {
		n.log.Debug("devnode: accepted tx dropped by fault injection", "txid", txid.Hex0x())
		return txid, nil
	}
	if prior != nil {
		n.log.Debug("devnode: replace-by-fee", "old", prior.txid.Hex0x(), "new", txid.Hex0x())
		n.removePending(prior)
		delete(n.pool, prior.txid)
	}
	n.seq++
	e := &poolEntry{tx: tx, raw: raw, txid: txid, sender: principal, received: n.tip.Height, seq: n.seq, call: call, token: tokenCall}
	n.pool[txid] = e
	if n.pending[principal] == nil {
		n.pending[principal] = make(map[uint64]*poolEntry)
	}
	n.pending[principal][nonce] = e
	n.nPending++
	n.log.Debug("devnode: tx admitted", "txid", txid.Hex0x(), "sender", principal, "nonce", nonce, "fee", fee)
	return txid, nil
}

// removePending unlinks e from the pending index. Callers hold n.mu.
func (n *Node) removePending(e *poolEntry) {
	m := n.pending[e.sender]
	if m[e.tx.Auth.Nonce] != e {
		return
	}
	delete(m, e.tx.Auth.Nonce)
	if len(m) == 0 {
		delete(n.pending, e.sender)
	}
	n.nPending--
}

// validAddressVersion is stacks-core's is_valid_address_version.
func validAddressVersion(mainnet bool, v byte) bool {
	if mainnet {
		return v == stacks.AddressVersionMainnetSingleSig || v == stacks.AddressVersionMainnetMultiSig
	}
	return v == stacks.AddressVersionTestnetSingleSig || v == stacks.AddressVersionTestnetMultiSig
}

// signatureMessage words verification failures the way the node's
// VerifyingError messages read.
func signatureMessage(err error) string {
	if errors.Is(err, stacks.ErrHighS) {
		return "Failed to verify signature: signature is not in low-S (canonical) form"
	}
	return "Failed to verify signature: " + err.Error()
}

func subSat(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// formatU128 renders hi:lo like the node renders u128 amounts.
func formatU128(hi, lo uint64) string {
	if hi == 0 {
		return node.FormatU128(lo)
	}
	return fmt.Sprintf("0x%016x%016x", hi, lo)
}
