package btcnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

const balanceAddr = "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"

// coreScan is Bitcoin Core's scantxoutset "start" answer as its RPC help
// documents it (Core 22 and later): two coins, one an immature coinbase.
var coreScan = `{
  "success": true,
  "txouts": 212,
  "height": 150,
  "bestblock": "` + hashA + `",
  "unspents": [
    {"txid": "` + hashB + `", "vout": 0, "scriptPubKey": "0014751e76e8199196d454941c45d1b3a323f1433bd6",
     "desc": "addr(` + balanceAddr + `)#qwerty12", "amount": 50.00000000, "coinbase": true, "height": 120,
     "blockhash": "` + hashC + `", "confirmations": 31},
    {"txid": "` + hashC + `", "vout": 1, "scriptPubKey": "0014751e76e8199196d454941c45d1b3a323f1433bd6",
     "desc": "addr(` + balanceAddr + `)#qwerty12", "amount": 0.00012345, "coinbase": false, "height": 149,
     "blockhash": "` + hashB + `", "confirmations": 2}
  ],
  "total_amount": 50.00012345
}`

func TestAddressBalanceCore(t *testing.T) {
	srv, seen := fakeNode(t, func(gotRequest) (int, string) { return result(coreScan) })
	var observed []string
	c := newTestClient(t, srv, rpcclient.WithObserver(func(call string, _ time.Duration, _ error) { observed = append(observed, call) }))
	sats, err := c.AddressBalance(context.Background(), " "+balanceAddr+"\n")
	if err != nil || sats != 5_000_012_345 {
		t.Fatalf("AddressBalance = %d, %v; want 5000012345", sats, err)
	}
	if len(*seen) != 1 || (*seen)[0].Method != "scantxoutset" || string((*seen)[0].Params) != `["start",["addr(`+balanceAddr+`)"]]` {
		t.Fatalf("requests %+v", *seen)
	}
	if strings.Join(observed, " ") != CallAddressBalance {
		t.Fatalf("observed %v, want one %s", observed, CallAddressBalance)
	}
}

func TestAddressBalanceCoreErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		reply func(gotRequest) (int, string)
		check func(error) bool
	}{
		// Core runs one scan at a time per node.
		"scan in progress": {
			reply: func(gotRequest) (int, string) {
				return rpcErr(500, CodeInvalidParameter, `Scan already in progress, use action "abort" or "status"`)
			},
			check: func(err error) bool { re := asRPC(err); return re != nil && re.Code == CodeInvalidParameter },
		},
		"aborted": {
			reply: func(gotRequest) (int, string) { return result(`{"success":false,"total_amount":0}`) },
			check: func(err error) bool { var re *ResponseError; return errors.As(err, &re) },
		},
		"no total": {
			reply: func(gotRequest) (int, string) { return result(`{"success":true}`) },
			check: func(err error) bool { var re *ResponseError; return errors.As(err, &re) },
		},
		"warming up": {
			reply: func(gotRequest) (int, string) { return rpcErr(500, CodeInWarmup, "Loading block index…") },
			check: IsUnavailable,
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, seen := fakeNode(t, tc.reply)
			_, err := newTestClient(t, srv).AddressBalance(context.Background(), balanceAddr)
			if err == nil || !tc.check(err) || errors.Is(err, ErrNoAddressIndex) {
				t.Fatalf("%v", err)
			}
			if len(*seen) != 1 {
				t.Fatalf("%d requests: an error other than method-not-found must not fall back", len(*seen))
			}
			noSecrets(t, err)
		})
	}
}

func TestAddressBalanceRefusesNonAddresses(t *testing.T) {
	srv, seen := fakeNode(t, func(gotRequest) (int, string) { return result(coreScan) })
	c := newTestClient(t, srv)
	for _, a := range []string{"", "  ", balanceAddr + ")", "pkh(02aa)", "a,b"} {
		if _, err := c.AddressBalance(context.Background(), a); err == nil {
			t.Errorf("%q: no error", a)
		}
	}
	if len(*seen) != 0 {
		t.Fatalf("%d requests sent", len(*seen))
	}
}

// searchTx is a transaction in btcd's verbose searchrawtransactions shape
// (vinextra 1): ins are the spent outputs (address, BTC), outs the
// outputs.
func searchTx(txid string, confirmations int, ins, outs [][2]string) string {
	var vin, vout []string
	for i, in := range ins {
		vin = append(vin, fmt.Sprintf(`{"txid":%q,"vout":%d,"scriptSig":{"asm":"","hex":""},"prevOut":{"addresses":[%q],"value":%s},"sequence":4294967295}`,
			hashC, i, in[0], in[1]))
	}
	for i, out := range outs {
		vout = append(vout, fmt.Sprintf(`{"value":%s,"n":%d,"scriptPubKey":{"asm":"","hex":"0014","type":"witness_v0_keyhash","addresses":[%q],"address":%q}}`,
			out[1], i, out[0], out[0]))
	}
	conf := ""
	if confirmations > 0 {
		conf = fmt.Sprintf(`,"blockhash":%q,"confirmations":%d,"time":1700000000,"blocktime":1700000000`, hashA, confirmations)
	}
	return fmt.Sprintf(`{"hex":"00","txid":%q,"hash":%q,"size":0,"vsize":0,"weight":0,"version":2,"locktime":0,"vin":[%s],"vout":[%s]%s}`,
		txid, txid, strings.Join(vin, ","), strings.Join(vout, ","), conf)
}

func TestAddressBalanceBtcd(t *testing.T) {
	const other = "bcrt1qothers00000000000000000000000000000"
	txs := []string{
		// A coinbase paying the address 50 BTC (btcd leaves a coinbase's
		// input out when filtering by address).
		`{"hex":"00","txid":"` + hashA + `","vin":[],"vout":[{"value":50,"n":0,"scriptPubKey":{"hex":"0014","address":"` + balanceAddr + `","addresses":["` + balanceAddr + `"]}}],"confirmations":120}`,
		// It spends that coin: 1 BTC elsewhere, change back (btcd prints
		// amounts as float64, 1e-05 included).
		searchTx(hashB, 20, [][2]string{{balanceAddr, "50"}}, [][2]string{{other, "1"}, {balanceAddr, "48.99998"}}),
		// Another pays it a little, in upper case bech32 as a user may
		// write it: still the same address.
		searchTx(hashC, 3, [][2]string{{other, "2"}}, [][2]string{{strings.ToUpper(balanceAddr), "1e-05"}}),
		// In the mempool: not counted, neither its spend nor its output.
		searchTx(strings.Repeat("d", 64), 0, [][2]string{{balanceAddr, "48.99998"}}, [][2]string{{balanceAddr, "48.9"}}),
	}
	srv, seen := fakeNode(t, func(r gotRequest) (int, string) {
		if r.Method == "scantxoutset" {
			return rpcErr(200, CodeMethodNotFound, "Method not found")
		}
		var p []any
		if err := json.Unmarshal(r.Params, &p); err != nil || len(p) != 7 {
			t.Errorf("params %s", r.Params)
			return rpcErr(200, -32602, "bad params")
		}
		return result("[" + strings.Join(txs, ",") + "]")
	})
	sats, err := newTestClient(t, srv).AddressBalance(context.Background(), strings.ToUpper(balanceAddr))
	if want := int64(48_99998000 + 1000); err != nil || sats != want {
		t.Fatalf("AddressBalance = %d, %v; want %d", sats, err, want)
	}
	if len(*seen) != 2 || (*seen)[1].Method != "searchrawtransactions" ||
		string((*seen)[1].Params) != `["`+balanceAddr+`",1,0,1000,1,false,["`+balanceAddr+`"]]` {
		t.Fatalf("requests %+v", *seen)
	}
}

func TestAddressBalanceBtcdPages(t *testing.T) {
	// 1000 coinbases of 1 sat on the first page, 7 on the second.
	page := func(n int) string {
		one := `{"txid":"` + hashA + `","vin":[],"vout":[{"value":1e-08,"n":0,"scriptPubKey":{"address":"` + balanceAddr + `"}}],"confirmations":5}`
		return "[" + strings.TrimSuffix(strings.Repeat(one+",", n), ",") + "]"
	}
	srv, seen := fakeNode(t, func(r gotRequest) (int, string) {
		if r.Method == "scantxoutset" {
			return rpcErr(200, CodeMethodNotFound, "Method not found")
		}
		var p []any
		_ = json.Unmarshal(r.Params, &p)
		switch p[2] {
		case 0.0:
			return result(page(searchPage))
		case float64(searchPage):
			return result(page(7))
		}
		return rpcErr(200, CodeInvalidAddressOrKey, "No information available about address")
	})
	sats, err := newTestClient(t, srv).AddressBalance(context.Background(), balanceAddr)
	if err != nil || sats != searchPage+7 || len(*seen) != 3 {
		t.Fatalf("AddressBalance = %d, %v after %d requests; want %d after 3", sats, err, len(*seen), searchPage+7)
	}

	// A full last page is followed by one btcd answers "no information".
	srv, seen = fakeNode(t, func(r gotRequest) (int, string) {
		if r.Method == "scantxoutset" {
			return rpcErr(200, CodeMethodNotFound, "Method not found")
		}
		var p []any
		_ = json.Unmarshal(r.Params, &p)
		if p[2] == 0.0 {
			return result(page(searchPage))
		}
		return rpcErr(200, CodeInvalidAddressOrKey, "No information available about address")
	})
	sats, err = newTestClient(t, srv).AddressBalance(context.Background(), balanceAddr)
	if err != nil || sats != searchPage || len(*seen) != 3 {
		t.Fatalf("AddressBalance = %d, %v after %d requests; want %d after 3", sats, err, len(*seen), searchPage)
	}
}

func TestAddressBalanceBtcdErrors(t *testing.T) {
	btcd := func(search func() (int, string)) func(gotRequest) (int, string) {
		return func(r gotRequest) (int, string) {
			if r.Method == "scantxoutset" {
				return rpcErr(200, CodeMethodNotFound, "Method not found")
			}
			return search()
		}
	}
	t.Run("never seen", func(t *testing.T) {
		srv, _ := fakeNode(t, btcd(func() (int, string) {
			return rpcErr(200, CodeInvalidAddressOrKey, "No information available about address")
		}))
		if sats, err := newTestClient(t, srv).AddressBalance(context.Background(), balanceAddr); err != nil || sats != 0 {
			t.Fatalf("%d, %v; want 0", sats, err)
		}
	})
	for name, reply := range map[string]func() (int, string){
		"btcd without --addrindex": func() (int, string) {
			return rpcErr(200, CodeMisc, "Address index must be enabled (--addrindex)")
		},
		"btcd without --txindex": func() (int, string) {
			return rpcErr(200, CodeMisc, "Transaction index must be enabled (--txindex)")
		},
		"a node with neither method": func() (int, string) { return rpcErr(200, CodeMethodNotFound, "Method not found") },
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := fakeNode(t, btcd(reply))
			_, err := newTestClient(t, srv).AddressBalance(context.Background(), balanceAddr)
			if !errors.Is(err, ErrNoAddressIndex) || !strings.Contains(err.Error(), "searchrawtransactions") {
				t.Fatalf("%v; want ErrNoAddressIndex", err)
			}
		})
	}
	t.Run("invalid address", func(t *testing.T) {
		srv, _ := fakeNode(t, btcd(func() (int, string) {
			return rpcErr(200, CodeInvalidAddressOrKey, "Invalid address or key: decoded address is of unknown format")
		}))
		_, err := newTestClient(t, srv).AddressBalance(context.Background(), "bcrt1qnope")
		if re := asRPC(err); re == nil || re.Code != CodeInvalidAddressOrKey || errors.Is(err, ErrNoAddressIndex) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("spends more than it received", func(t *testing.T) {
		srv, _ := fakeNode(t, btcd(func() (int, string) {
			return result("[" + searchTx(hashB, 2, [][2]string{{balanceAddr, "1"}}, nil) + "]")
		}))
		_, err := newTestClient(t, srv).AddressBalance(context.Background(), balanceAddr)
		var re *ResponseError
		if !errors.As(err, &re) {
			t.Fatalf("%v; want a ResponseError", err)
		}
	})
}
