package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// TestConcurrentDripsSettleExactly fires 1,000 concurrent drips at 4 keys
// over real HTTP while blocks are mined, then checks the whole ledger: every
// answer is a success or a documented error, no (key, nonce) is used twice,
// and after mining every accepted transfer is on chain with balances exact
// to the µSTX.
func TestConcurrentDripsSettleExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration load test")
	}
	const drips = 1000
	h := newHarness(t, options{keys: 4, faucetCfg: func(c *faucet.Config) {
		c.Timing.PollInterval = 5 * time.Millisecond
		c.Timing.BusyWait = 20 * time.Second // below the 25 s drip timeout; CI runs packages in parallel
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = h.f.Run(ctx) }()
	// Mine every 20 ms while the load runs.
	mining := h.mineEvery(ctx, 20*time.Millisecond)

	srv := httptest.NewServer(h.h)
	defer srv.Close()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: drips}}

	type outcome struct {
		recipient stacks.Address
		status    int
		reason    string
		tx        *stacks.Transaction
	}
	results := make([]outcome, drips)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range drips {
		to := newKey(t).TestnetAddress()
		results[i].recipient = to
		wg.Go(func() {
			<-start
			resp, err := client.Post(srv.URL+"/extended/v1/faucets/stx?address="+to.String(), "", nil)
			if err != nil {
				t.Errorf("drip %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			results[i].status = resp.StatusCode
			var m struct {
				Success bool   `json:"success"`
				TxID    string `json:"txId"`
				TxRaw   string `json:"txRaw"`
				Reason  string `json:"reason"`
			}
			if err := json.Unmarshal(body, &m); err != nil {
				t.Errorf("drip %d: body %q: %v", i, body, err)
				return
			}
			results[i].reason = m.Reason
			if resp.StatusCode == http.StatusOK {
				raw, _ := hex.DecodeString(m.TxRaw)
				tx, err := stacks.DecodeTransaction(raw)
				if err != nil || tx.TxID().Hex0x() != m.TxID {
					t.Errorf("drip %d: bad tx %s: %v", i, m.TxID, err)
					return
				}
				results[i].tx = tx
			}
		})
	}
	close(start)
	wg.Wait()

	documented := map[string]bool{"busy": true, "exhausted": true, "node_unavailable": true}
	type keyNonce struct {
		key   stacks.Address
		nonce uint64
	}
	used := map[keyNonce]bool{}
	spent := map[stacks.Address]uint64{}
	accepted := 0
	reasons := map[string]int{}
	for i, r := range results {
		switch {
		case r.status == http.StatusOK && r.tx != nil:
			accepted++
			kn := keyNonce{r.tx.SenderAddress(), r.tx.Auth.Nonce}
			if used[kn] {
				t.Fatalf("duplicate (key, nonce) %s/%d", kn.key, kn.nonce)
			}
			used[kn] = true
			if r.tx.Payload.Recipient.Address != r.recipient || r.tx.Payload.Amount != faucet.DefaultAmount {
				t.Fatalf("drip %d sent %d to %s", i, r.tx.Payload.Amount, r.tx.Payload.Recipient)
			}
			spent[kn.key] += r.tx.Payload.Amount + r.tx.Auth.Fee
		case r.status == http.StatusInternalServerError && documented[r.reason]:
			reasons[r.reason]++
		default:
			t.Fatalf("drip %d: undocumented answer %d %q", i, r.status, r.reason)
		}
	}
	t.Logf("%d drips: %d accepted, errors %v", drips, accepted, reasons)
	if accepted < drips*9/10 {
		t.Fatalf("only %d of %d drips accepted", accepted, drips)
	}

	// Stop the load-time miner, then mine until the mempool is empty.
	cancel()
	<-mining
	for i := 0; h.dn.MempoolSize() > 0; i++ {
		if i > 20 {
			t.Fatalf("mempool still holds %d txs", h.dn.MempoolSize())
		}
		h.dn.Mine()
	}
	for _, r := range results {
		if r.tx == nil {
			if bal, _ := h.dn.Account(r.recipient); bal != 0 {
				t.Fatalf("failed drip to %s still paid %d", r.recipient, bal)
			}
			continue
		}
		if st := h.dn.TxStatus(r.tx.TxID()); st.State != devnode.TxConfirmed {
			t.Fatalf("accepted tx %s not on chain: %v", r.tx.TxID(), st.State)
		}
		if bal, _ := h.dn.Account(r.recipient); bal != faucet.DefaultAmount {
			t.Fatalf("recipient %s holds %d, want %d", r.recipient, bal, faucet.DefaultAmount)
		}
	}
	for _, k := range h.keys {
		a := k.TestnetAddress()
		bal, _ := h.dn.Account(a)
		if want := testFunding - spent[a]; bal != want {
			t.Errorf("key %s balance %d, want %d (diff %d)", a, bal, want, int64(want)-int64(bal))
		}
	}
	if t.Failed() {
		fmt.Println(h.logs.String())
	}
}
