package btcnode

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

const (
	testUser = "faucet"
	testPass = "s3cret-pass-9c1e"
)

type gotRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	auth    string
}

// fakeNode answers each request with reply(req): a status and a body, in
// which "$ID" is replaced by the request's id.
func fakeNode(t *testing.T, reply func(r gotRequest) (int, string)) (*httptest.Server, *[]gotRequest) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []gotRequest
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var r gotRequest
		if err := json.NewDecoder(req.Body).Decode(&r); err != nil {
			t.Errorf("request body: %v", err)
		}
		r.auth = req.Header.Get("Authorization")
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		status, body := reply(r)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(strings.ReplaceAll(body, "$ID", string(r.ID))))
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func result(v string) (int, string) { return 200, `{"result":` + v + `,"error":null,"id":$ID}` }

func rpcErr(status, code int, msg string) (int, string) {
	m, _ := json.Marshal(msg)
	return status, fmt.Sprintf(`{"result":null,"error":{"code":%d,"message":%s},"id":$ID}`, code, m)
}

func newTestClient(t *testing.T, srv *httptest.Server, opts ...rpcclient.Option) *Client {
	t.Helper()
	u := strings.Replace(srv.URL, "http://", "http://"+testUser+":"+testPass+"@", 1)
	c, err := New(u, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func noSecrets(t *testing.T, err error) {
	t.Helper()
	token := base64.StdEncoding.EncodeToString([]byte(testUser + ":" + testPass))
	for _, s := range []string{testPass, token} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("error %q contains a secret", err)
		}
	}
}

func TestRequestShapeAndAuth(t *testing.T) {
	srv, seen := fakeNode(t, func(gotRequest) (int, string) { return result("7") })
	var calls []string
	c := newTestClient(t, srv, rpcclient.WithObserver(func(call string, _ time.Duration, err error) {
		if err != nil {
			t.Errorf("observer: %v", err)
		}
		calls = append(calls, call)
	}))
	if c.URL() != srv.URL || strings.Contains(c.URL(), testPass) {
		t.Fatalf("URL() = %q, want %q without userinfo", c.URL(), srv.URL)
	}
	h, err := c.BlockCount(context.Background())
	if err != nil || h != 7 {
		t.Fatalf("BlockCount = %d, %v", h, err)
	}
	r := (*seen)[0]
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(testUser+":"+testPass))
	if r.JSONRPC != "1.0" || r.Method != "getblockcount" || string(r.Params) != "[]" || r.auth != wantAuth {
		t.Fatalf("request %+v", r)
	}
	if len(calls) != 1 || calls[0] != CallBlockCount {
		t.Fatalf("observer saw %v", calls)
	}
}

func TestNewRefusesBadURLsWithoutEchoingThePassword(t *testing.T) {
	for _, u := range []string{
		"ftp://u:" + testPass + "@host",
		"http://u:" + testPass + "@host:8a",
		"http://u:" + testPass + "@host/?x=1",
		"http://u:" + testPass + "@:8332",
		"://u:" + testPass + "@host",
	} {
		_, err := New(u)
		if err == nil {
			t.Fatalf("New(%q) succeeded", u)
		}
		noSecrets(t, err)
	}
	if _, err := New("http://u:p@host", rpcclient.WithCredentialsFile("/x")); err == nil {
		t.Fatal("URL credentials and a credentials file together were accepted")
	}
}

func TestErrorShapes(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		body        string
		check       func(error) bool
		unavailable bool
	}{
		{"rpc error on 200 (btcd)", 200, `{"result":null,"error":{"code":-5,"message":"Block not found"},"id":$ID}`,
			func(err error) bool { var re *RPCError; return errors.As(err, &re) && re.Code == -5 }, false},
		{"rpc error on 500 (Core, JSON-RPC 1.0)", 500, `{"result":null,"error":{"code":-26,"message":"txn-mempool-conflict"},"id":$ID}`,
			IsMempoolConflict, false},
		{"method not found on 404 (Core)", 404, `{"result":null,"error":{"code":-32601,"message":"Method not found"},"id":$ID}`,
			IsMethodNotFound, false},
		{"warm-up", 500, `{"result":null,"error":{"code":-28,"message":"Loading block index…"},"id":$ID}`,
			IsInWarmup, true},
		{"401", 401, "", IsAuthError, false},
		{"403", 403, "", IsAuthError, false},
		{"503 work queue", 503, "Work queue depth exceeded",
			func(err error) bool { var he *HTTPError; return errors.As(err, &he) && he.StatusCode == 503 }, true},
		{"404 html", 404, "<html>nope</html>",
			func(err error) bool { var he *HTTPError; return errors.As(err, &he) && he.StatusCode == 404 }, false},
		{"200 html", 200, "<html>proxy</html>",
			func(err error) bool { var re *ResponseError; return errors.As(err, &re) }, true},
		{"wrong id", 200, `{"result":1,"error":null,"id":999999}`,
			func(err error) bool { var re *ResponseError; return errors.As(err, &re) }, true},
		{"error without code", 200, `{"result":null,"error":{"message":"x"},"id":$ID}`,
			func(err error) bool { var re *ResponseError; return errors.As(err, &re) }, true},
		{"wrong result type", 200, `{"result":"seven","error":null,"id":$ID}`,
			func(err error) bool { var re *ResponseError; return errors.As(err, &re) }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fakeNode(t, func(gotRequest) (int, string) { return tc.status, tc.body })
			_, err := newTestClient(t, srv).BlockCount(context.Background())
			if err == nil || !tc.check(err) {
				t.Fatalf("got %v (%T)", err, err)
			}
			if got := IsUnavailable(err); got != tc.unavailable {
				t.Fatalf("IsUnavailable(%v) = %v, want %v", err, got, tc.unavailable)
			}
			noSecrets(t, err)
		})
	}
}

// A proxy that echoes the request must not leak the credentials through
// the client's errors.
func TestEchoedCredentialsAreRedacted(t *testing.T) {
	srv, _ := fakeNode(t, func(r gotRequest) (int, string) {
		return rpcErr(500, -1, "you sent "+r.auth+" and "+testPass)
	})
	_, err := newTestClient(t, srv).BlockCount(context.Background())
	if err == nil || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("got %v", err)
	}
	noSecrets(t, err)

	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.WriteHeader(502)
		_, _ = w.Write([]byte(req.Header.Get("Authorization")))
	}))
	defer srv2.Close()
	_, err = newTestClient(t, srv2).BlockCount(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) {
		t.Fatalf("got %v", err)
	}
	noSecrets(t, err)
}

func TestTransportErrors(t *testing.T) {
	srv, _ := fakeNode(t, func(gotRequest) (int, string) { return result("1") })
	c := newTestClient(t, srv)
	srv.Close()
	_, err := c.BlockCount(context.Background())
	var te *TransportError
	if !errors.As(err, &te) || !IsUnavailable(err) {
		t.Fatalf("closed server: %v", err)
	}
	noSecrets(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.BlockCount(ctx)
	if !errors.As(err, &te) || IsUnavailable(err) {
		t.Fatalf("cancelled by the caller: %v; want a TransportError that is not 'unavailable'", err)
	}

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slow.Close()
	defer close(release)
	_, err = newTestClient(t, slow, rpcclient.WithTimeout(20*time.Millisecond)).BlockCount(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) || !IsUnavailable(err) {
		t.Fatalf("timeout: %v", err)
	}
}

func TestResponseSizeIsBounded(t *testing.T) {
	big := `"` + strings.Repeat("a", 5000) + `"`
	srv, _ := fakeNode(t, func(gotRequest) (int, string) { return result(big) })
	_, err := newTestClient(t, srv, rpcclient.WithMaxResponseBytes(1000)).BestBlockHash(context.Background())
	var re *ResponseError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "exceeds 1000 bytes") {
		t.Fatalf("got %v", err)
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	var hit atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hit.Store(true) }))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	_, err := newTestClient(t, srv).BlockCount(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusTemporaryRedirect || hit.Load() {
		t.Fatalf("got %v; redirect followed: %v", err, hit.Load())
	}
}

func TestCredentialsFileIsReReadAfter401(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".cookie")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var current atomic.Value
	current.Store("__cookie__:first")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req gotRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		u, p, _ := r.BasicAuth()
		if u+":"+p != current.Load().(string) {
			w.WriteHeader(401)
			return
		}
		_, _ = fmt.Fprintf(w, `{"result":5,"error":null,"id":%s}`, req.ID)
	}))
	defer srv.Close()

	c, err := New(srv.URL, rpcclient.WithCredentialsFile(file))
	if err != nil {
		t.Fatal(err)
	}
	// No file yet: Core is not up. Unavailable, not a config error.
	_, err = c.BlockCount(context.Background())
	var ce *CredentialsError
	if !errors.As(err, &ce) || !IsUnavailable(err) {
		t.Fatalf("missing cookie: %v", err)
	}
	write("__cookie__:first\n")
	if h, err := c.BlockCount(context.Background()); err != nil || h != 5 {
		t.Fatalf("first cookie: %d, %v", h, err)
	}
	// Core restarts with a new cookie: one 401, a re-read, a retry.
	current.Store("__cookie__:second")
	write("__cookie__:second\n")
	if h, err := c.BlockCount(context.Background()); err != nil || h != 5 {
		t.Fatalf("after the cookie changed: %d, %v", h, err)
	}
	// A wrong password in the file stays an AuthError (no retry loop).
	current.Store("__cookie__:third")
	write("__cookie__:wrong-one-7f\n")
	_, err = c.BlockCount(context.Background())
	if !IsAuthError(err) || strings.Contains(err.Error(), "wrong-one-7f") {
		t.Fatalf("wrong cookie: %v", err)
	}
	// A malformed file is reported without its content.
	write("no-colon-secret-xyz")
	c2, _ := New(srv.URL, rpcclient.WithCredentialsFile(file))
	_, err = c2.BlockCount(context.Background())
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "no-colon-secret-xyz") || IsUnavailable(err) {
		t.Fatalf("malformed cookie: %v", err)
	}
}

// Core's messages (src/node/transaction.cpp, validation.cpp) and btcd's
// (mempool, rpcserver.go) for each case a faucet acts on.
func TestClassifiers(t *testing.T) {
	type pred = func(error) bool
	cases := []struct {
		code int
		msg  string
		yes  []pred
		no   []pred
	}{
		{-27, "Transaction outputs already in utxo set", []pred{IsAlreadyInChain}, []pred{IsRejected, IsMissingInputs}},
		{-27, "Transaction already in block chain", []pred{IsAlreadyInChain}, nil},
		{-27, "TX rejected: transaction already exists in blockchain", []pred{IsAlreadyInChain}, nil},
		{-26, "TX rejected: already have transaction in mempool ab12", []pred{IsAlreadyInMempool, IsRejected}, []pred{IsInsufficientFee, IsMempoolConflict}},
		{-26, "txn-already-in-mempool", []pred{IsAlreadyInMempool}, nil},
		{-26, "min relay fee not met, 0 < 141", []pred{IsInsufficientFee, IsRejected}, []pred{IsMempoolConflict, IsAlreadyInMempool}},
		{-26, "mempool min fee not met, 100 < 2000", []pred{IsInsufficientFee}, nil},
		{-26, "insufficient fee, rejecting replacement ab, less fees than conflicting txs; 0.0001 < 0.0002", []pred{IsInsufficientFee}, []pred{IsMempoolConflict}},
		{-26, "TX rejected: transaction ab has 100 fees which is under the required amount of 141", []pred{IsInsufficientFee}, nil},
		{-26, "TX rejected: transaction ab has insufficient priority (1 <= 57600000)", []pred{IsInsufficientFee}, nil},
		{-26, "TX rejected: transaction ab has been rejected by the rate limiter due to low fees", []pred{IsInsufficientFee}, nil},
		{-26, "TX rejected: ab: replacement transaction has an insufficient absolute fee: needs 2, has 1", []pred{IsInsufficientFee}, nil},
		{-26, "TX rejected: ab: replacement transaction has an insufficient fee rate: needs more than 2, has 1", []pred{IsInsufficientFee}, nil},
		{-26, "txn-mempool-conflict", []pred{IsMempoolConflict}, []pred{IsInsufficientFee, IsTooLongMempoolChain}},
		{-26, "TX rejected: output already spent in mempool: output=ab:0, tx=cd", []pred{IsMempoolConflict}, nil},
		{-26, "too-long-mempool-chain, too many unconfirmed ancestors [limit: 25]", []pred{IsTooLongMempoolChain, IsRejected}, []pred{IsMempoolConflict, IsInsufficientFee}},
		{-26, "TX rejected: transaction ab is not standard: transaction output 0: payment is dust: 100", []pred{IsRejected}, []pred{IsInsufficientFee, IsMempoolConflict, IsAlreadyInMempool}},
		{-25, "bad-txns-inputs-missingorspent", []pred{IsMissingInputs}, []pred{IsRejected, IsAlreadyInChain}},
		{-25, "Missing inputs", []pred{IsMissingInputs}, nil},
		{-25, "Inputs missing or spent", []pred{IsMissingInputs}, nil},
		{-25, "TX rejected: orphan transaction ab references outputs of unknown or fully-spent transaction cd", []pred{IsMissingInputs}, nil},
		{-25, "TX rejected: tried to spend coinbase transaction output ab:0 from height 102 at height 103 before required maturity of 100 blocks", nil, []pred{IsMissingInputs, IsRejected}},
		{-28, "Loading block index…", []pred{IsInWarmup, IsUnavailable}, []pred{IsRejected}},
		{-32601, "Method not found", []pred{IsMethodNotFound}, []pred{IsUnavailable}},
		// a code alone is not the case: the fee helper needs -26
		{-25, "min relay fee not met", nil, []pred{IsInsufficientFee}},
	}
	for _, tc := range cases {
		var err error = &RPCError{Method: CallSendRawTx, Code: tc.code, Message: tc.msg}
		err = fmt.Errorf("broadcasting: %w", err) // the helpers see through wrapping
		for i, p := range tc.yes {
			if !p(err) {
				t.Errorf("%d %q: yes-predicate %d is false", tc.code, tc.msg, i)
			}
		}
		for i, p := range tc.no {
			if p(err) {
				t.Errorf("%d %q: no-predicate %d is true", tc.code, tc.msg, i)
			}
		}
	}
	if IsAlreadyInChain(errors.New("-27")) || IsUnavailable(nil) || IsAuthError(nil) {
		t.Fatal("a predicate matched a non-RPC error")
	}
}

func TestRequireTestChain(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Chain
		main bool
	}{
		{"main", "", true}, {"mainnet", "", true},
		{"test", ChainTestnet3, false}, {"testnet3", ChainTestnet3, false}, {"testnet4", ChainTestnet4, false},
		{"signet", ChainSignet, false}, {"regtest", ChainRegtest, false}, {"simnet", ChainSimnet, false},
		{"futurenet", "", false},
	} {
		srv, _ := fakeNode(t, func(gotRequest) (int, string) {
			return result(`{"chain":"` + tc.name + `","blocks":1,"headers":1,"bestblockhash":"` + strings.Repeat("0", 64) + `"}`)
		})
		got, err := newTestClient(t, srv).RequireTestChain(context.Background())
		switch {
		case tc.main && !errors.Is(err, ErrMainChain):
			t.Errorf("%s: %v; want ErrMainChain", tc.name, err)
		case tc.want == "" && err == nil:
			t.Errorf("%s: accepted as %q", tc.name, got)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

var (
	hashA = strings.Repeat("a", 64)
	hashB = strings.Repeat("b", 64)
	hashC = strings.Repeat("c", 64)
)

// Core puts verbosity-2 transactions in "tx" with "address" and 8-decimal
// amounts; btcd puts them in "rawtx" with "addresses" and float64 amounts.
func TestBlockParsesCoreAndBtcdShapes(t *testing.T) {
	core := `{"hash":"` + hashA + `","height":7,"confirmations":-1,"previousblockhash":"` + hashB + `","time":1700000000,
	  "tx":[{"txid":"` + hashC + `","hash":"` + hashC + `","hex":"00",
	    "vin":[{"coinbase":"51","txinwitness":["00"],"sequence":4294967295}],
	    "vout":[{"value":50.00000000,"n":0,"scriptPubKey":{"asm":"0 ab","desc":"addr(bcrt1q)","hex":"0014AB","address":"bcrt1qcore","type":"witness_v0_keyhash"}},
	            {"value":0.00000001,"n":1,"scriptPubKey":{"hex":"6a","type":"nulldata"}}]},
	    {"txid":"` + hashB + `","hash":"` + hashA + `","hex":"01","vin":[{"txid":"` + hashC + `","vout":0,"scriptSig":{"asm":"","hex":""},"txinwitness":["00","01"],"sequence":4294967293}],
	    "vout":[{"value":20999999.99999999,"n":0,"scriptPubKey":{"hex":"51","type":"nonstandard"}}]}]}`
	btcd := `{"hash":"` + hashA + `","height":7,"confirmations":1,"previousblockhash":"` + hashB + `","time":1700000000,
	  "rawtx":[{"txid":"` + hashC + `","hash":"` + hashC + `","hex":"00","version":1,"locktime":0,
	    "vin":[{"coinbase":"51","sequence":4294967295,"witness":["00"]}],
	    "vout":[{"value":50,"n":0,"scriptPubKey":{"asm":"0 ab","hex":"0014ab","reqSigs":1,"type":"witness_v0_keyhash","address":"bcrt1qbtcd","addresses":["bcrt1qbtcd"]}},
	            {"value":1e-8,"n":1,"scriptPubKey":{"hex":"6a","type":"nulldata"}}]},
	    {"txid":"` + hashB + `","hash":"` + hashA + `","hex":"01","vin":[{"txid":"` + hashC + `","vout":0,"scriptSig":{"asm":"","hex":""},"txinwitness":["00","01"],"sequence":4294967293}],
	    "vout":[{"value":20999999.99999999,"n":0,"scriptPubKey":{"hex":"51","type":"nonstandard","addresses":["x","y"]}}]}]}`
	for name, body := range map[string]string{"core": core, "btcd": btcd} {
		srv, seen := fakeNode(t, func(gotRequest) (int, string) { return result(body) })
		b, err := newTestClient(t, srv).Block(context.Background(), strings.ToUpper(hashA))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p := string((*seen)[0].Params); p != `["`+hashA+`",2]` {
			t.Fatalf("%s: params %s, want the lower-case hash and verbosity 2", name, p)
		}
		cb, spend := b.Txs[0], b.Txs[1]
		if b.Height != 7 || b.PreviousHash != hashB || len(b.Txs) != 2 || !cb.Vin[0].IsCoinbase() ||
			cb.Vout[0].Value != 50*100_000_000 || cb.Vout[0].ScriptPubKey != "0014ab" || cb.Vout[1].Value != 1 ||
			cb.Vout[0].Address != "bcrt1q"+name || cb.Vout[1].Address != "" {
			t.Fatalf("%s: block %+v", name, b)
		}
		if spend.Vin[0].IsCoinbase() || spend.Vin[0].TxID != hashC || spend.Vin[0].Sequence != 4294967293 ||
			spend.WTxID != hashA || spend.Vout[0].Value != 2_099_999_999_999_999 || spend.Vout[0].Address != "" {
			t.Fatalf("%s: spend %+v", name, spend)
		}
	}
}

func TestBlockErrors(t *testing.T) {
	for _, tc := range []struct {
		reply func(gotRequest) (int, string)
		want  error
	}{
		{func(gotRequest) (int, string) { return rpcErr(500, -5, "Block not found") }, ErrBlockNotFound},
		{func(gotRequest) (int, string) {
			return rpcErr(200, -32603, "block "+hashA+" is not in the main chain")
		}, ErrNotInMainChain},
	} {
		srv, _ := fakeNode(t, tc.reply)
		_, err := newTestClient(t, srv).Block(context.Background(), hashA)
		if !errors.Is(err, tc.want) {
			t.Fatalf("got %v, want %v", err, tc.want)
		}
	}
	srv, _ := fakeNode(t, func(gotRequest) (int, string) { return result(`{"hash":"` + hashA + `","tx":["` + hashC + `"]}`) })
	if _, err := newTestClient(t, srv).Block(context.Background(), hashA); err == nil {
		t.Fatal("a verbosity-1 answer was accepted")
	}
	if _, err := newTestClient(t, srv).Block(context.Background(), "not-a-hash"); err == nil {
		t.Fatal("a malformed hash was sent")
	}
}

func TestBlockHashAndTxLookupErrors(t *testing.T) {
	for _, msg := range []struct {
		code int
		text string
	}{{-8, "Block height out of range"}, {-1, "Block number out of range"}} {
		srv, _ := fakeNode(t, func(gotRequest) (int, string) { return rpcErr(500, msg.code, msg.text) })
		if _, err := newTestClient(t, srv).BlockHash(context.Background(), 5); !errors.Is(err, ErrHeightOutOfRange) {
			t.Fatalf("%q: %v", msg.text, err)
		}
	}
	for text, want := range map[string]error{
		"No such mempool or blockchain transaction. Use gettransaction for wallet transactions.":                                                                  ErrTxNotFound,
		"No information available about transaction " + hashA:                                                                                                     ErrTxNotFound,
		"No such mempool transaction. Use -txindex or provide a block hash to enable blockchain transaction queries. Use gettransaction for wallet transactions.": ErrTxIndexDisabled,
		"The transaction index must be enabled to query the blockchain (specify --txindex)":                                                                       ErrTxIndexDisabled,
	} {
		srv, _ := fakeNode(t, func(gotRequest) (int, string) { return rpcErr(500, -5, text) })
		_, err := newTestClient(t, srv).RawTransaction(context.Background(), hashA)
		if !errors.Is(err, want) || (errors.Is(want, ErrTxIndexDisabled) && errors.Is(err, ErrTxNotFound)) {
			t.Fatalf("%q: %v, want %v", text, err, want)
		}
	}
}

func TestEstimateFee(t *testing.T) {
	t.Run("core", func(t *testing.T) {
		srv, seen := fakeNode(t, func(gotRequest) (int, string) { return result(`{"feerate":0.00012345,"blocks":4}`) })
		est, err := newTestClient(t, srv).EstimateFee(context.Background(), 3)
		if err != nil || est.SatPerKvB != 12345 || est.Blocks != 4 || est.Method != "estimatesmartfee" || string((*seen)[0].Params) != "[3]" {
			t.Fatalf("%+v, %v", est, err)
		}
	})
	t.Run("core without data", func(t *testing.T) {
		srv, _ := fakeNode(t, func(gotRequest) (int, string) {
			return result(`{"errors":["Insufficient data or no feerate found"],"blocks":0}`)
		})
		_, err := newTestClient(t, srv).EstimateFee(context.Background(), 3)
		if !errors.Is(err, ErrNoFeeEstimate) || !strings.Contains(err.Error(), "Insufficient data") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("btcd", func(t *testing.T) {
		srv, seen := fakeNode(t, func(r gotRequest) (int, string) {
			if r.Method == "estimatesmartfee" {
				return rpcErr(200, -32601, "Method not found")
			}
			return result("0.00002")
		})
		c := newTestClient(t, srv)
		est, err := c.EstimateFee(context.Background(), 144)
		if err != nil || est.SatPerKvB != 2000 || est.Blocks != 25 || est.Method != "estimatefee" {
			t.Fatalf("%+v, %v", est, err)
		}
		if _, err := c.EstimateFee(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		var methods []string
		for _, r := range *seen {
			methods = append(methods, r.Method+string(r.Params))
		}
		// estimatesmartfee is asked once, then remembered as missing.
		if strings.Join(methods, " ") != "estimatesmartfee[144] estimatefee[25] estimatefee[2]" {
			t.Fatalf("calls: %v", methods)
		}
	})
	for name, reply := range map[string]func(gotRequest) (int, string){
		"btcd fresh (http)": func(r gotRequest) (int, string) {
			if r.Method == "estimatesmartfee" {
				return rpcErr(200, -32601, "Method not found")
			}
			return rpcErr(200, -32600, "Invalid request: malformed")
		},
		"btcd fresh (websocket wording)": func(r gotRequest) (int, string) {
			if r.Method == "estimatesmartfee" {
				return rpcErr(200, -32601, "Method not found")
			}
			return rpcErr(200, -32603, "not enough blocks have been observed")
		},
		"btcd zero": func(r gotRequest) (int, string) {
			if r.Method == "estimatesmartfee" {
				return rpcErr(200, -32601, "Method not found")
			}
			return result("0")
		},
		"btcd minus one": func(r gotRequest) (int, string) {
			if r.Method == "estimatesmartfee" {
				return rpcErr(200, -32601, "Method not found")
			}
			return result("-1")
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := fakeNode(t, reply)
			if _, err := newTestClient(t, srv).EstimateFee(context.Background(), 6); !errors.Is(err, ErrNoFeeEstimate) {
				t.Fatalf("%v", err)
			}
		})
	}
	t.Run("other errors pass through", func(t *testing.T) {
		srv, _ := fakeNode(t, func(gotRequest) (int, string) { return rpcErr(500, -28, "Loading wallet…") })
		_, err := newTestClient(t, srv).EstimateFee(context.Background(), 6)
		if errors.Is(err, ErrNoFeeEstimate) || !IsInWarmup(err) {
			t.Fatalf("%v", err)
		}
	})
}

func TestSendRawTransactionChecks(t *testing.T) {
	srv, seen := fakeNode(t, func(gotRequest) (int, string) { return result(`"` + strings.ToUpper(hashA) + `"`) })
	c := newTestClient(t, srv)
	id, err := c.SendRawTransaction(context.Background(), []byte{0x02, 0xff})
	if err != nil || id != hashA || string((*seen)[0].Params) != `["02ff"]` {
		t.Fatalf("%s, %v, params %s", id, err, (*seen)[0].Params)
	}
	if _, err := c.SendRawTransaction(context.Background(), nil); err == nil {
		t.Fatal("empty tx sent")
	}
	if _, err := c.SendRawTransaction(context.Background(), make([]byte, MaxTxBytes+1)); err == nil {
		t.Fatal("oversized tx sent")
	}
	if len(*seen) != 1 {
		t.Fatalf("%d requests, want 1", len(*seen))
	}
}

func TestParseBTC(t *testing.T) {
	for in, want := range map[string]int64{
		"50": 5_000_000_000, "50.00000000": 5_000_000_000, "0.00000001": 1, "1e-08": 1, "1e-07": 10,
		"0.1": 10_000_000, "0.29": 29_000_000, "20999999.99999999": 2_099_999_999_999_999,
		"21000000": 2_100_000_000_000_000, "0": 0,
	} {
		got, err := parseBTC(json.Number(in))
		if err != nil || got != want {
			t.Errorf("parseBTC(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	// btcd sends float64(sats)/1e8 as encoding/json prints it: every amount
	// must come back exact.
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		sats := r.Int64N(maxSatoshis + 1)
		if i < 1000 {
			sats = int64(i)
		}
		b, _ := json.Marshal(float64(sats) / 1e8)
		if got, err := parseBTC(json.Number(b)); err != nil || got != sats {
			t.Fatalf("parseBTC(%s) = %d, %v; want %d", b, got, err, sats)
		}
	}
	for _, in := range []string{"-1", "21000000.00000001", "1e30", "abc", ""} {
		if got, err := parseBTC(json.Number(in)); err == nil {
			t.Errorf("parseBTC(%q) = %d, want an error", in, got)
		}
	}
}

func TestIsScanInProgress(t *testing.T) {
	srv, _ := fakeNode(t, func(gotRequest) (int, string) {
		return rpcErr(500, CodeInvalidParameter, "Scan already in progress, use action \"abort\" or \"status\"")
	})
	c := newTestClient(t, srv)
	err := c.Call(context.Background(), "scantxoutset", []any{"start", []string{"addr(x)"}}, nil)
	if !IsScanInProgress(err) {
		t.Fatalf("%v: not a scan in progress", err)
	}
	if IsScanInProgress(errors.New("scan already in progress")) {
		t.Fatal("a plain error is no RPC answer")
	}
}
