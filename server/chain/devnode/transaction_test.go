package devnode

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// txKeys is gettransaction.rs TransactionResponse in declaration order,
// which is the order serde writes.
var txKeys = []string{"index_block_hash", "tx", "result", "block_height", "is_canonical"}

func noSuchTx(id stacks.TxID) string { return "No such transaction " + id.String() + "\n" }

func TestTransactionAfterMine(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	h.n.Mine()
	h.n.Mine()
	tx0 := alice.send(t, bob.principal(), 1000, 0, 180, "first")
	id0 := h.mustAccept(tx0)
	b3 := h.n.Mine()
	tx1 := alice.send(t, bob.principal(), 2000, 1, 180, "second")
	id1 := h.mustAccept(tx1)
	b4 := h.n.Mine()
	h.n.Mine() // the tip moves on; the answers must not

	for _, tc := range []struct {
		id    stacks.TxID
		tx    *stacks.Transaction
		block Block
	}{{id0, tx0, b3}, {id1, tx1, b4}} {
		r := h.get("/v3/transaction/" + tc.id.String())
		if r.status != http.StatusOK || r.contentType != "application/json" {
			t.Fatalf("%s: %d %s %s", tc.id, r.status, r.contentType, r.body)
		}
		if got := keysOf(t, []byte(r.body)); !reflect.DeepEqual(got, txKeys) {
			t.Errorf("keys %v, want %v", got, txKeys)
		}
		want := `{"index_block_hash":"` + tc.block.IndexBlockHash + `","tx":"` + hexOf(tc.tx) +
			`","result":"(ok true)","block_height":` + strconv.FormatUint(tc.block.Height, 10) + `,"is_canonical":true}`
		if r.body != want {
			t.Errorf("body\n got %s\nwant %s", r.body, want)
		}
	}
	if b3.Height != 3 || b4.Height != 4 || b3.IndexBlockHash == b4.IndexBlockHash {
		t.Fatalf("blocks %d %s / %d %s", b3.Height, b3.IndexBlockHash, b4.Height, b4.IndexBlockHash)
	}

	// Every key of the stacks-core example is served.
	var example map[string]json.RawMessage
	if err := json.Unmarshal(fixture(t, "v3-transaction.json"), &example); err != nil {
		t.Fatal(err)
	}
	for k := range example {
		if !slices.Contains(txKeys, k) {
			t.Errorf("example key %q not served", k)
		}
	}
}

// The txindex table outlives the mempool table: after GC the tx is gone
// from the unconfirmed route but still found here.
func TestTransactionSurvivesMempoolGC(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	id := h.mustAccept(alice.send(t, bob.principal(), 1000, 0, 180, ""))
	b := h.n.Mine()
	for h.n.Tip().Height <= MempoolMaxTxAge {
		h.n.Mine()
	}
	if r := h.get("/v2/transactions/unconfirmed/" + id.String()); r.status != http.StatusNotFound {
		t.Fatalf("unconfirmed after GC: %d %s", r.status, r.body)
	}
	tx, err := h.c.Transaction(context.Background(), id.String())
	if err != nil || *tx.BlockHeight != 1 || tx.IndexBlockHash != b.IndexBlockHash {
		t.Fatalf("Transaction after GC = %+v, %v", tx, err)
	}
}

func TestTransactionMempoolOnly(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	tx := alice.send(t, bob.principal(), 1000, 0, 180, "")
	id := h.mustAccept(tx)

	r := h.get("/v3/transaction/" + id.String())
	if r.status != http.StatusNotFound || r.contentType != "text/plain" || r.body != noSuchTx(id) {
		t.Errorf("mempool-only tx on /v3/transaction: %d %s %q", r.status, r.contentType, r.body)
	}
	r = h.get("/v2/transactions/unconfirmed/" + id.String())
	if r.status != http.StatusOK || r.body != `{"tx":"`+hexOf(tx)+`","status":"Mempool"}` {
		t.Errorf("mempool-only tx on unconfirmed: %d %s", r.status, r.body)
	}

	ctx := context.Background()
	if _, err := h.c.Transaction(ctx, id.String()); !errors.Is(err, node.ErrTxNotFound) {
		t.Errorf("client Transaction = %v, want ErrTxNotFound", err)
	}
	if found, err := h.c.MempoolTx(ctx, "0x"+id.String()); !found || err != nil {
		t.Errorf("client MempoolTx = %v, %v", found, err)
	}

	// Unknown txids are the same 404 on both routes' own terms.
	var unknown stacks.TxID
	unknown[0] = 0xab
	if r := h.get("/v3/transaction/" + unknown.String()); r.status != http.StatusNotFound || r.body != noSuchTx(unknown) {
		t.Errorf("unknown txid: %d %q", r.status, r.body)
	}
	if found, err := h.c.MempoolTx(ctx, unknown.String()); found || err != nil {
		t.Errorf("client MempoolTx(unknown) = %v, %v", found, err)
	}
}

func TestTransactionRoutes(t *testing.T) {
	h := newHarness(t, Config{})
	var id stacks.TxID
	tests := []struct {
		method, path string
		body         []byte
		status       int
		want         string
	}{
		// The route regex is [0-9a-f]{64}: no 0x, no upper case.
		{http.MethodGet, "/v3/transaction/" + id.String(), nil, 404, noSuchTx(id)},
		{http.MethodGet, "/v3/transaction/0x" + id.String(), nil, 404, msgNoSuchPath},
		{http.MethodGet, "/v3/transaction/" + strings.Repeat("A", 64), nil, 404, msgNoSuchPath},
		{http.MethodGet, "/v3/transaction/" + strings.Repeat("a", 63), nil, 404, msgNoSuchPath},
		{http.MethodGet, "/v3/transactions/" + id.String(), nil, 404, msgNoSuchPath},
		{http.MethodGet, "/v3/transaction/" + id.String() + "/", nil, 404, msgNoSuchPath},
		{http.MethodPost, "/v3/transaction/" + id.String(), nil, 404, msgNoSuchPath},
		// try_parse_request refuses a GET with a body before anything else.
		{http.MethodGet, "/v3/transaction/" + id.String(), []byte("x"), 400,
			"Failed to decode: Invalid Http request: expected 0-length body for GetTransaction"},
		{http.MethodGet, "/v2/transactions/unconfirmed/" + id.String(), []byte("x"), 400,
			"Failed to decode: Invalid Http request: expected 0-length body for GetTransactionUnconfirmed"},
	}
	for _, tc := range tests {
		r := h.do(tc.method, tc.path, "", tc.body)
		if r.status != tc.status || r.body != tc.want || r.contentType != "text/plain" {
			t.Errorf("%s %s: %d %s %q, want %d %q", tc.method, tc.path, r.status, r.contentType, r.body, tc.status, tc.want)
		}
	}
}

func TestTransactionNoTxIndex(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{NoTxIndex: true, Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	tx := alice.send(t, bob.principal(), 1000, 0, 180, "")
	pending := h.mustAccept(tx)
	var unknown stacks.TxID
	for _, id := range []stacks.TxID{pending, unknown} {
		r := h.get("/v3/transaction/" + id.String())
		if r.status != http.StatusNotImplemented || r.contentType != "text/plain" || r.body != "Transaction indexing is not enabled" {
			t.Errorf("%s: %d %s %q", id, r.status, r.contentType, r.body)
		}
	}
	h.n.Mine()
	if st := h.n.TxStatus(pending); st.State != TxConfirmed {
		t.Fatalf("status %+v", st)
	}
	_, err := h.c.Transaction(context.Background(), pending.String())
	if !errors.Is(err, node.ErrTxIndexDisabled) || node.IsUnavailable(err) {
		t.Fatalf("client Transaction = %v, want ErrTxIndexDisabled", err)
	}
	// Route matching still comes first, and the mempool route is unaffected.
	if r := h.get("/v3/transaction/0x" + pending.String()); r.status != http.StatusNotFound || r.body != msgNoSuchPath {
		t.Errorf("bad path under NoTxIndex: %d %q", r.status, r.body)
	}
	if found, err := h.c.MempoolTx(context.Background(), pending.String()); !found || err != nil {
		t.Errorf("MempoolTx = %v, %v", found, err)
	}
}

// The project's client against the devnode: Transaction reports the height
// the tx was mined at, whatever spelling of the txid the caller has.
func TestTransactionClientEndToEnd(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	ctx := context.Background()
	for range 4 {
		h.n.Mine()
	}
	tx := alice.send(t, bob.principal(), 1000, 0, 180, "e2e")
	id, err := h.c.Broadcast(ctx, tx.Serialize())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Transaction(ctx, id); !errors.Is(err, node.ErrTxNotFound) {
		t.Fatalf("before mining: %v, want ErrTxNotFound", err)
	}
	b := h.n.Mine()
	h.n.Mine()
	if b.Height != 5 || len(b.TxIDs) != 1 || b.TxIDs[0].String() != id {
		t.Fatalf("mined %+v", b)
	}
	for _, form := range []string{id, "0x" + id, strings.ToUpper(id)} {
		got, err := h.c.Transaction(ctx, form)
		if err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		if got.BlockHeight == nil || *got.BlockHeight != b.Height || got.IsCanonical == nil || !*got.IsCanonical {
			t.Errorf("height/canonical %v/%v, want %d/true", got.BlockHeight, got.IsCanonical, b.Height)
		}
		if got.IndexBlockHash != b.IndexBlockHash || got.Tx != hex.EncodeToString(tx.Serialize()) || !got.IsOK() {
			t.Errorf("got %+v", got)
		}
		if st := h.n.TxStatus(tx.TxID()); st.Height != *got.BlockHeight {
			t.Errorf("TxStatus height %d, RPC %d", st.Height, *got.BlockHeight)
		}
	}
	// Like the real mempool table, a mined tx stays visible there until GC.
	if found, err := h.c.MempoolTx(ctx, id); !found || err != nil {
		t.Errorf("MempoolTx after mining = %v, %v", found, err)
	}
}

// Txs that never reach a block are unknown to the txindex.
func TestTransactionNeverMined(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{ConfirmedBalanceOnly: true, Genesis: map[stacks.Address]uint64{alice.addr: 10_000}})
	ctx := context.Background()
	// Both are admitted against the confirmed balance; only the first can pay.
	paid := h.mustAccept(alice.send(t, bob.principal(), 6000, 0, 180, ""))
	broke := h.mustAccept(alice.send(t, bob.principal(), 6000, 1, 180, ""))
	h.n.SetDropRate(1)
	ghost := alice.send(t, bob.principal(), 1, 2, 180, "")
	h.mustAccept(ghost) // answered 200, never stored
	h.n.SetDropRate(0)
	if b := h.n.Mine(); len(b.TxIDs) != 1 || b.TxIDs[0] != paid {
		t.Fatalf("mined %v", b.TxIDs)
	}
	if _, err := h.c.Transaction(ctx, paid.String()); err != nil {
		t.Errorf("paid: %v", err)
	}
	for _, id := range []stacks.TxID{broke, ghost.TxID()} {
		if _, err := h.c.Transaction(ctx, id.String()); !errors.Is(err, node.ErrTxNotFound) {
			t.Errorf("%s: %v, want ErrTxNotFound", id, err)
		}
		if found, err := h.c.MempoolTx(ctx, id.String()); found || err != nil {
			t.Errorf("%s: MempoolTx = %v, %v", id, found, err)
		}
	}
}
