package devnode

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// TestLatency steps the node's clock through an injected latency: the
// answer waits for it, without holding the node's locks, and a client that
// gives up first gets a transport error.
func TestLatency(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := newHarness(t, Config{Clock: clk})
	ctx := context.Background()
	const d = 150 * time.Millisecond
	h.n.SetLatency(d)
	delaying := make(chan struct{})
	var once sync.Once
	h.n.rpc.onDelay = func() { once.Do(func() { close(delaying) }) }

	done := make(chan error, 1)
	go func() {
		_, err := h.c.Info(ctx)
		done <- err
	}()
	<-delaying
	// The delay must hold neither the state lock nor the faults'.
	unlocked := make(chan struct{})
	go func() {
		h.n.Tip()
		h.n.ChainID()
		close(unlocked)
	}()
	select {
	case <-unlocked:
	case <-time.After(10 * time.Second):
		t.Fatal("Tip and ChainID blocked behind a delayed request")
	}
	eventually.True(t, 10*time.Second, "the latency timer is set", clk.HasWaiters)
	clk.Step(d - time.Nanosecond)
	select {
	case err := <-done:
		t.Fatalf("answered (%v) before the latency elapsed", err)
	default:
	}
	clk.Step(time.Nanosecond)
	if err := <-done; err != nil {
		t.Fatalf("Info after the latency: %v", err)
	}

	// A client that gives up before the latency fails with a transport error.
	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err := h.c.Info(short)
	var te *node.TransportError
	if !errors.As(err, &te) || !node.IsUnavailable(err) {
		t.Errorf("timeout err = %v", err)
	}

	// Without latency the answer needs no step of the clock.
	h.n.SetLatency(0)
	if _, err := h.c.Info(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestErrorRate(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	ctx := context.Background()
	h.n.SetErrorRate(1)

	calls := map[string]func() error{
		"info":    func() error { _, err := h.c.Info(ctx); return err },
		"pox":     func() error { _, err := h.c.PoX(ctx); return err },
		"account": func() error { _, err := h.c.Account(ctx, alice.addr.String()); return err },
		"fees":    func() error { _, err := h.c.TransferFeeRate(ctx); return err },
		"broadcast": func() error {
			_, err := h.c.Broadcast(ctx, alice.send(t, bob.principal(), 1, 0, 180, "").Serialize())
			return err
		},
	}
	for name, call := range calls {
		err := call()
		var he *node.HTTPError
		if !errors.As(err, &he) || he.StatusCode != http.StatusInternalServerError || !node.IsUnavailable(err) {
			t.Errorf("%s: err = %v, want HTTP 500", name, err)
		}
	}
	if r := h.get("/v2/info"); r.status != 500 || r.contentType != "text/plain" || r.body != msgInjectedFailure {
		t.Errorf("raw 500: %d %q %q", r.status, r.contentType, r.body)
	}
	if h.n.MempoolSize() != 0 {
		t.Error("a 500'd broadcast must not be stored")
	}

	// A seeded partial rate fails roughly that fraction.
	h.n.SetErrorRate(0.5)
	failed := 0
	for range 200 {
		if _, err := h.c.Info(ctx); err != nil {
			failed++
		}
	}
	if failed < 60 || failed > 140 {
		t.Errorf("error rate 0.5 failed %d of 200", failed)
	}

	h.n.SetErrorRate(0)
	for name, call := range calls {
		if err := call(); err != nil {
			t.Errorf("%s after SetErrorRate(0): %v", name, err)
		}
	}
}

func TestDropRate(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	ctx := context.Background()
	h.n.SetDropRate(1)

	tx := alice.send(t, bob.principal(), 1000, 0, 180, "")
	for range 2 { // a re-post is "accepted" and dropped again
		txid, err := h.c.Broadcast(ctx, tx.Serialize())
		if err != nil || txid != tx.TxID().String() {
			t.Fatalf("Broadcast = %q, %v; want 200 with the txid", txid, err)
		}
	}
	if h.n.MempoolSize() != 0 || h.n.TxStatus(tx.TxID()).State != TxUnknown {
		t.Fatalf("dropped tx stored: size %d", h.n.MempoolSize())
	}
	if r := h.get("/v2/transactions/unconfirmed/" + tx.TxID().String()); r.status != http.StatusNotFound {
		t.Errorf("dropped tx visible: %d", r.status)
	}
	if b := h.n.Mine(); len(b.TxIDs) != 0 {
		t.Fatalf("dropped tx mined: %v", b.TxIDs)
	}
	if _, nonce := h.n.Account(alice.addr); nonce != 0 {
		t.Fatalf("nonce %d", nonce)
	}
	// Rejections are still reported; only accepted txs vanish.
	if _, err := h.n.Submit(alice.send(t, bob.principal(), 1000, 0, 1, "").Serialize()); !isReason(err, node.ReasonFeeTooLow) {
		t.Fatalf("rejection under drop rate: %v", err)
	}

	h.n.SetDropRate(0)
	h.mustAccept(tx)
	if b := h.n.Mine(); len(b.TxIDs) != 1 {
		t.Fatalf("after SetDropRate(0): mined %v", b.TxIDs)
	}
}

func TestDown(t *testing.T) {
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	ctx := context.Background()
	h.n.SetDown(true)

	_, err := h.c.Info(ctx)
	var te *node.TransportError
	if !errors.As(err, &te) || !node.IsUnavailable(err) {
		t.Fatalf("Info err = %v, want a transport error", err)
	}
	tx := alice.send(t, bob.principal(), 1000, 0, 180, "")
	if _, err := h.c.Broadcast(ctx, tx.Serialize()); !errors.As(err, &te) {
		t.Fatalf("Broadcast err = %v", err)
	}
	if _, err := h.n.Submit(tx.Serialize()); !errors.Is(err, ErrDown) {
		t.Fatalf("Submit err = %v", err)
	}
	if h.n.MempoolSize() != 0 {
		t.Fatal("a dead node stored a tx")
	}

	h.n.SetDown(false)
	if _, err := h.c.Info(ctx); err != nil {
		t.Fatalf("after SetDown(false): %v", err)
	}
}

func TestMainnet(t *testing.T) {
	key := newWallet(t).key
	sender := key.Address(stacks.AddressVersionMainnetSingleSig)
	bob := newWallet(t)
	spBob := stacks.Principal{Address: bob.key.Address(stacks.AddressVersionMainnetSingleSig)}

	for _, viaConfig := range []bool{false, true} {
		name := "SetMainnet"
		if viaConfig {
			name = "Config.Mainnet"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Config{Mainnet: viaConfig, Genesis: map[stacks.Address]uint64{sender: aliceFunds}})
			if !viaConfig {
				h.n.SetMainnet(true)
			}
			ctx := context.Background()
			info, err := h.c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.NetworkID != 1 || info.ParentNetworkID != 3652501241 || info.PeerVersion != 0x1800000b {
				t.Errorf("network %d parent %d peer %#x", info.NetworkID, info.ParentNetworkID, info.PeerVersion)
			}
			pox, _ := h.c.PoX(ctx)
			if pox.ContractID != "SP000000000000000000002Q6VF78.pox-4" || !strings.HasPrefix(pox.ContractVersions[0].ContractID, "SP000000000000000000002Q6VF78.") {
				t.Errorf("pox contract %q", pox.ContractID)
			}

			testnetTx := newWallet(t).send(t, bob.principal(), 1, 0, 180, "")
			if _, err := h.n.Submit(testnetTx.Serialize()); !isReason(err, node.ReasonBadTransactionVersion) {
				t.Errorf("testnet tx: %v", err)
			}
			wrongChain := signed(t, key, stacks.TxVersionMainnet, stacks.ChainIDTestnet, spBob, 1, 0, 180)
			_, err = h.n.Submit(wrongChain.Serialize())
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Reason != node.ReasonSignatureValidation ||
				!strings.Contains(rej.Data["message"].(string), "invalid chain ID 2147483648 (expected 1)") {
				t.Errorf("testnet chain id: %v", err)
			}
			toTestnet := signed(t, key, stacks.TxVersionMainnet, stacks.ChainIDMainnet, bob.principal(), 1, 0, 180)
			if _, err := h.n.Submit(toTestnet.Serialize()); !isReason(err, node.ReasonBadAddressVersionByte) {
				t.Errorf("ST recipient on mainnet: %v", err)
			}

			ok := signed(t, key, stacks.TxVersionMainnet, stacks.ChainIDMainnet, spBob, 5000, 0, 180)
			h.mustAccept(ok)
			h.n.Mine()
			if bal, _ := h.n.Account(spBob.Address); bal != 5000 {
				t.Errorf("SP recipient balance %d", bal)
			}
			if bal, nonce := h.n.Account(sender); bal != aliceFunds-5180 || nonce != 1 {
				t.Errorf("sender %d nonce %d", bal, nonce)
			}

			h.n.SetMainnet(false)
			if info, _ := h.c.Info(ctx); info.NetworkID != stacks.ChainIDTestnet {
				t.Errorf("back to testnet: network_id %d", info.NetworkID)
			}
		})
	}
}

func TestCustomChainID(t *testing.T) {
	const chainID = 0x87654321
	alice, bob := newWallet(t), newWallet(t)
	h := newHarness(t, Config{ChainID: chainID, Genesis: map[stacks.Address]uint64{alice.addr: aliceFunds}})
	if info, _ := h.c.Info(context.Background()); info.NetworkID != chainID {
		t.Fatalf("network_id %d", info.NetworkID)
	}
	if h.n.ChainID() != chainID {
		t.Fatalf("ChainID() = %d", h.n.ChainID())
	}
	tx, err := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: bob.principal(), Amount: 1, Fee: 180, ChainID: chainID}, alice.key)
	if err != nil {
		t.Fatal(err)
	}
	h.mustAccept(tx)
	if _, err := h.n.Submit(alice.send(t, bob.principal(), 1, 1, 180, "").Serialize()); !isReason(err, node.ReasonSignatureValidation) {
		t.Fatalf("default testnet chain id on a custom-chain node: %v", err)
	}
}
