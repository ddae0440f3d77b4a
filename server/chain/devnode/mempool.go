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
	drop   bool // admit, answer, but keep nothing (FrontEnd.DropBroadcasts)
}

func precheck(tx *stacks.Transaction, raw []byte) prechecked {
	return prechecked{tx: tx, raw: raw, txid: stacks.TxID(sha512.Sum512_256(raw)), sigErr: tx.Verify()}
}

// admit runs the mempool admission checks in stacks-core's order and stores
// the tx on success: semantics, then signature, chain id and fee, then the
// nonce, the funds, the contract-call payload and finally a same-nonce
// conflict. Each step reports a rejection reason, "" to go on. Callers
// hold n.mu.
func (n *Node) admit(c prechecked) (stacks.TxID, *Rejection) {
	tx, txid := c.tx, c.txid
	reject := func(reason string, data map[string]any) (stacks.TxID, *Rejection) {
		n.log.Debug("devnode: tx rejected", "txid", txid.Hex0x(), "reason", reason)
		return txid, &Rejection{Reason: reason, Data: data, TxID: txid}
	}

	// posttransaction.rs: a tx already in the mempool table (pending, or
	// mined and not yet garbage-collected) is answered 200 and not re-checked.
	if _, ok := n.pool[txid]; ok {
		return txid, nil
	}
	if reason, data := n.checkSemantics(tx); reason != "" {
		return reject(reason, data)
	}
	if reason, data := n.checkAuth(c); reason != "" {
		return reject(reason, data)
	}
	principal := tx.SenderAddress().String()
	acct := n.peek(principal)
	if reason, data := checkNonce(tx.Auth.Nonce, acct.nonce, principal); reason != "" {
		return reject(reason, data)
	}
	// The pending tx this one would replace, if any.
	prior := n.pending[principal][tx.Auth.Nonce]
	if reason, data := n.checkFunds(tx, acct.balance, principal, prior); reason != "" {
		return reject(reason, data)
	}
	// Payload checks come after the balance: the contract must be deployed
	// (only Config.SendManyContract's and the tokens' can be), the function
	// public, the arguments well-typed.
	var call []transfer
	var tc *tokenCall
	if tx.ContractCall != nil {
		var reason string
		var data map[string]any
		if call, tc, reason, data = n.checkContractCall(tx.ContractCall); reason != "" {
			return reject(reason, data)
		}
	}
	// try_add_tx: same origin nonce pending → replace only for a strictly
	// higher total fee.
	if prior != nil && tx.Auth.Fee <= prior.tx.Auth.Fee {
		return reject(node.ReasonConflictingNonceInMempool, nil)
	}
	n.store(c, principal, prior, call, tc)
	return txid, nil
}

// checkSemantics is can_admit_mempool_semantic: the tx version must be the
// network's; a transfer must not pay its sender, must move something and
// must pay a recipient of this network.
func (n *Node) checkSemantics(tx *stacks.Transaction) (string, map[string]any) {
	if (tx.Version == stacks.TxVersionMainnet) != n.mainnet {
		return node.ReasonBadTransactionVersion, nil
	}
	if tx.ContractCall != nil { // the rest are transfer-only
		return "", nil
	}
	rcpt := tx.Payload.Recipient
	if !rcpt.IsContract() && rcpt.Address == tx.SenderAddress() {
		return node.ReasonTransferRecipientCannotEqualSender, map[string]any{"recipient": rcpt.String()}
	}
	if tx.Payload.Amount == 0 {
		return node.ReasonTransferAmountMustBePositive, nil
	}
	if !validAddressVersion(n.mainnet, rcpt.Address.Version) {
		return node.ReasonBadAddressVersionByte, nil
	}
	return "", nil
}

// checkAuth is process_transaction_precheck and the fee floor: the
// signature first (it is checked against the tx's own chain id), then the
// chain id, then fee < MINIMUM_TX_FEE || fee / tx_size <
// MINIMUM_TX_FEE_RATE_PER_BYTE.
func (n *Node) checkAuth(c prechecked) (string, map[string]any) {
	tx := c.tx
	if err := c.sigErr; err != nil {
		return node.ReasonSignatureValidation, map[string]any{"message": signatureMessage(err)}
	}
	if want := n.chainID(); tx.ChainID != want {
		return node.ReasonSignatureValidation, map[string]any{
			"message": fmt.Sprintf("Invalid tx %s: invalid chain ID %d (expected %d)", c.txid, tx.ChainID, want),
		}
	}
	fee, size := tx.Auth.Fee, uint64(len(c.raw))
	if fee < 1 || fee/size < 1 {
		return node.ReasonFeeTooLow, map[string]any{"expected": max(1, size), "actual": fee}
	}
	return "", nil
}

// checkNonce compares the tx nonce with the confirmed account nonce: lower
// is BadNonce, and higher may chain up to +26 (TooMuchChaining beyond).
func checkNonce(nonce, account uint64, principal string) (string, map[string]any) {
	if nonce < account {
		return node.ReasonBadNonce, map[string]any{
			"expected": account, "actual": nonce, "principal": principal, "is_origin": true,
		}
	}
	if maxNonce := account + 1 + maxChaining; nonce > maxNonce {
		return node.ReasonTooMuchChaining, map[string]any{
			"message":  "Nonce would exceed chaining limit in mempool",
			"expected": maxNonce, "actual": nonce, "principal": principal, "is_origin": true,
		}
	}
	return "", nil
}

// checkFunds is can_include_tx step 6/7: a transfer's origin must cover
// amount + fee (computed as u128, it cannot wrap); a contract call's payer
// only the fee, since what the call will move is unknown until it runs.
// Unless Config.ConfirmedBalanceOnly, the sender's other pending spends
// (all but prior, which this tx would replace) come off the balance first.
func (n *Node) checkFunds(tx *stacks.Transaction, balance uint64, principal string, prior *poolEntry) (string, map[string]any) {
	amount := tx.Payload.Amount
	if tx.ContractCall != nil {
		amount = 0
	}
	needLo, needHi := bits.Add64(amount, tx.Auth.Fee, 0)
	avail := balance
	if !n.cfg.ConfirmedBalanceOnly {
		for _, e := range n.pending[principal] {
			if e != prior {
				avail = subSat(avail, e.spend())
			}
		}
	}
	if needHi != 0 || needLo > avail {
		return node.ReasonNotEnoughFunds, map[string]any{
			"expected": formatU128(needHi, needLo), "actual": node.FormatU128(avail),
		}
	}
	return "", nil
}

// store keeps an accepted tx in the mempool, replacing prior. The drop
// fault answers success but keeps nothing, not even the replacement.
// Callers hold n.mu.
func (n *Node) store(c prechecked, principal string, prior *poolEntry, call []transfer, tc *tokenCall) {
	txid, nonce := c.txid, c.tx.Auth.Nonce
	if c.drop || n.dropRate > 0 && n.rng.Float64() < n.dropRate {
		n.log.Debug("devnode: accepted tx dropped by fault injection", "txid", txid.Hex0x())
		return
	}
	if prior != nil {
		n.log.Debug("devnode: replace-by-fee", "old", prior.txid.Hex0x(), "new", txid.Hex0x())
		n.removePending(prior)
		delete(n.pool, prior.txid)
	}
	n.seq++
	e := &poolEntry{tx: c.tx, raw: c.raw, txid: txid, sender: principal, received: n.tip.Height, seq: n.seq, call: call, token: tc}
	n.pool[txid] = e
	if n.pending[principal] == nil {
		n.pending[principal] = make(map[uint64]*poolEntry)
	}
	n.pending[principal][nonce] = e
	n.nPending++
	n.log.Debug("devnode: tx admitted", "txid", txid.Hex0x(), "sender", principal, "nonce", nonce, "fee", c.tx.Auth.Fee)
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
