//go:build e2ecluster

package e2ecluster

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

// BTC on every replica: a real btcd beside the cluster (its RPC relayed to
// the node's address, which pods reach), the suite's FaucetServer given a
// BTC entry, and a BTC burst from clients that never retry through the
// delete of the pod holding the Bitcoin key and then a rollout of both.
// Promise: every drip answered 200, every recipient paid exactly one output
// of the drip amount.
const btcDripSats = 10_000

// btcFaultsManifest is the suite's FaucetServer with the btc entry paying
// from the key in Secret <fs>-btc through the node at rpcURL.
func btcFaultsManifest(uri string, perIP int, key *bitcoin.PrivateKey, user, pass, rpcURL, nodeURL string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %[1]s-btc, namespace: %[2]s}
type: Opaque
stringData:
  key: "%[3]s %[4]s"
---
apiVersion: v1
kind: Secret
metadata: {name: %[1]s-btc-rpc, namespace: %[2]s}
type: Opaque
stringData:
  credentials: "%[5]s:%[6]s"
---
`, fsFaults, ns, key.WIF(), key.Address().String(), user, pass) + faultsManifest(uri, faultKeys(), nodeURL, perIP) + fmt.Sprintf(`  assets:
  - name: btc
    btc:
      network: regtest
      rpc:
        url: %[1]s
        credentialsSecretRef: {name: %[2]s-btc-rpc}
      keySecretRef: {name: %[2]s-btc}
    rateLimits:
      perIP: {requests: 1000000, window: 5m}
      perAddress: {requests: 1000000, window: 5m}
`, rpcURL, fsFaults)
}

// relay forwards connections on a listener at host to target until the
// test ends: btcd serves RPC without TLS on loopback only.
func relay(t *testing.T, host, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in) }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return ln.Addr().String()
}

// btcShot is one BTC drip's answer.
type btcShot struct {
	to         string
	code       int // 0: no answer within the client's timeout
	txid, body string
	sent, at   time.Time
}

func (r *faultRig) btcThroughDeleteAndRollout(t *testing.T, ctx context.Context) {
	r.healthy(t, ctx)
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	bn := btcdtest.Start(t, key.Address().String())
	bc := bn.Client()
	// 60 mature coinbases of 50 BTC: coins enough to pay every drip of the
	// burst in parallel payouts.
	if _, err := bc.Generate(ctx, btcfaucet.CoinbaseMaturity+60); err != nil {
		t.Fatal(err)
	}
	from, err := bc.BlockCount(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rpcURL := "http://" + relay(t, nodeIP, bn.RPCAddr())
	manifest := func() string {
		return btcFaultsManifest("", r.perIP, key, bn.User(), bn.Password(), rpcURL, r.nodeURL)
	}
	// Giving the FaucetServer BTC rolls its pods; the step starts once
	// both new ones run and BTC is paid.
	before := podsOf(ctx, r.c, fsFaults)
	r.e.apply(t, ctx, manifest())
	for _, p := range before {
		waitPodGone(t, ctx, r.c, p, 3*time.Minute)
	}
	r.healthy(t, ctx)
	hc := &http.Client{Timeout: faultClientTimeout}
	poll(t, ctx, "BTC listed and paid by a holder", 2*time.Minute, func() error {
		resp, err := hc.Get(r.faucetURL + "/faucet/v1/info")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), `"name":"BTC"`) || strings.Contains(string(b), `"state":"standby"`) {
			return fmt.Errorf("info: %s", shorten(string(b)))
		}
		return nil
	})

	var mu sync.Mutex
	var shots []btcShot
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range faultWorkers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(faultPace):
				}
				k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
				if err != nil {
					panic(err)
				}
				s := btcDrip(ctx, hc, r.faucetURL, k.Address().String())
				mu.Lock()
				shots = append(shots, s)
				mu.Unlock()
			}
		})
	}
	answered := func(n int) {
		poll(t, ctx, fmt.Sprintf("%d BTC drips answered", n), time.Minute, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(shots) < n {
				return fmt.Errorf("%d answered", len(shots))
			}
			return nil
		})
	}
	answered(20)
	// The pod holding the Bitcoin key goes first: the other takes the key
	// over while it forwards drips to it.
	holder := r.btcHolder(t, ctx)
	deleted := time.Now()
	r.e.run(t, ctx, r.e.kubectl, "delete", "pod", "-n", ns, holder, "--wait=false")
	r.healthy(t, ctx)
	answered(len(shots) + 20)
	r.perIP++
	before = podsOf(ctx, r.c, fsFaults)
	rolled := time.Now()
	r.e.apply(t, ctx, manifest())
	for _, p := range before {
		waitPodGone(t, ctx, r.c, p, 3*time.Minute)
	}
	r.healthy(t, ctx)
	mu.Lock()
	n := len(shots)
	mu.Unlock()
	answered(n + 20)
	close(stop)
	wg.Wait()

	var slowest time.Duration
	txids := map[string]bool{}
	for _, s := range shots {
		slowest = max(slowest, s.at.Sub(s.sent))
		if s.code != http.StatusOK {
			t.Errorf("BTC drip sent at %s (pod %s deleted at 0, rollout at %s): %d %s", rel(s.sent, deleted), holder, rel(rolled, deleted), s.code, shorten(s.body))
			continue
		}
		txids[s.txid] = true
	}
	// Every answered payout reaches a block (one the deleted pods recorded
	// but had not sent is sent by the next holder on resume).
	poll(t, ctx, "every answered BTC payout mined", 2*time.Minute, func() error {
		if _, err := bc.Generate(ctx, 1); err != nil {
			return err
		}
		for id := range txids {
			if tx, err := bc.RawTransaction(ctx, id); err != nil || tx.Confirmations < 1 {
				return fmt.Errorf("%s not mined: %w", id, err)
			}
		}
		return nil
	})
	got := btcdtest.Outputs(t, bc, from)
	for _, s := range shots {
		if s.code != http.StatusOK {
			continue
		}
		a, err := bitcoin.ParseAddress(s.to, bitcoin.Regtest)
		if err != nil {
			t.Fatal(err)
		}
		if outs := got[hex.EncodeToString(a.PkScript())]; len(outs) != 1 || outs[0] != btcDripSats {
			t.Errorf("%s answered 200 (tx %s) but received %v", s.to, s.txid, outs)
		}
	}
	t.Logf("PROMISE every BTC drip answered 200 and paid exactly once through the delete of the key's holder (%s) and a rollout: %d drips in %d payouts, slowest answer %s",
		holder, len(shots), len(txids), slowest.Round(time.Millisecond))
}

// btcHolder is the faucet pod whose BTC faucet last started paying.
func (r *faultRig) btcHolder(t *testing.T, ctx context.Context) string {
	t.Helper()
	for _, p := range podsOf(ctx, r.c, fsFaults) {
		logs := r.e.run(t, ctx, r.e.kubectl, "logs", "-n", ns, p.Name)
		if strings.LastIndex(logs, `"btc faucet ready"`) > strings.LastIndex(logs, `"btc faucet: gave the BTC key`) {
			return p.Name
		}
	}
	t.Fatal("no faucet pod holds the Bitcoin key")
	return ""
}

// btcDrip asks for one v3 BTC drip, never retrying.
func btcDrip(ctx context.Context, hc *http.Client, faucetURL, to string) btcShot {
	s := btcShot{to: to, sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, faucetURL+"/extended/v3/faucets/btc", strings.NewReader(`{"address":"`+to+`"}`))
	if err != nil {
		s.body = err.Error()
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	s.at = time.Now()
	if err != nil {
		s.body = err.Error()
		return s
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s.code, s.body = resp.StatusCode, string(b)
	var v struct {
		Transaction struct {
			TxID string `json:"tx_id"`
		} `json:"transaction"`
	}
	if json.Unmarshal(b, &v) == nil {
		s.txid = strings.TrimPrefix(v.Transaction.TxID, "0x")
	}
	return s
}
