package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
)

// A BTC drip's status dates it from the moment it is sent and, once a
// block holds it, names that block, as a Stacks drip's does: while the
// payer holds the payout, after it has settled (the node answers), and on
// a server whose history has no row of it (another replica, or the
// history's writer still behind the answer).
func TestBTCDripStatusHasItsBlockAndSendTime(t *testing.T) {
	e := newBTCEnv(t, options{})
	// A second server paying from the same BTC faucet, with a history of
	// its own that never saw the drip.
	other := newHarness(t, options{btc: e.bf})
	to := regtestAddresses(t)["p2wpkh"]
	before := time.Now().UTC().Truncate(time.Second)
	w := e.dripBTCV3(`{"address":"` + to + `"}`)
	after := time.Now().UTC()
	if w.Code != http.StatusOK {
		t.Fatalf("v3 BTC drip: %d %s", w.Code, w.Body)
	}
	var drip v3Success
	if err := json.Unmarshal(w.Body.Bytes(), &drip); err != nil {
		t.Fatal(err)
	}
	txid := drip.Transaction.TxID
	status := func(h *harness) dripStatusBody {
		t.Helper()
		w := h.do(http.MethodGet, "/faucet/v1/drips/"+txid, nil, nil)
		var b dripStatusBody
		if err := json.Unmarshal(w.Body.Bytes(), &b); w.Code != http.StatusOK || err != nil {
			t.Fatalf("drip status: %d %s (%v)", w.Code, w.Body, err)
		}
		return b
	}
	sentAt := func(b dripStatusBody) time.Time {
		t.Helper()
		if b.SentAt == nil {
			t.Fatalf("sent_at is null: %+v", b)
		}
		at, err := time.Parse(time.RFC3339, *b.SentAt)
		if err != nil || at.Before(before) || at.After(after) {
			t.Fatalf("sent_at %s (%v), want between %s and %s", *b.SentAt, err, before, after)
		}
		return at
	}
	for name, h := range map[string]*harness{"the drip's server": e.harness, "a server without its history row": other} {
		b := status(h)
		sentAt(b)
		if b.State != dripPending || b.BlockHeight != nil || b.Asset != "btc" || b.Recipient == nil || *b.Recipient != to {
			t.Errorf("%s, before a block: %+v", name, b)
		}
	}

	hashes, err := e.client.Generate(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	block, err := e.client.Block(context.Background(), hashes[0])
	if err != nil {
		t.Fatal(err)
	}
	if tx, err := e.client.RawTransaction(context.Background(), strings.TrimPrefix(txid, "0x")); err != nil || tx.BlockHash != block.Hash {
		t.Fatalf("the drip is not in the block just mined (%s): %+v %v", block.Hash, tx, err)
	}
	confirmedIn := func(h *harness, height int64) bool {
		b := status(h)
		return b.State == dripConfirmed && b.BlockHeight != nil && *b.BlockHeight == uint64(height)
	}
	for name, h := range map[string]*harness{"the drip's server": e.harness, "a server without its history row": other} {
		if err := eventually.Wait(t, 10*time.Second, func() bool { return confirmedIn(h, block.Height) }); err != nil {
			t.Fatalf("%s: status %+v, want confirmed in block %d", name, status(h), block.Height)
		}
		b := status(h)
		sentAt(b)
		if want := "Confirmed in block " + strconv.FormatInt(block.Height, 10) + " (1 confirmation)."; b.Message != want {
			t.Errorf("%s: message %q, want %q", name, b.Message, want)
		}
	}

	// Settled: the payer forgets it, the node and the faucet's chain view
	// answer for it; the block stays the same.
	if _, err := e.client.Generate(context.Background(), btcfaucet.SettleDepth); err != nil {
		t.Fatal(err)
	}
	if err := eventually.Wait(t, 10*time.Second, func() bool {
		p, ok, err := e.bf.Payout(context.Background(), strings.TrimPrefix(txid, "0x"))
		return err == nil && ok && !p.InFlight && p.Height == block.Height
	}); err != nil {
		p, ok, err := e.bf.Payout(context.Background(), strings.TrimPrefix(txid, "0x"))
		t.Fatalf("settled payout: %+v %v %v", p, ok, err)
	}
	b := status(e.harness)
	sentAt(b)
	if !confirmedIn(e.harness, block.Height) || !strings.HasPrefix(b.Message, "Confirmed in block "+strconv.FormatInt(block.Height, 10)+" (") {
		t.Errorf("settled: %+v, want confirmed in block %d", b, block.Height)
	}
	if b := status(other); b.BlockHeight == nil || *b.BlockHeight != uint64(block.Height) || b.State != dripConfirmed {
		t.Errorf("settled, a server without its history row: %+v", b)
	}

	// Deeper than the blocks the faucet's chain view keeps, which forget
	// the coins spent there: the node still tells the payout and its block.
	if _, err := e.client.Generate(context.Background(), btcfaucet.DefaultReorgDepth+1); err != nil {
		t.Fatal(err)
	}
	deep := func() bool {
		p, ok, err := e.bf.Payout(context.Background(), strings.TrimPrefix(txid, "0x"))
		return err == nil && ok && p.Height == block.Height && p.Confirmations > btcfaucet.DefaultReorgDepth &&
			len(p.Outputs) == 1 && p.Outputs[0].Address == to
	}
	if err := eventually.Wait(t, 20*time.Second, deep); err != nil {
		p, ok, err := e.bf.Payout(context.Background(), strings.TrimPrefix(txid, "0x"))
		t.Fatalf("a payout %d blocks deep: %+v %v %v", btcfaucet.DefaultReorgDepth+1+btcfaucet.SettleDepth, p, ok, err)
	}
	for name, h := range map[string]*harness{"the drip's server": e.harness, "a server without its history row": other} {
		if b := status(h); !confirmedIn(h, block.Height) || b.Recipient == nil || *b.Recipient != to {
			t.Errorf("%s, deep: %+v, want confirmed in block %d", name, b, block.Height)
		}
	}
}
