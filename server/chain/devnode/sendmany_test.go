package devnode

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

const smGenesis = 1_000_000_000

func newSendManyHarness(t *testing.T, w wallet) *harness {
	t.Helper()
	return newHarness(t, Config{
		Genesis:          map[stacks.Address]uint64{w.addr: smGenesis},
		SendManyContract: stacks.SendManyMemoTestnet,
	})
}

// rawCall builds a contract call without NewSendMany's checks, so tests can
// send what the contract itself must refuse.
func rawCall(t *testing.T, w wallet, contract, function string, args []stacks.ClarityValue, nonce, fee uint64, pcs ...stacks.PostCondition) *stacks.Transaction {
	t.Helper()
	id, err := stacks.ParseContractID(contract)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := stacks.NewContractCall(stacks.ContractCallParams{
		Contract: id, Function: function, Args: args, Nonce: nonce, Fee: fee,
		PostConditionMode: stacks.PostConditionModeDeny, PostConditions: pcs,
	}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func sendManyArgs(t *testing.T, entries []stacks.SendManyEntry) []stacks.ClarityValue {
	t.Helper()
	args, err := stacks.SendManyArgs(entries)
	if err != nil {
		t.Fatal(err)
	}
	return args
}

func rejectionOf(t *testing.T, h *harness, tx *stacks.Transaction) *node.RejectionError {
	t.Helper()
	_, err := h.c.Broadcast(context.Background(), tx.Serialize())
	var rej *node.RejectionError
	if !errors.As(err, &rej) {
		t.Fatalf("broadcast: %v, want a rejection", err)
	}
	return rej
}

// mineOne mines a block and checks that it holds exactly txid.
func mineOne(t *testing.T, h *harness, txid stacks.TxID) {
	t.Helper()
	b := h.n.Mine()
	if len(b.TxIDs) != 1 || b.TxIDs[0] != txid {
		t.Fatalf("block holds %v, want [%s]", b.TxIDs, txid)
	}
}

func checkMined(t *testing.T, h *harness, txid stacks.TxID, wantResult string, wantAborted bool) {
	t.Helper()
	got, ok := h.n.TxResult(txid)
	if !ok || got != wantResult {
		t.Errorf("TxResult = %q, %v; want %q, true", got, ok, wantResult)
	}
	if a := h.n.TxAborted(txid); a != wantAborted {
		t.Errorf("TxAborted = %v, want %v", a, wantAborted)
	}
	if st := h.n.TxStatus(txid); st.State != TxConfirmed {
		t.Errorf("TxStatus = %v, want confirmed", st.State)
	}
	mt, err := h.c.Transaction(context.Background(), txid.String())
	if err != nil {
		t.Fatalf("node client Transaction: %v", err)
	}
	if mt.Result != wantResult {
		t.Errorf("/v3/transaction result %q, want %q", mt.Result, wantResult)
	}
}

func TestSendManyMined(t *testing.T) {
	w := newWallet(t)
	h := newSendManyHarness(t, w)
	rcpts := []wallet{newWallet(t), newWallet(t), newWallet(t)}
	entries := []stacks.SendManyEntry{
		{To: rcpts[0].principal(), Amount: 1_000, Memo: []byte("a")},
		{To: rcpts[1].principal(), Amount: 20_000},
		{To: rcpts[2].principal(), Amount: 300_000, Memo: []byte("memo")},
	}
	const fee = 5_000
	tx, err := stacks.NewSendMany(stacks.SendManyParams{Recipients: entries, Fee: fee}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	txid := h.mustAccept(tx)
	if st := h.n.TxStatus(txid); st.State != TxPending {
		t.Fatalf("TxStatus = %v, want pending", st.State)
	}
	mineOne(t, h, txid)
	checkMined(t, h, txid, "(ok true)", false)
	for i, r := range rcpts {
		if bal, _ := h.n.Account(r.addr); bal != entries[i].Amount {
			t.Errorf("recipient %d balance %d, want %d", i, bal, entries[i].Amount)
		}
	}
	if bal, nonce := h.n.Account(w.addr); bal != smGenesis-321_000-fee || nonce != 1 {
		t.Errorf("sender %d/%d, want %d/1", bal, nonce, smGenesis-321_000-fee)
	}
}

// One failing stx-transfer? aborts the batch: the first failure's code is
// the result, no transfer happens, the fee is paid and the nonce advances.
func TestSendManyAbortsAllOrNothing(t *testing.T) {
	w := newWallet(t)
	r1, r2 := newWallet(t), newWallet(t)
	for _, tc := range []struct {
		name   string
		bad    stacks.SendManyEntry
		result string
	}{
		{"zero amount", stacks.SendManyEntry{To: r2.principal(), Amount: 0}, "(err u3)"},
		{"sender is recipient", stacks.SendManyEntry{To: w.principal(), Amount: 5}, "(err u2)"},
		{"beyond the balance", stacks.SendManyEntry{To: r2.principal(), Amount: smGenesis}, "(err u1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSendManyHarness(t, w)
			entries := []stacks.SendManyEntry{{To: r1.principal(), Amount: 1_000}, tc.bad}
			total := 1_000 + tc.bad.Amount
			const fee = 3_000
			tx := rawCall(t, w, stacks.SendManyMemoTestnet, stacks.SendManyFunction, sendManyArgs(t, entries), 0, fee,
				stacks.PrincipalSendsExactly(w.principal(), total))
			txid := h.mustAccept(tx) // admission checks only the fee
			mineOne(t, h, txid)
			checkMined(t, h, txid, tc.result, true)
			if bal, nonce := h.n.Account(w.addr); bal != smGenesis-fee || nonce != 1 {
				t.Errorf("sender %d/%d, want %d/1", bal, nonce, smGenesis-fee)
			}
			if bal, _ := h.n.Account(r1.addr); bal != 0 {
				t.Errorf("recipient 1 received %d despite the abort", bal)
			}
		})
	}
}

// The transfers succeed but the post-condition does not hold: the call is
// rolled back and keeps its would-have-been result, as stacks-core's
// from_condition_aborted_contract_call receipt does.
func TestSendManyPostConditionMismatch(t *testing.T) {
	w := newWallet(t)
	r := newWallet(t)
	entries := []stacks.SendManyEntry{{To: r.principal(), Amount: 1_000}}
	for _, tc := range []struct {
		name string
		pcs  []stacks.PostCondition
	}{
		{"wrong total", []stacks.PostCondition{stacks.PrincipalSendsExactly(w.principal(), 999)}},
		{"origin wrong total", []stacks.PostCondition{stacks.OriginSendsExactly(1_001)}},
		{"deny mode, no condition", nil},
		{"condition on another principal", []stacks.PostCondition{stacks.PrincipalSendsExactly(r.principal(), 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSendManyHarness(t, w)
			tx := rawCall(t, w, stacks.SendManyMemoTestnet, stacks.SendManyFunction, sendManyArgs(t, entries), 0, 2_000, tc.pcs...)
			txid := h.mustAccept(tx)
			mineOne(t, h, txid)
			checkMined(t, h, txid, "(ok true)", true)
			if bal, nonce := h.n.Account(w.addr); bal != smGenesis-2_000 || nonce != 1 {
				t.Errorf("sender %d/%d, want %d/1", bal, nonce, smGenesis-2_000)
			}
			if bal, _ := h.n.Account(r.addr); bal != 0 {
				t.Errorf("recipient received %d despite the abort", bal)
			}
		})
	}
	// The origin form of the right condition passes.
	h := newSendManyHarness(t, w)
	tx := rawCall(t, w, stacks.SendManyMemoTestnet, stacks.SendManyFunction, sendManyArgs(t, entries), 0, 2_000, stacks.OriginSendsExactly(1_000))
	txid := h.mustAccept(tx)
	mineOne(t, h, txid)
	checkMined(t, h, txid, "(ok true)", false)
}

// A batch the balance covered at admission but not at mining (an earlier
// transfer spent it) aborts with (err u1) and still pays its fee.
func TestSendManyExceedsBalanceAtMining(t *testing.T) {
	w := newWallet(t)
	h := newHarness(t, Config{
		Genesis:              map[stacks.Address]uint64{w.addr: smGenesis},
		SendManyContract:     stacks.SendManyMemoTestnet,
		ConfirmedBalanceOnly: true, // like stacks-core: admit the overspending chain
	})
	r := newWallet(t)
	first := h.mustAccept(w.send(t, r.principal(), smGenesis/2, 0, 1_000, ""))
	tx, err := stacks.NewSendMany(stacks.SendManyParams{
		Recipients: []stacks.SendManyEntry{{To: r.principal(), Amount: smGenesis / 2}}, Nonce: 1, Fee: 1_000,
	}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	txid := h.mustAccept(tx)
	if b := h.n.Mine(); len(b.TxIDs) != 2 || b.TxIDs[0] != first || b.TxIDs[1] != txid {
		t.Fatalf("block holds %v", b.TxIDs)
	}
	checkMined(t, h, txid, "(err u1)", true)
	if bal, nonce := h.n.Account(w.addr); bal != smGenesis/2-2_000 || nonce != 2 {
		t.Errorf("sender %d/%d, want %d/2", bal, nonce, smGenesis/2-2_000)
	}
	if bal, _ := h.n.Account(r.addr); bal != smGenesis/2 {
		t.Errorf("recipient %d, want %d", bal, smGenesis/2)
	}
}

// The default, stricter NotEnoughFunds counts a pending batch's total plus
// fee as its spend; the call itself needs only its fee.
func TestSendManyPendingSpend(t *testing.T) {
	w := newWallet(t)
	h := newSendManyHarness(t, w)
	r := newWallet(t)
	tx, err := stacks.NewSendMany(stacks.SendManyParams{
		Recipients: []stacks.SendManyEntry{{To: r.principal(), Amount: smGenesis - 10_000}}, Fee: 5_000,
	}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	h.mustAccept(tx)
	if rej := rejectionOf(t, h, w.send(t, r.principal(), 5_001, 1, 200, "")); rej.Reason != node.ReasonNotEnoughFunds {
		t.Errorf("transfer after the batch: %s, want NotEnoughFunds", rej.Reason)
	}
	// A second batch far beyond the balance is admitted: only its fee counts.
	tx2, err := stacks.NewSendMany(stacks.SendManyParams{
		Recipients: []stacks.SendManyEntry{{To: r.principal(), Amount: smGenesis}}, Nonce: 1, Fee: 1_000,
	}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	h.mustAccept(tx2)
	// Replace-by-fee works for calls as for transfers.
	tx3, err := stacks.NewSendMany(stacks.SendManyParams{
		Recipients: []stacks.SendManyEntry{{To: r.principal(), Amount: 1}}, Nonce: 1, Fee: 1_000,
	}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	if rej := rejectionOf(t, h, tx3); rej.Reason != node.ReasonConflictingNonceInMempool {
		t.Errorf("same-fee replacement: %s, want ConflictingNonceInMempool", rej.Reason)
	}
	if n := h.n.MempoolSize(); n != 2 {
		t.Errorf("mempool %d, want 2", n)
	}
}

func TestSendManyAdmissionRejections(t *testing.T) {
	w := newWallet(t)
	h := newSendManyHarness(t, w)
	r := newWallet(t)
	good := sendManyArgs(t, []stacks.SendManyEntry{{To: r.principal(), Amount: 1_000}})
	otherContract := "ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.send-many"
	for _, tc := range []struct {
		name, contract, fn string
		args               []stacks.ClarityValue
		reason, message    string
	}{
		{"another contract", otherContract, stacks.SendManyFunction, good, node.ReasonNoSuchContract, ""},
		{"private function", stacks.SendManyMemoTestnet, "send-stx", good, node.ReasonNoSuchPublicFunction, ""},
		{"unknown function", stacks.SendManyMemoTestnet, "transfer", good, node.ReasonNoSuchPublicFunction, ""},
		{"no argument", stacks.SendManyMemoTestnet, stacks.SendManyFunction, nil, node.ReasonBadFunctionArgument, "IncorrectArgumentCount(1, 0)"},
		{"two arguments", stacks.SendManyMemoTestnet, stacks.SendManyFunction, append(good, stacks.NewUInt(1)), node.ReasonBadFunctionArgument, "IncorrectArgumentCount(1, 2)"},
		{"not a list", stacks.SendManyMemoTestnet, stacks.SendManyFunction, []stacks.ClarityValue{stacks.NewUInt(1)}, node.ReasonBadFunctionArgument,
			"TypeError(" + typeSendManyList + ", UIntType)"},
		{"memo too long", stacks.SendManyMemoTestnet, stacks.SendManyFunction, []stacks.ClarityValue{stacks.List{stacks.Tuple{
			{Name: "memo", Value: stacks.Buffer(make([]byte, 35))}, {Name: "to", Value: r.principal()}, {Name: "ustx", Value: stacks.NewUInt(1)},
		}}}, node.ReasonBadFunctionArgument, "TypeError(" + typeSendManyList +
			`, SequenceType(ListType(ListTypeData { max_len: 1, entry_type: TupleType(TupleTypeSignature { "memo": (buff 35), "to": principal, "ustx": uint,}) })))`},
		{"int amount", stacks.SendManyMemoTestnet, stacks.SendManyFunction, []stacks.ClarityValue{stacks.List{stacks.Tuple{
			{Name: "memo", Value: stacks.Buffer{}}, {Name: "to", Value: r.principal()}, {Name: "ustx", Value: stacks.NewInt(1)},
		}}}, node.ReasonBadFunctionArgument, ""},
		{"missing key", stacks.SendManyMemoTestnet, stacks.SendManyFunction, []stacks.ClarityValue{stacks.List{stacks.Tuple{
			{Name: "to", Value: r.principal()}, {Name: "ustx", Value: stacks.NewUInt(1)},
		}}}, node.ReasonBadFunctionArgument, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rej := rejectionOf(t, h, rawCall(t, w, tc.contract, tc.fn, tc.args, 0, 10_000))
			if rej.Reason != tc.reason {
				t.Fatalf("reason %q, want %q", rej.Reason, tc.reason)
			}
			if tc.message != "" && !strings.Contains(string(rej.ReasonData), tc.message[:20]) {
				t.Errorf("reason_data %s, want message %q", rej.ReasonData, tc.message)
			}
			if tc.message != "" {
				r := h.post(rawCall(t, w, tc.contract, tc.fn, tc.args, 0, 10_000))
				if r.status != http.StatusBadRequest || !strings.Contains(r.body, jsonQuote(tc.message)) {
					t.Errorf("body %s, want message %q", r.body, tc.message)
				}
			}
		})
	}
	// The earlier checks still come first.
	if rej := rejectionOf(t, h, rawCall(t, w, otherContract, "x", nil, 0, 1)); rej.Reason != node.ReasonFeeTooLow {
		t.Errorf("low fee to a missing contract: %s, want FeeTooLow", rej.Reason)
	}
	if n := h.n.MempoolSize(); n != 0 {
		t.Errorf("mempool holds %d txs", n)
	}
}

func TestSendMany200Recipients(t *testing.T) {
	w := newWallet(t)
	h := newSendManyHarness(t, w)
	entries := make([]stacks.SendManyEntry, stacks.SendManyMaxRecipients)
	var total uint64
	for i := range entries {
		entries[i] = stacks.SendManyEntry{To: newWallet(t).principal(), Amount: uint64(1_000 + i), Memo: make([]byte, 34)}
		total += entries[i].Amount
	}
	tx, err := stacks.NewSendMany(stacks.SendManyParams{Recipients: entries, Fee: 100_000}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	txid := h.mustAccept(tx)
	mineOne(t, h, txid)
	checkMined(t, h, txid, "(ok true)", false)
	for i, e := range entries {
		if bal, _ := h.n.PrincipalAccount(e.To); bal != e.Amount {
			t.Fatalf("recipient %d balance %d, want %d", i, bal, e.Amount)
		}
	}
	if bal, _ := h.n.Account(w.addr); bal != smGenesis-total-100_000 {
		t.Errorf("sender %d, want %d", bal, smGenesis-total-100_000)
	}
	// 201 entries do not type-check.
	list := append(stacks.List(nil), sendManyArgs(t, entries)[0].(stacks.List)...)
	list = append(list, list[0])
	rej := rejectionOf(t, h, rawCall(t, w, stacks.SendManyMemoTestnet, stacks.SendManyFunction, []stacks.ClarityValue{list}, 1, 200_000))
	if rej.Reason != node.ReasonBadFunctionArgument {
		t.Errorf("201 recipients: %s, want BadFunctionArgument", rej.Reason)
	}
}

// send-stx-with-memo is send-many-memo's other public function.
func TestSendStxWithMemo(t *testing.T) {
	w := newWallet(t)
	h := newSendManyHarness(t, w)
	r := newWallet(t)
	args := []stacks.ClarityValue{stacks.NewUInt(7_000), r.principal(), stacks.Buffer("hi")}
	txid := h.mustAccept(rawCall(t, w, stacks.SendManyMemoTestnet, "send-stx-with-memo", args, 0, 1_000, stacks.OriginSendsExactly(7_000)))
	mineOne(t, h, txid)
	checkMined(t, h, txid, "(ok true)", false)
	if bal, _ := h.n.Account(r.addr); bal != 7_000 {
		t.Errorf("recipient %d, want 7000", bal)
	}
}

func jsonQuote(s string) string {
	return strings.ReplaceAll(s, `"`, `\"`)
}
