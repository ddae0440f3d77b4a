package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/btcsuite/btcd/chaincfg"
	btcwire "github.com/btcsuite/btcd/wire"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// The BTC endpoints against a real btcd in regtest: the faucet's key is
// the node's mining address, so its coins are coinbase outputs, spendable
// once 100 blocks deep.

type btcEnv struct {
	*harness
	node   *btcdtest.Node
	client *btcnode.Client
	bf     *btcfaucet.Faucet
	key    *bitcoin.PrivateKey
}

// newBTCEnv starts btcd, mines 110 blocks to the faucet's key (ten mature
// coinbases), starts the BTC faucet and serves it beside the STX faucet.
func newBTCEnv(t *testing.T, o options) *btcEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("runs btcd")
	}
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	node := btcdtest.Start(t, key.Address().String(), btcdtest.WithArgs("--addrindex"))
	client := node.Client()
	if _, err := client.Generate(context.Background(), btcfaucet.CoinbaseMaturity+10); err != nil {
		t.Fatal(err)
	}
	bf := startBTCFaucet(t, key, client)
	o.btc = bf
	return &btcEnv{harness: newHarness(t, o), node: node, client: client, bf: bf, key: key}
}

// startBTCFaucet runs a BTC faucet of key over node until t ends and waits
// until it is ready.
func startBTCFaucet(t *testing.T, key *bitcoin.PrivateKey, node btcfaucet.FaucetNode) *btcfaucet.Faucet {
	t.Helper()
	bf, err := btcfaucet.New(btcfaucet.Config{
		Key: key, Node: node, Fees: btcfaucet.Fees{Min: 1, Max: 50, Fallback: 2},
		PollInterval: 50 * time.Millisecond, BatchWindow: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bf.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("btc faucet: %v", err)
		}
	})
	if err := eventually.Wait(t, 30*time.Second, func() bool { return bf.Status().Ready }); err != nil {
		t.Fatalf("btc faucet not ready: %v", err)
	}
	return bf
}

// regtestAddresses returns one fresh regtest address of each type.
func regtestAddresses(t *testing.T) map[string]string {
	t.Helper()
	params := &chaincfg.RegressionNetParams
	k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	h160 := btcutil.Hash160(k.PublicKey())
	out := map[string]string{}
	add := func(name string, a btcutil.Address, err error) {
		if err != nil {
			t.Fatal(err)
		}
		out[name] = a.EncodeAddress()
	}
	a1, err := btcutil.NewAddressWitnessPubKeyHash(h160, params)
	add("p2wpkh", a1, err)
	a2, err := btcutil.NewAddressPubKeyHash(h160, params)
	add("p2pkh", a2, err)
	a3, err := btcutil.NewAddressScriptHashFromHash(h160, params)
	add("p2sh", a3, err)
	a4, err := btcutil.NewAddressWitnessScriptHash(append(h160, h160[:12]...), params)
	add("p2wsh", a4, err)
	a5, err := btcutil.NewAddressTaproot(k.PublicKey()[1:], params)
	add("p2tr", a5, err)
	return out
}

func (e *btcEnv) dripBTC(query string) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do(http.MethodPost, "/extended/v1/faucets/btc?"+query, nil, nil)
}

func (e *btcEnv) dripBTCV3(body string) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do(http.MethodPost, "/extended/v3/faucets/btc", strings.NewReader(body), map[string]string{"Content-Type": "application/json"})
}

// paid reads txid from the node and returns what it pays addr, and its
// confirmations.
func (e *btcEnv) paid(txid, addr string) (sats int64, outputs int, confirmations int64) {
	e.t.Helper()
	tx, err := e.client.RawTransaction(context.Background(), txid)
	if err != nil {
		e.t.Fatalf("tx %s: %v", txid, err)
	}
	want, err := bitcoin.ParseAddress(addr, bitcoin.Regtest)
	if err != nil {
		e.t.Fatal(err)
	}
	script := hex.EncodeToString(want.PkScript())
	for _, o := range tx.Vout {
		if o.ScriptPubKey == script {
			sats += o.Value
			outputs++
		}
	}
	return sats, outputs, tx.Confirmations
}

// The proof: a v3 drip to a bcrt1q… address answers 200 in the
// incumbent's shape, and after `generate 1` the node shows the output
// paying exactly 10,000 sats, once.
func TestBTCDripV3MinedWithTheExactAmount(t *testing.T) {
	e := newBTCEnv(t, options{})
	to := regtestAddresses(t)["p2wpkh"]
	if !strings.HasPrefix(to, "bcrt1q") {
		t.Fatalf("test address %s", to)
	}
	w := e.dripBTCV3(`{"address":"` + to + `"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("v3 BTC drip: %d %s", w.Code, w.Body)
	}
	var body struct {
		Transaction struct {
			TxID  string `json:"tx_id"`
			Chain string `json:"chain"`
		} `json:"transaction"`
		Amount map[string]string `json:"amount"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Transaction.Chain != "bitcoin" || len(body.Transaction.TxID) != 66 || !strings.HasPrefix(body.Transaction.TxID, "0x") ||
		len(body.Amount) != 1 || body.Amount["btc"] != "10000" {
		t.Fatalf("v3 body %s", w.Body)
	}
	txid := strings.TrimPrefix(body.Transaction.TxID, "0x")
	if sats, n, conf := e.paid(txid, to); sats != 10_000 || n != 1 || conf != 0 {
		t.Fatalf("before the block: %d sats in %d outputs, %d confirmations", sats, n, conf)
	}
	if _, err := e.client.Generate(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if sats, n, conf := e.paid(txid, to); sats != 10_000 || n != 1 || conf != 1 {
		t.Fatalf("after generate 1: %d sats in %d outputs, %d confirmations; want exactly 10000 in one output, 1 confirmation", sats, n, conf)
	}
	// The drip status follows it to its block.
	if err := eventually.Wait(t, 10*time.Second, func() bool {
		st := e.do(http.MethodGet, "/faucet/v1/drips/"+body.Transaction.TxID, nil, nil)
		return strings.Contains(st.Body.String(), `"state":"confirmed"`) && strings.Contains(st.Body.String(), `"recipient":"`+to+`"`)
	}); err != nil {
		st := e.do(http.MethodGet, "/faucet/v1/drips/"+body.Transaction.TxID, nil, nil)
		t.Fatalf("drip status: %s", st.Body)
	}
}

// v1 pays every address type, in the three sizes, and the raw tx it
// returns is the one the node mined.
func TestBTCDripV1SizesAndAddressTypes(t *testing.T) {
	e := newBTCEnv(t, options{})
	sizes := []struct {
		query string
		sats  int64
	}{{"", 10_000}, {"&large=true", 1_000_000}, {"&xlarge=true", 50_000_000}, {"&large=false&xlarge=false", 10_000}}
	type sent struct {
		to, txid string
		sats     int64
	}
	var all []sent
	i := 0
	for typ, to := range regtestAddresses(t) {
		sz := sizes[i%len(sizes)]
		i++
		w := e.dripBTC("address=" + to + sz.query)
		if w.Code != http.StatusOK {
			t.Fatalf("%s drip%s: %d %s", typ, sz.query, w.Code, w.Body)
		}
		var body map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		txid, _ := body["txid"].(string)
		raw, _ := body["raw_tx"].(string)
		if len(body) != 3 || body["success"] != true || len(txid) != 64 {
			t.Fatalf("v1 body %s", w.Body)
		}
		rawBytes, err := hex.DecodeString(raw)
		if err != nil {
			t.Fatal(err)
		}
		var msg btcwire.MsgTx
		if err := msg.Deserialize(bytes.NewReader(rawBytes)); err != nil || msg.TxHash().String() != txid {
			t.Fatalf("raw_tx does not decode to txid %s: %v", txid, err)
		}
		all = append(all, sent{to, txid, sz.sats})
	}
	if _, err := e.client.Generate(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if sats, n, conf := e.paid(s.txid, s.to); sats != s.sats || n != 1 || conf != 1 {
			t.Errorf("%s: %d sats in %d outputs, %d confirmations; want %d in one, mined", s.to, sats, n, conf, s.sats)
		}
	}
	// The balance endpoint reads the node's address index: confirmed sats, in BTC.
	w := e.do(http.MethodGet, "/extended/v1/faucets/btc/"+all[0].to, nil, nil)
	var bal struct {
		Balance float64 `json:"balance"`
	}
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &bal) != nil || int64(bal.Balance*1e8+0.5) != all[0].sats {
		t.Fatalf("balance of %s: %d %s, want %d sats", all[0].to, w.Code, w.Body, all[0].sats)
	}
}

// Bad requests are refused with the incumbent's texts and never reach the
// engine; BTC's own limits count BTC drips only.
func TestBTCRefusals(t *testing.T) {
	e := newBTCEnv(t, options{limits: guard.Limits{Assets: map[string]guard.AssetLimits{"btc": {PerAddress: guard.Limit{Requests: 1, Window: time.Hour}}}}})
	to := regtestAddresses(t)["p2wpkh"]
	cases := []struct {
		name, query string
		status      int
		text        string
	}{
		{"both sizes", "address=" + to + "&large=true&xlarge=true", 400, "cannot simultaneously request a large and xlarge amount"},
		{"no address", "", 400, "address required"},
		{"two addresses", "address=" + to + "&address=" + to, 400, "address given more than once"},
		{"bad size value", "address=" + to + "&large=yes", 400, "invalid large value"},
		{"garbage", "address=notanaddress", 400, "Invalid BTC regtest address"},
		{"mainnet", "address=bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", 400, "is a mainnet address"},
		{"stacks address", "address=" + newRecipient(t), 400, "Invalid BTC regtest address"},
	}
	for _, c := range cases {
		w := e.dripBTC(c.query)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.text) || !strings.Contains(w.Body.String(), `"success":false`) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, w.Code, w.Body, c.status, c.text)
		}
	}
	for _, body := range []string{`{}`, `{"address":"bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"}`, `{"address":"x"}`, `not json`} {
		if w := e.dripBTCV3(body); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"error"`) {
			t.Errorf("v3 %s: %d %s, want 400", body, w.Code, w.Body)
		}
	}
	if w := e.do(http.MethodGet, "/extended/v1/faucets/btc/bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", nil, nil); w.Code != http.StatusBadRequest {
		t.Errorf("balance of a mainnet address: %d %s", w.Code, w.Body)
	}
	if n := e.bf.Status().InFlight; n != 0 {
		t.Fatalf("%d payouts after refused requests", n)
	}
	// One BTC drip per address per hour; an STX drip is not in that bucket.
	if w := e.dripBTC("address=" + to); w.Code != http.StatusOK {
		t.Fatalf("first drip: %d %s", w.Code, w.Body)
	}
	if w := e.dripBTC("address=" + to); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second drip to one address: %d %s, want 429 with Retry-After", w.Code, w.Body)
	}
	if w := e.dripBTCV3(`{"address":"` + to + `"}`); w.Code != http.StatusTooManyRequests || w.Body.String() != `{"error":"Too many requests"}` {
		t.Fatalf("v3 over the same bucket: %d %s", w.Code, w.Body)
	}
	if w := e.drip("address=" + newRecipient(t)); w.Code != http.StatusOK {
		t.Fatalf("STX drip beside BTC: %d %s", w.Code, w.Body)
	}
}

// With no Bitcoin node configured, the three BTC endpoints answer 403
// with the incumbent's "not configured" text, word for word.
func TestBTCNotConfigured(t *testing.T) {
	h := newHarness(t, options{})
	for _, c := range []struct{ method, path, body, want string }{
		{http.MethodPost, "/extended/v1/faucets/btc?address=bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", "", `{"success":false,"error":"BTC Faucet is not configured.","reason":"not_configured"}`},
		{http.MethodPost, "/extended/v3/faucets/btc", `{"address":"bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"}`, `{"error":"BTC Faucet is not configured."}`},
		{http.MethodGet, "/extended/v1/faucets/btc/bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", "", `"error":"BTC Faucet is not configured."`},
	} {
		w := h.do(c.method, c.path, strings.NewReader(c.body), map[string]string{"Content-Type": "application/json"})
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
		}
	}
	if strings.Contains(h.do(http.MethodGet, pathInfo, nil, nil).Body.String(), `"asset":"btc"`) {
		t.Error("info lists BTC while it is off")
	}
	if !strings.Contains(scrape(t, h), `faucet_asset_enabled{asset="btc"} 0`) {
		t.Error("faucet_asset_enabled{asset=\"btc\"} is not 0")
	}
}

// Node down: a drip answers 503 at once and sends nothing; once the node
// is back, drips work again without a restart.
func TestBTCNodeDownAndBack(t *testing.T) {
	e := newBTCEnv(t, options{})
	if err := e.node.Stop(); err != nil {
		t.Fatal(err)
	}
	to := regtestAddresses(t)
	w := e.dripBTC("address=" + to["p2tr"])
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "The Bitcoin node is unavailable") {
		t.Fatalf("v1 with the node down: %d %s", w.Code, w.Body)
	}
	if w := e.dripBTCV3(`{"address":"` + to["p2pkh"] + `"}`); w.Code != http.StatusServiceUnavailable ||
		w.Body.String() != `{"error":"`+v3Unavailable+`"}` {
		t.Fatalf("v3 with the node down: %d %s", w.Code, w.Body)
	}
	if n := e.bf.Status().InFlight; n != 0 {
		t.Fatalf("%d payouts recorded while the node was down", n)
	}
	if err := eventually.Wait(t, 10*time.Second, func() bool { return !e.bf.Status().NodeUp }); err != nil {
		t.Fatal("the faucet still reports the node up")
	}
	if !strings.Contains(scrape(t, e.harness), "\nfaucet_btc_node_up 0\n") {
		t.Error("faucet_btc_node_up is not 0 while the node is down")
	}
	tipBefore := e.bf.Status().Tip
	if err := e.node.Start(); err != nil {
		t.Fatal(err)
	}
	// btcd wipes a regtest chain at start and the harness submits it again,
	// so the faucet may have seen a short chain meanwhile: it follows the
	// node back to its tip.
	if err := eventually.Wait(t, 20*time.Second, func() bool {
		st := e.bf.Status()
		return st.NodeUp && st.Tip >= tipBefore
	}); err != nil {
		t.Fatalf("the faucet did not follow the node back: %+v", e.bf.Status())
	}
	if w := e.dripBTC("address=" + to["p2tr"]); w.Code != http.StatusOK {
		t.Fatalf("after the node came back: %d %s", w.Code, w.Body)
	}
}

// A node that restarts with an empty chain (btcd on regtest) while a payout
// waits: within seconds the faucet shows no BTC funds (its coins are on no
// chain the node has) and drips answer 503 rather than paying with those
// coins; the waiting payout is not sent again, and is retired once the new
// chain has passed the old one's height; drips resume when coins mature.
func TestBTCNodeRestartedEmpty(t *testing.T) {
	ctx := context.Background()
	e := newBTCEnv(t, options{})
	to := regtestAddresses(t)
	if w := e.dripBTC("address=" + to["p2wpkh"]); w.Code != http.StatusOK {
		t.Fatalf("drip before the restart: %d %s", w.Code, w.Body)
	}
	oldTip := e.bf.Status().Tip
	if err := e.node.StopEmpty(); err != nil {
		t.Fatal(err)
	}
	if err := e.node.Start(); err != nil {
		t.Fatal(err)
	}
	if err := eventually.Wait(t, 10*time.Second, func() bool { st := e.bf.Status(); return st.Tip == 0 && st.Balance == 0 }); err != nil {
		t.Fatalf("the faucet still counts coins of the old chain: %+v", e.bf.Status())
	}
	// Readiness says so: the emptied chain holds no coin of the faucet's
	// (the operator's probe leaves BTC out).
	var ready readyBody
	w := e.do(http.MethodGet, "/readyz", nil, nil)
	if err := json.Unmarshal(w.Body.Bytes(), &ready); err != nil || w.Code != http.StatusServiceUnavailable ||
		!strings.Contains(ready.Checks["btc"], "no spendable coins") || ready.Checks["stacks"] != "ok" {
		t.Errorf("/readyz with the BTC node emptied: %d %s", w.Code, w.Body)
	}
	if w := e.do(http.MethodGet, "/readyz?exclude=btc", nil, nil); w.Code != http.StatusOK {
		t.Errorf("/readyz?exclude=btc with the BTC node emptied: %d %s", w.Code, w.Body)
	}
	var info struct {
		Assets []struct {
			Asset string `json:"asset"`
			State string `json:"state"`
		} `json:"assets"`
	}
	if err := json.Unmarshal(e.do(http.MethodGet, pathInfo, nil, nil).Body.Bytes(), &info); err != nil {
		t.Fatal(err)
	}
	for _, a := range info.Assets {
		if a.Asset == "btc" && a.State != stateEmpty {
			t.Errorf("info BTC state %s, want %s", a.State, stateEmpty)
		}
	}
	if w := e.dripBTC("address=" + to["p2tr"]); w.Code != http.StatusServiceUnavailable {
		t.Errorf("drip with the old chain gone: %d %s", w.Code, w.Body)
	}
	if pool, err := e.client.RawMempool(ctx); err != nil || len(pool) != 0 {
		t.Errorf("the emptied node's mempool: %v, %v; want the old payout not sent again", pool, err)
	}
	// Past the old height and past coinbase maturity on the new chain.
	if _, err := e.client.Generate(ctx, int(oldTip)+btcfaucet.CoinbaseMaturity); err != nil {
		t.Fatal(err)
	}
	if err := eventually.Wait(t, 20*time.Second, func() bool { st := e.bf.Status(); return st.InFlight == 0 && st.Balance > 0 }); err != nil {
		t.Fatalf("the old payout was not retired, or the new coins not counted: %+v", e.bf.Status())
	}
	if w := e.dripBTC("address=" + to["p2tr"]); w.Code != http.StatusOK {
		t.Errorf("drip on the new chain: %d %s", w.Code, w.Body)
	}
	if w := e.do(http.MethodGet, "/readyz", nil, nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"btc":"ok"`) {
		t.Errorf("/readyz on the new chain: %d %s", w.Code, w.Body)
	}
}

// 200 concurrent HTTP drips from one key: all answered 200, paid in a few
// transactions (the batcher), every recipient exactly once, no coin spent
// twice (the node would refuse a double spend), and the key's funds fall by
// exactly the drips plus the fees.
func TestBTCConcurrentDripsOneKey(t *testing.T) {
	e := newBTCEnv(t, options{})
	const n = 200
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	before := e.bf.Status()
	to := make([]string, n)
	for i := range to {
		k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
		if err != nil {
			t.Fatal(err)
		}
		to[i] = k.Address().String()
	}
	txids := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			resp, err := client.Post(srv.URL+"/extended/v3/faucets/btc", "application/json", strings.NewReader(`{"address":"`+to[i]+`"}`))
			if err != nil {
				t.Errorf("drip %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			var body v3Success
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
				t.Errorf("drip %d: %d", i, resp.StatusCode)
				return
			}
			txids[i] = strings.TrimPrefix(body.Transaction.TxID, "0x")
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	distinct := map[string]bool{}
	for _, id := range txids {
		distinct[id] = true
	}
	if _, err := e.client.Generate(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	var fees int64
	for id := range distinct {
		tx, err := e.client.RawTransaction(context.Background(), id)
		if err != nil || tx.Confirmations != 1 {
			t.Fatalf("payout %s not mined: %v", id, err)
		}
		var in, out int64
		for _, o := range tx.Vout {
			out += o.Value
		}
		for _, vin := range tx.Vin {
			prev, err := e.client.RawTransaction(context.Background(), vin.TxID)
			if err != nil {
				t.Fatal(err)
			}
			in += prev.Vout[vin.Vout].Value
		}
		fees += in - out
	}
	for i := range n {
		if sats, outs, _ := e.paid(txids[i], to[i]); sats != 10_000 || outs != 1 {
			t.Fatalf("recipient %d: %d sats in %d outputs", i, sats, outs)
		}
	}
	t.Logf("%d concurrent BTC drips answered 200, paid by %d transactions (%d sats of fees)", n, len(distinct), fees)
	if err := eventually.Wait(t, 10*time.Second, func() bool { return e.bf.Status().InFlight == 0 }); err != nil {
		t.Fatalf("%d payouts still in flight after their block", e.bf.Status().InFlight)
	}
	after := e.bf.Status()
	// One more block matured one more 50 BTC coinbase.
	if want := before.Balance + 50*100_000_000 - n*10_000 - fees; after.Balance != want {
		t.Fatalf("spendable %d sats, want %d (before %d + one matured coinbase − drips − %d fees)", after.Balance, want, before.Balance, fees)
	}
	m := scrape(t, e.harness)
	if !strings.Contains(m, `faucet_drips_total{asset="btc",outcome="success",reason=""} 200`) ||
		!strings.Contains(m, "faucet_dispensed_btc_sats_total 2e+06") {
		t.Errorf("BTC drip metrics missing:\n%s", grepLines(m, "btc"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, strings.TrimRight(l, "\n"))
		}
	}
	return strings.Join(out, "\n")
}

// scrape returns the /metrics text.
func scrape(t *testing.T, h *harness) string {
	t.Helper()
	w := h.do(http.MethodGet, "/metrics", nil, nil)
	if w.Code != http.StatusOK {
		t.Fatalf("/metrics: %d", w.Code)
	}
	return w.Body.String()
}

// testnetForms are the testnet/signet spellings (tb1…) of regtest
// addresses: what a Stacks testnet wallet shows for the same key.
func testnetForms(t *testing.T, regtest map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for typ, a := range regtest {
		if !strings.HasPrefix(a, "bcrt1") {
			continue
		}
		_, data, variant, err := bech32.DecodeGeneric(a)
		if err != nil {
			t.Fatal(err)
		}
		enc := bech32.Encode
		if variant == bech32.VersionM {
			enc = bech32.EncodeM
		}
		if out[typ], err = enc("tb", data); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A wallet's address forms on the regtest faucet: the tb1… form of a
// P2WPKH, P2WSH and P2TR key is paid to the same script as its bcrt1…
// form and counts against the same per-address limit; an m…/2… address
// may come in a v1 JSON body, as the incumbent reads it; the balance
// endpoint takes the tb1… form too; mainnet stays a 400. Every v1 answer
// says v1 is deprecated.
func TestBTCWalletAddressForms(t *testing.T) {
	e := newBTCEnv(t, options{limits: guard.Limits{Assets: map[string]guard.AssetLimits{"btc": {PerAddress: guard.Limit{Requests: 1, Window: time.Hour}}}}})
	regtest := regtestAddresses(t)
	testnet := testnetForms(t, regtest)
	if len(testnet) != 3 {
		t.Fatalf("testnet forms %v", testnet)
	}
	type sent struct{ typ, txid string }
	var all []sent
	for typ, to := range testnet {
		w := e.dripBTC("address=" + to)
		if w.Code != http.StatusOK {
			t.Fatalf("%s drip to %s: %d %s", typ, to, w.Code, w.Body)
		}
		if got := w.Header().Get("Warning"); !deprecatedFor(got, "btc") {
			t.Errorf("Warning %q", got)
		}
		var body struct {
			TxID string `json:"txid"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		all = append(all, sent{typ, body.TxID})
		// The regtest spelling is the same recipient: one limit.
		if w := e.dripBTCV3(`{"address":"` + regtest[typ] + `"}`); w.Code != http.StatusTooManyRequests {
			t.Fatalf("%s: the bcrt1 form after the tb1 form: %d %s, want 429", typ, w.Code, w.Body)
		}
	}
	for _, typ := range []string{"p2pkh", "p2sh"} {
		w := e.do(http.MethodPost, "/extended/v1/faucets/btc", strings.NewReader(`{"address":"`+regtest[typ]+`"}`), map[string]string{"Content-Type": "application/json"})
		if w.Code != http.StatusOK {
			t.Fatalf("%s in a v1 JSON body: %d %s", typ, w.Code, w.Body)
		}
		var body struct {
			TxID string `json:"txid"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		all = append(all, sent{typ, body.TxID})
	}
	if _, err := e.client.Generate(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		// btcd reports outputs in the regtest spelling: the script is the key's.
		if sats, n, conf := e.paid(s.txid, regtest[s.typ]); sats != 10_000 || n != 1 || conf != 1 {
			t.Errorf("%s: %d sats in %d outputs to %s, %d confirmations; want 10000 in one, mined", s.typ, sats, n, regtest[s.typ], conf)
		}
	}
	w := e.do(http.MethodGet, "/extended/v1/faucets/btc/"+testnet["p2wpkh"], nil, nil)
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"balance":0.0001}` || w.Header().Get("Warning") == "" {
		t.Fatalf("balance of the tb1 form: %d %s (Warning %q)", w.Code, w.Body, w.Header().Get("Warning"))
	}
	for _, q := range []string{"address=bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "address=1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo"} {
		if w := e.dripBTC(q); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"reason":"mainnet_address"`) || w.Header().Get("Warning") == "" {
			t.Errorf("%s: %d %s", q, w.Code, w.Body)
		}
	}
	if w := e.do(http.MethodPost, "/extended/v1/faucets/btc", strings.NewReader(`{"address":"bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"}`), nil); w.Code != http.StatusBadRequest {
		t.Errorf("mainnet in a v1 JSON body: %d %s", w.Code, w.Body)
	}
}
