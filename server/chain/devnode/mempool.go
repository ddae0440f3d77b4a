package devnode

import (
	"container/heap"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"sync"

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

// poolEntry is one row of the mempool table.
type poolEntry struct {
	tx       *stacks.Transaction
	raw      []byte
	txid     stacks.TxID
	sender   string
	received uint64 // tip height at admission, for GC
	seq      uint64 // arrival order, the tie-breaker when mining
	mined    bool   // mined but kept until GC, like the real mempool table
	// call holds a send-many call's transfers (checked at admission); nil
	// for anything else.
	call []transfer
	// token is a call of the token contract (checked at admission).
	token *tokenCall
}

// spend is what the entry may take from its sender's balance: amount+fee
// for a transfer, the batch total plus fee for a contract call; saturating.
func (e *poolEntry) spend() uint64 {
	amount := e.tx.Payload.Amount
	if e.tx.ContractCall != nil {
		amount = outflow(e.call)
	}
	s, carry := bits.Add64(amount, e.tx.Auth.Fee, 0)
	if carry != 0 {
		return ^uint64(0)
	}
	return s
}

// prechecked is a decoded transaction with the work that needs no node
// state done: its txid and its signature's verdict. Done before taking the
// state lock, so broadcasts verify signatures in parallel rather than one
// at a time under the lock every RPC shares; admit still reports the
// verdict at its place in stacks-core's order.
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

// accountReader reads confirmed accounts (the ledger); callers hold the
// state lock.
type accountReader interface {
	peek(principal string) account
}

// callChecker checks a contract call's payload (the contracts); callers
// hold the state lock.
type callChecker interface {
	checkContractCall(cc *stacks.ContractCall, mainnet bool) ([]transfer, *tokenCall, string, map[string]any)
}

// admissionFaults are the switches admission obeys (the fault knobs).
type admissionFaults interface {
	snapshot() knobs
	dropAdmitted() bool
}

// mempool is the MemPoolDB: admission in stacks-core's order, the pending
// txs by sender and nonce, and the table of rows kept until garbage
// collection.
type mempool struct {
	mu       *sync.Mutex // the node's state lock
	log      *slog.Logger
	accounts accountReader
	calls    callChecker
	faults   admissionFaults
	// confirmedBalanceOnly is Config.ConfirmedBalanceOnly.
	confirmedBalanceOnly bool

	pool     map[stacks.TxID]*poolEntry       // every mempool row, mined or not
	pending  map[string]map[uint64]*poolEntry // sender → nonce → unmined row
	nPending int
	seq      uint64
	height   uint64 // the chain tip's, stamped on admitted rows
}

func newMempool(mu *sync.Mutex, log *slog.Logger, accounts accountReader, calls callChecker, faults admissionFaults, confirmedBalanceOnly bool) *mempool {
	return &mempool{
		mu: mu, log: log, accounts: accounts, calls: calls, faults: faults,
		confirmedBalanceOnly: confirmedBalanceOnly,
		pool:                 make(map[stacks.TxID]*poolEntry),
		pending:              make(map[string]map[uint64]*poolEntry),
	}
}

// Submit offers raw consensus bytes to the mempool as POST /v2/transactions
// does, without HTTP or fault latency/error injection (the drop rate and
// SetDown still apply). It returns the txid, and a *Rejection or
// *DecodeError on refusal. A nil error does not mean stored: like the real
// node, an already-known tx and a dropped one also succeed.
func (m *mempool) Submit(raw []byte) (stacks.TxID, error) {
	if len(raw) == 0 {
		return stacks.TxID{}, &DecodeError{Message: msgEmptyBody}
	}
	tx, err := stacks.DecodeTransaction(raw)
	if err != nil {
		return stacks.TxID{}, &DecodeError{Message: msgDeserializeTx + err.Error()}
	}
	checked := precheck(tx, raw)
	if m.faults.snapshot().down {
		return stacks.TxID{}, ErrDown
	}
	txid, rej := m.offer(checked)
	if rej != nil {
		return txid, rej
	}
	return txid, nil
}

// MempoolSize is the number of pending (admitted, not yet mined) txs.
func (m *mempool) MempoolSize() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nPending
}

// offer admits a prechecked tx under the state lock.
func (m *mempool) offer(c prechecked) (stacks.TxID, *Rejection) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.admit(c)
}

// admit runs the mempool admission checks in stacks-core's order and stores
// the tx on success: semantics, then signature, chain id and fee, then the
// nonce, the funds, the contract-call payload and finally a same-nonce
// conflict. Each step reports a rejection reason, "" to go on. Callers
// hold the state lock.
func (m *mempool) admit(c prechecked) (stacks.TxID, *Rejection) {
	tx, txid := c.tx, c.txid
	reject := func(reason string, data map[string]any) (stacks.TxID, *Rejection) {
		m.log.Debug("devnode: tx rejected", "txid", txid.Hex0x(), "reason", reason)
		return txid, &Rejection{Reason: reason, Data: data, TxID: txid}
	}

	// posttransaction.rs: a tx already in the mempool table (pending, or
	// mined and not yet garbage-collected) is answered 200 and not re-checked.
	if _, ok := m.pool[txid]; ok {
		return txid, nil
	}
	k := m.faults.snapshot()
	if reason, data := checkSemantics(tx, k.mainnet); reason != "" {
		return reject(reason, data)
	}
	if reason, data := checkAuth(c, k.chainID()); reason != "" {
		return reject(reason, data)
	}
	principal := tx.SenderAddress().String()
	acct := m.accounts.peek(principal)
	if reason, data := checkNonce(tx.Auth.Nonce, acct.nonce, principal); reason != "" {
		return reject(reason, data)
	}
	// The pending tx this one would replace, if any.
	prior := m.pending[principal][tx.Auth.Nonce]
	if reason, data := m.checkFunds(tx, acct.balance, principal, prior); reason != "" {
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
		if call, tc, reason, data = m.calls.checkContractCall(tx.ContractCall, k.mainnet); reason != "" {
			return reject(reason, data)
		}
	}
	// try_add_tx: same origin nonce pending → replace only for a strictly
	// higher total fee.
	if prior != nil && tx.Auth.Fee <= prior.tx.Auth.Fee {
		return reject(node.ReasonConflictingNonceInMempool, nil)
	}
	m.store(c, principal, prior, call, tc)
	return txid, nil
}

// checkSemantics is can_admit_mempool_semantic: the tx version must be the
// network's; a transfer must not pay its sender, must move something and
// must pay a recipient of this network.
func checkSemantics(tx *stacks.Transaction, mainnet bool) (string, map[string]any) {
	if (tx.Version == stacks.TxVersionMainnet) != mainnet {
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
	if !validAddressVersion(mainnet, rcpt.Address.Version) {
		return node.ReasonBadAddressVersionByte, nil
	}
	return "", nil
}

// checkAuth is process_transaction_precheck and the fee floor: the
// signature first (it is checked against the tx's own chain id), then the
// chain id, then fee < MINIMUM_TX_FEE || fee / tx_size <
// MINIMUM_TX_FEE_RATE_PER_BYTE.
func checkAuth(c prechecked, chainID uint32) (string, map[string]any) {
	tx := c.tx
	if err := c.sigErr; err != nil {
		return node.ReasonSignatureValidation, map[string]any{"message": signatureMessage(err)}
	}
	if tx.ChainID != chainID {
		return node.ReasonSignatureValidation, map[string]any{
			"message": fmt.Sprintf("Invalid tx %s: invalid chain ID %d (expected %d)", c.txid, tx.ChainID, chainID),
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
func (m *mempool) checkFunds(tx *stacks.Transaction, balance uint64, principal string, prior *poolEntry) (string, map[string]any) {
	amount := tx.Payload.Amount
	if tx.ContractCall != nil {
		amount = 0
	}
	needLo, needHi := bits.Add64(amount, tx.Auth.Fee, 0)
	avail := balance
	if !m.confirmedBalanceOnly {
		for _, e := range m.pending[principal] {
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
// Callers hold the state lock.
func (m *mempool) store(c prechecked, principal string, prior *poolEntry, call []transfer, tc *tokenCall) {
	txid, nonce := c.txid, c.tx.Auth.Nonce
	if c.drop || m.faults.dropAdmitted() {
		m.log.Debug("devnode: accepted tx dropped by fault injection", "txid", txid.Hex0x())
		return
	}
	if prior != nil {
		m.log.Debug("devnode: replace-by-fee", "old", prior.txid.Hex0x(), "new", txid.Hex0x())
		m.drop(prior)
	}
	m.seq++
	e := &poolEntry{tx: c.tx, raw: c.raw, txid: txid, sender: principal, received: m.height, seq: m.seq, call: call, token: tc}
	m.pool[txid] = e
	if m.pending[principal] == nil {
		m.pending[principal] = make(map[uint64]*poolEntry)
	}
	m.pending[principal][nonce] = e
	m.nPending++
	m.log.Debug("devnode: tx admitted", "txid", txid.Hex0x(), "sender", principal, "nonce", nonce, "fee", c.tx.Auth.Fee)
}

// removePending unlinks e from the pending index. Callers hold the state
// lock.
func (m *mempool) removePending(e *poolEntry) {
	p := m.pending[e.sender]
	if p[e.tx.Auth.Nonce] != e {
		return
	}
	delete(p, e.tx.Auth.Nonce)
	if len(p) == 0 {
		delete(m.pending, e.sender)
	}
	m.nPending--
}

// drop deletes e's row altogether; markMined keeps it, no longer pending,
// until garbage collection. Callers hold the state lock.
func (m *mempool) drop(e *poolEntry) {
	m.removePending(e)
	delete(m.pool, e.txid)
}

func (m *mempool) markMined(e *poolEntry) {
	m.removePending(e)
	e.mined = true
}

// isPending reports a row that is admitted and not mined. Callers hold the
// state lock.
func (m *mempool) isPending(txid stacks.TxID) bool {
	e, ok := m.pool[txid]
	return ok && !e.mined
}

// rawOf returns the bytes of a row of the mempool table, mined or not.
func (m *mempool) rawOf(txid stacks.TxID) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.pool[txid]; ok {
		return e.raw, true
	}
	return nil, false
}

// ready returns each sender's minable tx, ordered for mining. Callers hold
// the state lock.
func (m *mempool) ready() readyHeap {
	var h readyHeap
	for sender := range m.pending {
		if e := m.nextReady(sender); e != nil {
			h = append(h, e)
		}
	}
	heap.Init(&h)
	return h
}

// nextReady returns sender's pending tx at the account's next nonce,
// dropping stale lower-nonce rows on the way. Callers hold the state lock.
func (m *mempool) nextReady(sender string) *poolEntry {
	nonce := m.accounts.peek(sender).nonce
	for k, e := range m.pending[sender] {
		if k < nonce { // cannot happen through admission; keep the pool sane anyway
			m.drop(e)
		}
	}
	return m.pending[sender][nonce]
}

// blockMined records the new tip height and deletes rows (pending or
// mined) received more than MempoolMaxTxAge blocks before it, like
// MemPoolDB::garbage_collect. Callers hold the state lock.
func (m *mempool) blockMined(height uint64) {
	m.height = height
	if height <= MempoolMaxTxAge {
		return
	}
	minHeight := height - MempoolMaxTxAge
	for id, e := range m.pool {
		if e.received >= minHeight {
			continue
		}
		if !e.mined {
			m.log.Info("devnode: garbage-collecting stale mempool tx", "txid", id.Hex0x(), "received", e.received)
			m.removePending(e)
		}
		delete(m.pool, id)
	}
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
