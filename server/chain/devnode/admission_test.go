package devnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// fixturePrincipal is the sender the stacks-core rejection fixtures use.
const fixturePrincipal = "ST2ZRX0K27GW0SP3GJCEMHD95TQGJMKB7G9Y0X1MH"

const aliceFunds = 1_000_000_000

func rejection(reason, txid string) string {
	return fmt.Sprintf(`{"error":"transaction rejected","reason":%q,"txid":%q}`, reason, txid)
}

// rejectionCase is one rejection TestRejections posts.
type rejectionCase struct {
	name string
	// setup prepares state and returns the tx to post; alice holds aliceFunds.
	setup  func(t *testing.T, h *harness, alice wallet) *stacks.Transaction
	reason string
	// want is the exact body; it gets the txid and alice's address.
	want func(t *testing.T, txid, alice string) string
	// data checks reason_data through the client's typed accessors.
	data func(t *testing.T, rej *node.RejectionError)
}

// TestRejections checks every rejection reason's exact body (status, content
// type, key order, reason_data values) and that the node client decodes it.
func TestRejections(t *testing.T) {
	bob := newWallet(t)
	var cases []rejectionCase
	cases = append(cases, semanticRejections(bob)...)
	cases = append(cases, authRejections(bob)...)
	cases = append(cases, nonceRejections(bob)...)
	cases = append(cases, fundsRejections(bob)...)
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) { checkRejection(t, tt) })
	}
}

// semanticRejections break can_admit_mempool_semantic's rules.
func semanticRejections(bob wallet) []rejectionCase {
	mainnetBob := bob.key.Address(stacks.AddressVersionMainnetSingleSig)
	return []rejectionCase{
		{
			name: "BadTransactionVersion",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return signed(t, alice.key, stacks.TxVersionMainnet, stacks.ChainIDTestnet, bob.principal(), 1000, 0, 180)
			},
			reason: node.ReasonBadTransactionVersion,
			want: func(t *testing.T, txid, _ string) string {
				return rejection("BadTransactionVersion", txid)
			},
		},
		{
			name: "TransferRecipientCannotEqualSender",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return alice.send(t, alice.principal(), 1000, 0, 180, "")
			},
			reason: node.ReasonTransferRecipientCannotEqualSender,
			want: func(t *testing.T, txid, alice string) string {
				return compactFixture(t, "v2-transactions-error-recipient-is-sender.derived.json", zeroTxID, txid, fixturePrincipal, alice)
			},
		},
		{
			name: "TransferAmountMustBePositive",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return alice.send(t, bob.principal(), 0, 0, 180, "")
			},
			reason: node.ReasonTransferAmountMustBePositive,
			want: func(t *testing.T, txid, _ string) string {
				return rejection("TransferAmountMustBePositive", txid)
			},
		},
		{
			name: "BadAddressVersionByte mainnet recipient",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return alice.send(t, stacks.Principal{Address: mainnetBob}, 1000, 0, 180, "")
			},
			reason: node.ReasonBadAddressVersionByte,
			want: func(t *testing.T, txid, _ string) string {
				return rejection("BadAddressVersionByte", txid)
			},
		},
		{
			name: "BadAddressVersionByte mainnet contract recipient",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return alice.send(t, stacks.Principal{Address: mainnetBob, ContractName: "vault"}, 1000, 0, 200, "")
			},
			reason: node.ReasonBadAddressVersionByte,
			want: func(t *testing.T, txid, _ string) string {
				return rejection("BadAddressVersionByte", txid)
			},
		},
	}
}

// authRejections fail the signature, chain id or fee checks.
func authRejections(bob wallet) []rejectionCase {
	return []rejectionCase{
		{
			name: "SignatureValidation tampered",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				tx := alice.send(t, bob.principal(), 1000, 0, 180, "")
				tx.Payload.Amount = 1_000_000 // after signing
				return tx
			},
			reason: node.ReasonSignatureValidation,
			want: func(t *testing.T, txid, _ string) string {
				return `{"error":"transaction rejected","reason":"SignatureValidation","reason_data":{"message":"Failed to verify signature: bad signature: recovered key does not match the signer"},"txid":"` + txid + `"}`
			},
		},
		{
			name: "SignatureValidation high-S",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return highS(alice.send(t, bob.principal(), 1000, 0, 180, ""))
			},
			reason: node.ReasonSignatureValidation,
			want: func(t *testing.T, txid, _ string) string {
				return `{"error":"transaction rejected","reason":"SignatureValidation","reason_data":{"message":"Failed to verify signature: signature is not in low-S (canonical) form"},"txid":"` + txid + `"}`
			},
		},
		{
			name: "SignatureValidation chain id",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				tx, err := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: bob.principal(), Amount: 1000, Fee: 180, ChainID: 0x87654321}, alice.key)
				if err != nil {
					t.Fatal(err)
				}
				return tx
			},
			reason: node.ReasonSignatureValidation,
			want: func(t *testing.T, txid, _ string) string {
				return `{"error":"transaction rejected","reason":"SignatureValidation","reason_data":{"message":"Invalid tx ` + txid + `: invalid chain ID 2271560481 (expected 2147483648)"},"txid":"` + txid + `"}`
			},
			data: func(t *testing.T, rej *node.RejectionError) {
				if !strings.Contains(rej.DataMessage(), "invalid chain ID") {
					t.Errorf("message %q lacks \"invalid chain ID\"", rej.DataMessage())
				}
			},
		},
		{
			name: "FeeTooLow 180-byte tx fee 1",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				tx := alice.send(t, bob.principal(), 1000, 0, 1, "")
				if len(tx.Serialize()) != 180 {
					t.Fatalf("tx is %d bytes, want 180", len(tx.Serialize()))
				}
				return tx
			},
			reason: node.ReasonFeeTooLow,
			want: func(t *testing.T, txid, _ string) string {
				return compactFixture(t, "v2-transactions-error-feetoolow.derived.json", zeroTxID, txid)
			},
			data: func(t *testing.T, rej *node.RejectionError) {
				if f, err := rej.Fee(); err != nil || *f != (node.FeeRejection{Expected: 180, Actual: 1}) {
					t.Errorf("Fee() = %+v, %v", f, err)
				}
			},
		},
		{
			name: "FeeTooLow zero fee",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return alice.send(t, bob.principal(), 1000, 0, 0, "")
			},
			reason: node.ReasonFeeTooLow,
			want: func(t *testing.T, txid, _ string) string {
				return `{"error":"transaction rejected","reason":"FeeTooLow","reason_data":{"actual":0,"expected":180},"txid":"` + txid + `"}`
			},
		},
		{
			name: "FeeTooLow contract recipient is longer",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				// 180 + 1 length byte + 12 name bytes = 193.
				return alice.send(t, stacks.Principal{Address: bob.addr, ContractName: "faucet-vault"}, 1000, 0, 192, "")
			},
			reason: node.ReasonFeeTooLow,
			want: func(t *testing.T, txid, _ string) string {
				return `{"error":"transaction rejected","reason":"FeeTooLow","reason_data":{"actual":192,"expected":193},"txid":"` + txid + `"}`
			},
		},
	}
}

// nonceRejections are below the account nonce or chain too far.
func nonceRejections(bob wallet) []rejectionCase {
	return []rejectionCase{
		{
			name: "BadNonce",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				h.mustAccept(alice.send(t, bob.principal(), 1, 0, 180, ""))
				h.mustAccept(alice.send(t, bob.principal(), 1, 1, 180, ""))
				h.n.Mine()
				return alice.send(t, bob.principal(), 1, 1, 500, "again")
			},
			reason: node.ReasonBadNonce,
			want: func(t *testing.T, txid, alice string) string {
				return `{"error":"transaction rejected","reason":"BadNonce","reason_data":{"actual":1,"expected":2,"is_origin":true,"principal":"` + alice + `"},"txid":"` + txid + `"}`
			},
			data: func(t *testing.T, rej *node.RejectionError) {
				if d, err := rej.Nonce(); err != nil || d.Expected != 2 || d.Actual != 1 || !d.IsOrigin {
					t.Errorf("Nonce() = %+v, %v", d, err)
				}
			},
		},
		{
			name: "TooMuchChaining nonce 30 on nonce 0",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return alice.send(t, bob.principal(), 1000, 30, 180, "")
			},
			reason: node.ReasonTooMuchChaining,
			want: func(t *testing.T, txid, alice string) string {
				return compactFixture(t, "v2-transactions-error-toomuchchaining.derived.json", zeroTxID, txid, fixturePrincipal, alice)
			},
			data: func(t *testing.T, rej *node.RejectionError) {
				if d, err := rej.Nonce(); err != nil || d.Expected != 26 || d.Actual != 30 || d.Message == "" {
					t.Errorf("Nonce() = %+v, %v", d, err)
				}
			},
		},
		{
			name: "TooMuchChaining counts from the confirmed nonce",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				h.mustAccept(alice.send(t, bob.principal(), 1, 0, 180, ""))
				h.mustAccept(alice.send(t, bob.principal(), 1, 1, 180, ""))
				h.n.Mine()
				return alice.send(t, bob.principal(), 1000, 29, 180, "")
			},
			reason: node.ReasonTooMuchChaining,
			want: func(t *testing.T, txid, alice string) string {
				return `{"error":"transaction rejected","reason":"TooMuchChaining","reason_data":{"actual":29,"expected":28,"is_origin":true,"message":"Nonce would exceed chaining limit in mempool","principal":"` + alice + `"},"txid":"` + txid + `"}`
			},
		},
	}
}

// fundsRejections cannot pay, or conflict with a pending tx.
func fundsRejections(bob wallet) []rejectionCase {
	return []rejectionCase{
		{
			name: "NotEnoughFunds",
			setup: func(t *testing.T, h *harness, _ wallet) *stacks.Transaction {
				// The stacks-core integration test: 990 available, 2000 + 456 needed.
				carol := newWallet(t)
				h.n.Fund(carol.addr, 990)
				return carol.send(t, bob.principal(), 2000, 0, 456, "")
			},
			reason: node.ReasonNotEnoughFunds,
			want: func(t *testing.T, txid, _ string) string {
				return compactFixture(t, "v2-transactions-error-notenoughfunds.derived.json", zeroTxID, txid)
			},
			data: func(t *testing.T, rej *node.RejectionError) {
				if f, err := rej.Funds(); err != nil || *f != (node.FundsRejection{Expected: 2456, Actual: 990}) {
					t.Errorf("Funds() = %+v, %v", f, err)
				}
			},
		},
		{
			name: "NotEnoughFunds amount+fee beyond u64",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				return alice.send(t, bob.principal(), math.MaxUint64, 0, 180, "")
			},
			reason: node.ReasonNotEnoughFunds,
			want: func(t *testing.T, txid, _ string) string {
				// 2^64-1 + 180 = 2^64 + 179 as a u128.
				return `{"error":"transaction rejected","reason":"NotEnoughFunds","reason_data":{"actual":"` + node.FormatU128(aliceFunds) + `","expected":"0x000000000000000100000000000000b3"},"txid":"` + txid + `"}`
			},
		},
		{
			name: "ConflictingNonceInMempool equal fee",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				h.mustAccept(alice.send(t, bob.principal(), 1000, 0, 200, "first"))
				return alice.send(t, bob.principal(), 1000, 0, 200, "second")
			},
			reason: node.ReasonConflictingNonceInMempool,
			want: func(t *testing.T, txid, _ string) string {
				return compactFixture(t, "v2-transactions-error-conflictingnonce.derived.json", zeroTxID, txid)
			},
		},
		{
			name: "ConflictingNonceInMempool lower fee",
			setup: func(t *testing.T, h *harness, alice wallet) *stacks.Transaction {
				// integrations.rs: nonce 3 at fee 200 accepted, then fee 190 refused.
				h.mustAccept(alice.send(t, bob.principal(), 1000, 3, 200, ""))
				return alice.send(t, bob.principal(), 1000, 3, 190, "")
			},
			reason: node.ReasonConflictingNonceInMempool,
			want: func(t *testing.T, txid, _ string) string {
				return rejection("ConflictingNonceInMempool", txid)
			},
		},
	}
}

// checkRejection posts tt's tx and checks the 400 body, that nothing was
// stored, and the rejection as the node client decodes it.
func checkRejection(t *testing.T, tt rejectionCase) {
	t.Helper()
	h := newHarness(t, Config{})
	alice := newWallet(t)
	h.n.Fund(alice.addr, aliceFunds)
	tx := tt.setup(t, h, alice)
	before := h.n.MempoolSize()
	txid := tx.TxID().String()

	r := h.post(tx)
	if r.status != http.StatusBadRequest || r.contentType != "application/json" {
		t.Fatalf("got %d %q %s, want 400 application/json", r.status, r.contentType, r.body)
	}
	if want := tt.want(t, txid, alice.addr.String()); r.body != want {
		t.Errorf("body\n got %s\nwant %s", r.body, want)
	}
	if h.n.MempoolSize() != before {
		t.Errorf("mempool size %d -> %d after a rejection", before, h.n.MempoolSize())
	}
	if st := h.n.TxStatus(tx.TxID()); st.State != TxUnknown {
		t.Errorf("rejected tx status = %v", st.State)
	}

	// The same rejection through the project's client, typed.
	_, err := h.c.Broadcast(context.Background(), tx.Serialize())
	var rej *node.RejectionError
	if !errors.As(err, &rej) {
		t.Fatalf("client error = %v, want *node.RejectionError", err)
	}
	if rej.Reason != tt.reason || rej.TxID != txid || rej.Message != "transaction rejected" {
		t.Errorf("client rejection = %+v", rej)
	}
	if tt.data != nil {
		tt.data(t, rej)
	}
}

// TestRejectionOrder posts txs that break two rules at once; the node
// reports the one it checks first.
func TestRejectionOrder(t *testing.T) {
	bob := newWallet(t)
	sp := stacks.Principal{Address: bob.key.Address(stacks.AddressVersionMainnetSingleSig)}
	tests := []struct {
		name   string
		setup  func(t *testing.T, h *harness, alice wallet) *stacks.Transaction
		reason string
	}{
		{"version before amount", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			return signed(t, a.key, stacks.TxVersionMainnet, stacks.ChainIDTestnet, bob.principal(), 0, 0, 1)
		}, node.ReasonBadTransactionVersion},
		{"self-transfer before amount", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			return a.send(t, a.principal(), 0, 0, 180, "")
		}, node.ReasonTransferRecipientCannotEqualSender},
		{"amount before recipient version", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			return a.send(t, sp, 0, 0, 180, "")
		}, node.ReasonTransferAmountMustBePositive},
		{"recipient version before signature", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			return highS(a.send(t, sp, 1, 0, 180, ""))
		}, node.ReasonBadAddressVersionByte},
		{"signature before fee", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			return highS(a.send(t, bob.principal(), 1, 0, 1, ""))
		}, node.ReasonSignatureValidation},
		{"chain id before fee", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			tx, _ := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: bob.principal(), Amount: 1, Fee: 1, ChainID: 0x87654321}, a.key)
			return tx
		}, node.ReasonSignatureValidation},
		{"fee before nonce", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			return a.send(t, bob.principal(), 1, 40, 1, "")
		}, node.ReasonFeeTooLow},
		{"fee before funds", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			return a.send(t, bob.principal(), aliceFunds*2, 0, 1, "")
		}, node.ReasonFeeTooLow},
		{"chaining before funds", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			return a.send(t, bob.principal(), aliceFunds*2, 40, 180, "")
		}, node.ReasonTooMuchChaining},
		{"bad nonce before funds", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			h.mustAccept(a.send(t, bob.principal(), 1, 0, 180, ""))
			h.n.Mine()
			return a.send(t, bob.principal(), aliceFunds*2, 0, 180, "")
		}, node.ReasonBadNonce},
		{"funds before conflict", func(t *testing.T, h *harness, a wallet) *stacks.Transaction {
			h.mustAccept(a.send(t, bob.principal(), 1, 0, 300, ""))
			return a.send(t, bob.principal(), aliceFunds*2, 0, 200, "")
		}, node.ReasonNotEnoughFunds},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			alice := newWallet(t)
			h.n.Fund(alice.addr, aliceFunds)
			tx := tt.setup(t, h, alice)
			_, err := h.n.Submit(tx.Serialize())
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Reason != tt.reason {
				t.Fatalf("Submit error = %v, want %s", err, tt.reason)
			}
		})
	}
}

func TestAccept(t *testing.T) {
	h := newHarness(t, Config{})
	alice, bob := newWallet(t), newWallet(t)
	h.n.Fund(alice.addr, aliceFunds)

	tx := alice.send(t, bob.principal(), 1000, 0, 180, "fee == length is enough")
	r := h.post(tx)
	if r.status != http.StatusOK || r.contentType != "application/json" || r.body != `"`+tx.TxID().String()+`"` {
		t.Fatalf("got %d %q %s", r.status, r.contentType, r.body)
	}
	// Identical re-post: 200 with the same txid, nothing added.
	if r2 := h.post(tx); r2.status != http.StatusOK || r2.body != r.body {
		t.Fatalf("re-post: %d %s", r2.status, r2.body)
	}
	if got := h.n.MempoolSize(); got != 1 {
		t.Fatalf("mempool size %d, want 1", got)
	}
	// The client agrees on the wire format.
	txid, err := h.c.Broadcast(context.Background(), tx.Serialize())
	if err != nil || txid != tx.TxID().String() {
		t.Fatalf("client broadcast = %q, %v", txid, err)
	}
	if st := h.n.TxStatus(tx.TxID()); st.State != TxPending {
		t.Fatalf("status %v, want pending", st.State)
	}

	accepted := []struct {
		name string
		tx   *stacks.Transaction
	}{
		{"testnet multisig recipient", alice.send(t, stacks.Principal{Address: stacks.Address{Version: stacks.AddressVersionTestnetMultiSig, Hash160: bob.addr.Hash160}}, 1, 1, 180, "")},
		{"contract recipient", alice.send(t, stacks.Principal{Address: bob.addr, ContractName: "faucet-vault"}, 1, 2, 193, "")},
		{"highest chaining nonce (0+1+25)", alice.send(t, bob.principal(), 1, 26, 180, "")},
		{"own hash160 under another version is not self", alice.send(t, stacks.Principal{Address: stacks.Address{Version: stacks.AddressVersionTestnetMultiSig, Hash160: alice.addr.Hash160}}, 1, 3, 180, "")},
	}
	for _, a := range accepted {
		t.Run(a.name, func(t *testing.T) { h.mustAccept(a.tx) })
	}
}

// TestRBF: a strictly higher fee replaces the pending tx of the same nonce.
func TestRBF(t *testing.T) {
	h := newHarness(t, Config{})
	alice, bob := newWallet(t), newWallet(t)
	h.n.Fund(alice.addr, aliceFunds)

	old := h.mustAccept(alice.send(t, bob.principal(), 1000, 0, 200, "v1"))
	if _, err := h.n.Submit(alice.send(t, bob.principal(), 1000, 0, 200, "v2").Serialize()); !isReason(err, node.ReasonConflictingNonceInMempool) {
		t.Fatalf("equal fee: %v", err)
	}
	replacement := h.mustAccept(alice.send(t, bob.principal(), 5000, 0, 201, "v3"))

	if got := h.n.MempoolSize(); got != 1 {
		t.Fatalf("mempool size %d, want 1", got)
	}
	if st := h.n.TxStatus(old); st.State != TxUnknown {
		t.Errorf("replaced tx status %v, want unknown", st.State)
	}
	if r := h.get("/v2/transactions/unconfirmed/" + old.String()); r.status != http.StatusNotFound {
		t.Errorf("replaced tx still served: %d %s", r.status, r.body)
	}
	// The replaced tx is gone from the mempool table, so re-posting it is
	// judged afresh: its fee is now lower than the pending one's.
	oldTx := alice.send(t, bob.principal(), 1000, 0, 200, "v1")
	if _, err := h.n.Submit(oldTx.Serialize()); !isReason(err, node.ReasonConflictingNonceInMempool) {
		t.Errorf("re-post of replaced tx: %v", err)
	}

	blk := h.n.Mine()
	if !reflect.DeepEqual(blk.TxIDs, []stacks.TxID{replacement}) {
		t.Fatalf("block txs %v, want the replacement only", blk.TxIDs)
	}
	if bal, nonce := h.n.Account(alice.addr); bal != aliceFunds-5000-201 || nonce != 1 {
		t.Errorf("alice = %d nonce %d", bal, nonce)
	}
	if bal, _ := h.n.Account(bob.addr); bal != 5000 {
		t.Errorf("bob = %d, want 5000", bal)
	}
}

// TestFundsCheck: by default admission subtracts pending spends; with
// ConfirmedBalanceOnly it ignores them like stacks-core and the miner drops
// what cannot pay.
func TestFundsCheck(t *testing.T) {
	bob := newWallet(t)
	t.Run("ConfirmedBalanceOnly", func(t *testing.T) {
		h := newHarness(t, Config{ConfirmedBalanceOnly: true})
		alice := newWallet(t)
		h.n.Fund(alice.addr, 1000)
		a := h.mustAccept(alice.send(t, bob.principal(), 600, 0, 180, ""))
		b := h.mustAccept(alice.send(t, bob.principal(), 600, 1, 180, ""))
		blk := h.n.Mine()
		if !reflect.DeepEqual(blk.TxIDs, []stacks.TxID{a}) {
			t.Fatalf("mined %v, want only the first", blk.TxIDs)
		}
		if st := h.n.TxStatus(b); st.State != TxUnknown {
			t.Errorf("unpayable tx status %v, want dropped (unknown)", st.State)
		}
		if h.n.MempoolSize() != 0 {
			t.Errorf("mempool size %d, want 0", h.n.MempoolSize())
		}
		if bal, nonce := h.n.Account(alice.addr); bal != 220 || nonce != 1 {
			t.Errorf("alice = %d nonce %d, want 220 nonce 1", bal, nonce)
		}
	})
	t.Run("default counts pending spends", func(t *testing.T) {
		h := newHarness(t, Config{})
		alice := newWallet(t)
		h.n.Fund(alice.addr, 1000)
		h.mustAccept(alice.send(t, bob.principal(), 600, 0, 180, ""))
		_, err := h.n.Submit(alice.send(t, bob.principal(), 600, 1, 180, "").Serialize())
		var rej *Rejection
		if !errors.As(err, &rej) || rej.Reason != node.ReasonNotEnoughFunds {
			t.Fatalf("err = %v, want NotEnoughFunds", err)
		}
		want := map[string]any{"expected": node.FormatU128(780), "actual": node.FormatU128(220)}
		if !reflect.DeepEqual(rej.Data, want) {
			t.Errorf("reason_data = %v, want %v", rej.Data, want)
		}
		// The tx being replaced does not count against its replacement.
		h.mustAccept(alice.send(t, bob.principal(), 800, 0, 200, "rbf"))
	})
}

func isReason(err error, reason string) bool {
	var rej *Rejection
	return errors.As(err, &rej) && rej.Reason == reason
}

// TestRejectionFixtureShapes checks our rejection encoder against the
// verbatim stacks-core BadNonce example: same keys, same order.
func TestRejectionFixtureShapes(t *testing.T) {
	raw := fixture(t, "v2-transactions-error-badnonce.json")
	var want struct {
		ReasonData json.RawMessage `json:"reason_data"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	rej := &Rejection{Reason: node.ReasonBadNonce, Data: map[string]any{
		"expected": uint64(0), "actual": uint64(4), "principal": fixturePrincipal, "is_origin": true,
	}, TxID: stacks.TxID{0xca, 0xf6}}
	got, err := json.Marshal(rej)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(keysOf(t, got), keysOf(t, raw)) {
		t.Errorf("keys %v, want %v", keysOf(t, got), keysOf(t, raw))
	}
	var gotData struct {
		ReasonData json.RawMessage `json:"reason_data"`
	}
	_ = json.Unmarshal(got, &gotData)
	if !reflect.DeepEqual(keysOf(t, gotData.ReasonData), keysOf(t, want.ReasonData)) {
		t.Errorf("reason_data keys %v, want %v", keysOf(t, gotData.ReasonData), keysOf(t, want.ReasonData))
	}
	if !strings.Contains(string(got), `"reason_data":{"actual":4,"expected":0,"is_origin":true,"principal":"`+fixturePrincipal+`"}`) {
		t.Errorf("body %s", got)
	}
}
