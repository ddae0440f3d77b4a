package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// The mixed fault test: every asset at once, one process killed.

// mixedToken is a token of the mixed test: its flag and how much a drip is.
type mixedToken struct {
	name   string
	asset  stacks.AssetInfo
	amount uint64
	spec   devnode.TokenSpec
}

func mixedTokens(t *testing.T) []mixedToken {
	t.Helper()
	var out []mixedToken
	for _, tk := range []struct {
		name, id, display, symbol string
		decimals                  uint8
		amount                    uint64
	}{
		{"sbtc", settings.SBTCTestnet, devnode.SBTCDisplayName, devnode.SBTCSymbol, devnode.SBTCDecimals, 100_000},
		{"tusd", "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd", "Test USD", "tUSD", 6, 10_000_000},
	} {
		a, err := stacks.ParseAssetID(tk.id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, mixedToken{name: tk.name, asset: a, amount: tk.amount,
			spec: devnode.TokenSpec{Asset: a, Name: tk.display, Symbol: tk.symbol, Decimals: tk.decimals, Genesis: map[stacks.Address]uint64{}}})
	}
	return out
}

// newMixedFaultEnv is the fault suite's env with both tokens deployed and
// minted to the keys, and a btcd whose coinbases pay the BTC key.
func newMixedFaultEnv(t *testing.T, tokens []mixedToken) *btcFaultEnv {
	t.Helper()
	e := newFaultEnv(t, 4)
	cfg := devnode.Config{Genesis: map[stacks.Address]uint64{}, Seed: 7}
	for _, k := range e.keys {
		cfg.Genesis[k.TestnetAddress()] = faultKeyFunding
	}
	for _, tk := range tokens {
		for _, k := range e.keys {
			tk.spec.Genesis[k.TestnetAddress()] = 1_000_000 * tk.amount
		}
		cfg.Tokens = append(cfg.Tokens, tk.spec)
	}
	// The env's own node has no tokens: serve this one instead.
	e.dn = devnode.New(cfg)
	e.nodeURL = serveTestNode(t, e.dn)
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	node := btcdtest.Start(t, key.Address().String())
	client := node.Client()
	if _, err := client.Generate(context.Background(), btcfaucet.CoinbaseMaturity+20); err != nil {
		t.Fatal(err)
	}
	keyFile, credsFile := filepath.Join(e.dir, "btc-key"), filepath.Join(e.dir, "btc-rpc")
	if err := os.WriteFile(keyFile, []byte(key.WIF()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(credsFile, []byte(node.User()+":"+node.Password()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &btcFaultEnv{faultEnv: e, node: node, client: client, key: key, args: []string{
		"--btc-rpc-url", "http://" + node.RPCAddr(), "--btc-rpc-credentials-file", credsFile,
		"--btc-key-file", keyFile, "--btc-network", "regtest", "--btc-limit-ip", "0",
	}}
}

// mixedDrip is one drip of the mixed load and its answer.
type mixedDrip struct {
	asset string // stx, a token's name, or btc
	to    string
	code  int // 0: no answer (the process died)
	txid  string
	raw   []byte
}

// dripAny asks p for one drip of d.asset (v1 for the Stacks assets, v3
// for BTC) and records the answer in d.
func (p *faucetProc) dripAny(d *mixedDrip) {
	if d.asset == "btc" {
		a := p.dripBTC(d.to)
		d.code, d.txid = a.code, a.txid
		return
	}
	resp, err := dripClient.Post(p.url+"/extended/v1/faucets/"+d.asset+"?address="+d.to, "", nil)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var body struct {
		TxID  string `json:"txId"`
		TxRaw string `json:"txRaw"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil {
		return
	}
	d.code, d.txid = resp.StatusCode, body.TxID
	d.raw, _ = hex.DecodeString(body.TxRaw)
}

// mixedLoad is n drips of each asset to fresh recipients, interleaved.
func mixedLoad(t *testing.T, assets []string, n int) []*mixedDrip {
	t.Helper()
	var out []*mixedDrip
	for range n {
		for _, a := range assets {
			d := &mixedDrip{asset: a}
			if a == "btc" {
				k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
				if err != nil {
					t.Fatal(err)
				}
				d.to = k.Address().String()
			} else {
				d.to = newRecipients(t, 1)[0].String()
			}
			out = append(out, d)
		}
	}
	return out
}

// TestFaultsKillMixedLoad: a burst of STX, two tokens and BTC (a real
// btcd), SIGKILL once some drips are answered, a restart on the same
// store, more drips: every drip answered 200 is paid exactly once, none
// twice, whatever its asset; one that got no answer (the process died) is
// paid at most once; a refused one never; no (key, nonce) pays two drips.
func TestFaultsKillMixedLoad(t *testing.T) {
	tokens := mixedTokens(t)
	e := newMixedFaultEnv(t, tokens)
	btcStart, err := e.client.BlockCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--store", filepath.Join(e.dir, "faucet.db"), "--batch-max", "0",
		"--limit-address", "0", "--sbtc-asset", settings.SBTCTestnet, "--sbtc-amount", "100000", "--sbtc-limit-ip", "0",
		"--token", "name=tusd,asset=" + tokens[1].asset.String() + ",amount=10000000,limit-ip=0"}, e.args...)
	first := e.serve("first", args...)
	first.waitReady()
	first.btcReady()

	assets := []string{"stx", "sbtc", "tusd", "btc"}
	before := mixedLoad(t, assets, 30)
	// The kill comes at a random point once every asset has drips
	// answered, while the rest of the burst is on its way.
	killAfter := int32(20 + rand.IntN(40))
	var answered atomic.Int32
	var mu sync.Mutex
	paid := map[string]int{}
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, d := range before {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			first.dripAny(d)
			if d.code != http.StatusOK {
				return
			}
			n := answered.Add(1)
			mu.Lock()
			paid[d.asset]++
			every := len(paid) == len(assets) && slices.Min(slices.Collect(maps.Values(paid))) >= 3
			mu.Unlock()
			if n >= killAfter && every {
				once.Do(func() {
					_ = first.cmd.Process.Signal(syscall.SIGKILL)
					close(killed)
				})
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("the whole burst was answered before the kill: %v", paid)
	}
	<-first.done
	t.Logf("SIGKILL after %d drips answered 200 (%v)", answered.Load(), paid)

	second := e.serve("second", args...)
	second.waitReady()
	second.btcReady()
	after := mixedLoad(t, assets, 5)
	for _, d := range after {
		second.dripAny(d)
		if d.code != http.StatusOK {
			t.Fatalf("%s drip after the restart: %d\n%s", d.asset, d.code, second.logs.tail(20))
		}
	}
	all := slices.Concat(before, after)
	e.mineUntilEmpty(6)
	if _, err := e.client.Generate(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := eventually.Wait(t, 30*time.Second, func() bool {
		return strings.Contains(second.metrics(), "faucet_btc_payouts_in_flight{address=\""+e.key.Address().String()+"\"} 0")
	}); err != nil {
		t.Fatalf("BTC payouts still in flight after the block:\n%s", grepMetric(second.metrics(), "faucet_btc"))
	}
	checkMixedPaid(t, e, tokens, all, btcStart)
}

// checkMixedPaid holds every answer against what the chains show.
func checkMixedPaid(t *testing.T, e *btcFaultEnv, tokens []mixedToken, all []*mixedDrip, btcStart int64) {
	t.Helper()
	amounts := map[string]uint64{"stx": 500_000_000, "btc": 10_000}
	ids := map[string]stacks.AssetInfo{}
	for _, tk := range tokens {
		amounts[tk.name], ids[tk.name] = tk.amount, tk.asset
	}
	btcOuts := e.receivedByScript(btcStart)
	type slot struct {
		sender stacks.Address
		nonce  uint64
	}
	slots := map[slot]string{}
	counts := map[string]map[int]int{}
	for _, d := range all {
		if counts[d.asset] == nil {
			counts[d.asset] = map[int]int{}
		}
		counts[d.asset][d.code]++
		if d.code == http.StatusOK && d.asset != "btc" {
			tx, err := stacks.DecodeTransaction(d.raw)
			if err != nil {
				t.Fatalf("%s drip %s: %v", d.asset, d.txid, err)
			}
			s := slot{tx.SenderAddress(), tx.Auth.Nonce}
			if other, dup := slots[s]; dup {
				t.Errorf("(key %s, nonce %d) answered twice: %s and %s", s.sender, s.nonce, other, d.txid)
			}
			slots[s] = d.txid
			if st := e.dn.TxStatus(tx.TxID()); st.State != devnode.TxConfirmed {
				t.Errorf("%s drip %s not mined: %+v", d.asset, d.txid, st)
			}
		}
		got := received(t, e, d, ids, btcOuts)
		n := got / amounts[d.asset]
		switch {
		case got%amounts[d.asset] != 0:
			t.Errorf("%s to %s: received %d, not a whole number of drips", d.asset, d.to, got)
		case d.code == http.StatusOK && n != 1:
			t.Errorf("%s to %s answered 200 but paid %d times", d.asset, d.to, n)
		case d.code == 0 && n > 1:
			t.Errorf("%s to %s got no answer but was paid %d times", d.asset, d.to, n)
		case d.code != 0 && d.code != http.StatusOK && n != 0:
			t.Errorf("%s to %s was refused (%d) but paid %d times", d.asset, d.to, d.code, n)
		}
	}
	t.Logf("answers by asset and status (0: none, the process died): %v", counts)
	for _, a := range []string{"stx", "sbtc", "tusd", "btc"} {
		if counts[a][http.StatusOK] < 5 {
			t.Errorf("only %d %s drips answered 200", counts[a][http.StatusOK], a)
		}
	}
}

// received is what d's recipient holds of d's asset.
func received(t *testing.T, e *btcFaultEnv, d *mixedDrip, ids map[string]stacks.AssetInfo, btcOuts map[string][]int64) uint64 {
	t.Helper()
	if d.asset == "btc" {
		addr, err := bitcoin.ParseAddress(d.to, bitcoin.Regtest)
		if err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for _, v := range btcOuts[hex.EncodeToString(addr.PkScript())] {
			sum += uint64(v)
		}
		return sum
	}
	p, err := stacks.ParsePrincipal(d.to)
	if err != nil {
		t.Fatal(err)
	}
	if d.asset == "stx" {
		bal, _ := e.dn.Account(p.Address)
		return bal
	}
	return e.dn.AssetBalance(ids[d.asset], p)
}

// serveTestNode serves dn's RPC until the test ends.
func serveTestNode(t *testing.T, dn *devnode.Node) string {
	t.Helper()
	srv := httptest.NewServer(dn.Handler())
	t.Cleanup(srv.Close)
	return srv.URL
}
