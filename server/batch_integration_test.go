package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// TestBatchedThousandDripsOneKey is issue #11's proof: with ONE key and a
// block time longer than the whole load (blocks are mined only by the test),
// 1,000 concurrent drips to distinct recipients, half over v1 and half over
// v3, are all answered 200 before the next block, and that block mines all
// of them with every balance exact. Without batching the same key could
// answer at most 25 (the node's chaining limit) before a block.
func TestBatchedThousandDripsOneKey(t *testing.T) {
	if testing.Short() {
		t.Skip("integration load test")
	}
	const drips = 1000
	h := newHarness(t, options{
		devnode: devnode.Config{SendManyContract: stacks.SendManyMemoTestnet},
		faucetCfg: func(c *faucet.Config) {
			c.Batching.Max = faucet.MaxBatch
			c.Batching.Window = 250 * time.Millisecond // a fixed window: the adaptive batcher has its own tests
		},
	})
	startHeight := h.dn.Tip().Height
	srv := httptest.NewServer(h.h)
	defer srv.Close()
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: drips}}

	type outcome struct {
		to   stacks.Address
		txid string
		raw  []byte // v1 answers carry the raw tx
	}
	results := make([]outcome, drips)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range drips {
		to := newKey(t).TestnetAddress()
		results[i].to = to
		v3 := i%2 == 1
		wg.Go(func() {
			<-start
			var resp *http.Response
			var err error
			if v3 {
				resp, err = client.Post(srv.URL+"/extended/v3/faucets/stx", "application/json",
					strings.NewReader(`{"address":"`+to.String()+`"}`))
			} else {
				resp, err = client.Post(srv.URL+"/extended/v1/faucets/stx?address="+to.String(), "", nil)
			}
			if err != nil {
				t.Errorf("drip %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("drip %d: %d %s", i, resp.StatusCode, body)
				return
			}
			if v3 {
				var m v3Success
				if err := json.Unmarshal(body, &m); err != nil || m.Amount["stx"] != "500000000" {
					t.Errorf("drip %d: v3 body %s: %v", i, body, err)
					return
				}
				results[i].txid = m.Transaction.TxID
				return
			}
			var m struct {
				Success bool   `json:"success"`
				TxID    string `json:"txId"`
				TxRaw   string `json:"txRaw"`
			}
			if err := json.Unmarshal(body, &m); err != nil || !m.Success {
				t.Errorf("drip %d: v1 body %s: %v", i, body, err)
				return
			}
			raw, err := hex.DecodeString(m.TxRaw)
			if err != nil {
				t.Errorf("drip %d: txRaw: %v", i, err)
			}
			results[i].txid, results[i].raw = m.TxID, raw
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if h := h.dn.Tip().Height; h != startHeight {
		t.Fatalf("a block was mined during the load (height %d → %d)", startHeight, h)
	}

	// Every v1 answer decodes to a send-many call that pays its recipient,
	// with a post-condition on the batch's exact total.
	recipientsOf := map[string]map[stacks.Principal]bool{}
	key := h.keys[0].TestnetAddress()
	for i, r := range results {
		if r.raw == nil {
			continue
		}
		tx, err := stacks.DecodeTransaction(r.raw)
		if err != nil || tx.TxID().Hex0x() != r.txid {
			t.Fatalf("drip %d: tx %s does not decode to its txid: %v", i, r.txid, err)
		}
		if tx.SenderAddress() != key {
			t.Fatalf("drip %d: tx %s is not from the key", i, r.txid)
		}
		// A drip that found no company (a straggler under a loaded CPU) is
		// sent as a plain transfer; that is the engine's rule for a batch of one.
		if tx.ContractCall == nil {
			if tx.Payload.Recipient != (stacks.Principal{Address: r.to}) || tx.Payload.Amount != faucet.DefaultAmount {
				t.Fatalf("drip %d: lone transfer %+v does not pay %s", i, tx.Payload, r.to)
			}
			continue
		}
		if tx.ContractCall.Function != stacks.SendManyFunction {
			t.Fatalf("drip %d: not a send-many call: %+v", i, tx.ContractCall)
		}
		if recipientsOf[r.txid] == nil {
			list := tx.ContractCall.Args[0].(stacks.List)
			set := map[stacks.Principal]bool{}
			for _, v := range list {
				set[v.(stacks.Tuple)[1].Value.(stacks.Principal)] = true
			}
			recipientsOf[r.txid] = set
			want := stacks.PrincipalSendsExactly(stacks.Principal{Address: key}, faucet.DefaultAmount*uint64(len(list)))
			if len(tx.PostConditions) != 1 || tx.PostConditions[0] != want {
				t.Fatalf("tx %s post-conditions %+v, want %+v", r.txid, tx.PostConditions, want)
			}
		}
		if !recipientsOf[r.txid][stacks.Principal{Address: r.to}] {
			t.Fatalf("drip %d: tx %s does not pay %s", i, r.txid, r.to)
		}
	}
	txids := map[string]bool{}
	for _, r := range results {
		txids[r.txid] = true
	}
	t.Logf("%d drips answered 200 by %d transactions from one key", drips, len(txids))
	if len(txids) > faucet.DefaultMaxInFlight {
		t.Fatalf("%d transactions: more than one block's worth (%d) from one key", len(txids), faucet.DefaultMaxInFlight)
	}

	// Within two blocks every drip is mined and every balance is exact.
	for range 2 {
		if h.dn.MempoolSize() == 0 {
			break
		}
		h.dn.Mine()
	}
	if n := h.dn.MempoolSize(); n != 0 {
		t.Fatalf("%d txs still in the mempool after two blocks", n)
	}
	// Read every tx back from the node (GET /v3/transaction): mined, (ok …).
	var fees uint64
	paid := 0
	for id := range txids {
		mined, err := h.client.Transaction(context.Background(), id)
		if err != nil {
			t.Fatalf("tx %s: %v", id, err)
		}
		if !mined.IsOK() || mined.BlockHeight == nil || *mined.BlockHeight > startHeight+2 {
			t.Fatalf("tx %s: result %s at height %v", id, mined.Result, mined.BlockHeight)
		}
		raw, err := hex.DecodeString(mined.Tx)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := stacks.DecodeTransaction(raw)
		if err != nil {
			t.Fatal(err)
		}
		fees += tx.Auth.Fee
		if tx.ContractCall == nil {
			paid++ // a batch of one goes as a plain transfer
			continue
		}
		paid += len(tx.ContractCall.Args[0].(stacks.List))
	}
	if paid != drips {
		t.Fatalf("the transactions pay %d recipients, want %d", paid, drips)
	}
	for _, r := range results {
		if bal, _ := h.dn.Account(r.to); bal != faucet.DefaultAmount {
			t.Fatalf("%s holds %d µSTX, want %d", r.to, bal, faucet.DefaultAmount)
		}
	}
	bal, nonce := h.dn.Account(key)
	if want := testFunding - drips*faucet.DefaultAmount - fees; bal != want || nonce != uint64(len(txids)) {
		t.Fatalf("key balance %d nonce %d, want %d and %d", bal, nonce, want, len(txids))
	}
}

// The drip status of a batched drip names the batch, not one of its
// recipients, both while in flight and from the history, and follows the
// shared transaction to its block.
func TestDripStatusOfABatch(t *testing.T) {
	h := newHarness(t, options{
		devnode: devnode.Config{SendManyContract: stacks.SendManyMemoTestnet},
		faucetCfg: func(c *faucet.Config) {
			c.Batching.Max, c.Batching.Window = 3, time.Hour // leaves when full
		},
	})
	var txids [3]string
	var wg sync.WaitGroup
	for i := range txids {
		wg.Go(func() {
			w := h.drip("address=" + newRecipient(t))
			if w.Code != http.StatusOK {
				t.Errorf("drip: %d %s", w.Code, w.Body)
				return
			}
			txids[i] = decodeMap(t, w.Body.Bytes())["txId"].(string)
		})
	}
	wg.Wait()
	if t.Failed() || txids[0] != txids[1] || txids[1] != txids[2] {
		t.Fatalf("txids %v, want one shared", txids)
	}
	m := dripStatus(t, h, txids[0])
	if m["state"] != dripPending || m["recipient"] != nil || m["batch"] != float64(3) || m["amount_ustx"] != "500000000" {
		t.Fatalf("in flight: %v", m)
	}
	blk := h.dn.Mine()
	if err := h.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	m = dripStatus(t, h, txids[0])
	if m["state"] != dripConfirmed || m["block_height"] != float64(blk.Height) || m["recipient"] != nil || m["batch"] != float64(3) {
		t.Fatalf("mined: %v", m)
	}
}
