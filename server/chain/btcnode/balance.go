package btcnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// CallAddressBalance is the observer's name for AddressBalance, whichever
// RPC answered it (scantxoutset or searchrawtransactions).
const CallAddressBalance = "address_balance"

// ErrNoAddressIndex: the node can tell the balance of an arbitrary address
// neither from its UTXO set (Bitcoin Core's scantxoutset) nor from an
// address index (btcd's searchrawtransactions, which needs --addrindex and
// --txindex).
var ErrNoAddressIndex = errors.New("the node cannot look up an address's balance: run btcd with --addrindex --txindex, or use Bitcoin Core (scantxoutset)")

// searchPage is how many transactions one searchrawtransactions call asks
// for. Each comes back with its full hex, so a page of the faucet's
// batched payouts (a few KiB each) stays well below DefaultMaxResponseBytes
// at 1000, where 10,000 would not.
const searchPage = 1000

// AddressBalance returns the confirmed balance of address, in satoshis: the
// value of the unspent outputs paying it in the chain, mempool ignored.
// Coinbase outputs count before they mature, as both nodes report them.
//
// Bitcoin Core answers with scantxoutset, which reads its UTXO set (no
// index needed; one scan at a time per node, and on a large chain it takes
// seconds). btcd has no scantxoutset: AddressBalance then adds up the
// address's history from searchrawtransactions (btcd's --addrindex): the
// outputs paying it in confirmed transactions, less the inputs of
// confirmed transactions spending them. An address btcd has never seen
// has a balance of 0. A node with neither answers ErrNoAddressIndex.
func (c *Client) AddressBalance(ctx context.Context, address string) (sats int64, err error) {
	defer c.rc.Observe(CallAddressBalance)(&err)
	address = strings.TrimSpace(address)
	if address == "" || strings.ContainsAny(address, "()#, \t\n") {
		// The address goes into a descriptor: keep it from changing its meaning.
		return 0, fmt.Errorf("btcnode %s: %q is not an address", CallAddressBalance, excerpt([]byte(address), 100))
	}
	sats, err = c.scanBalance(ctx, address)
	if !IsMethodNotFound(err) {
		return sats, err
	}
	return c.searchBalance(ctx, address)
}

// wireScan is the part of Core's scantxoutset "start" result read here.
type wireScan struct {
	Success     *bool        `json:"success"`
	TotalAmount *json.Number `json:"total_amount"`
}

// scanBalance asks Core's scantxoutset for the UTXOs of addr(address).
func (c *Client) scanBalance(ctx context.Context, address string) (int64, error) {
	const method = "scantxoutset"
	var w wireScan
	if err := c.call(ctx, method, []any{"start", []string{"addr(" + address + ")"}}, &w); err != nil {
		return 0, err
	}
	switch {
	case w.Success != nil && !*w.Success:
		// Core reports an aborted scan this way.
		return 0, responseError(method, errors.New("the scan did not complete (success false)"))
	case w.TotalAmount == nil:
		return 0, responseError(method, errors.New("no total_amount in the result"))
	}
	sats, err := parseBTC(*w.TotalAmount)
	if err != nil {
		return 0, responseError(method, fmt.Errorf("total_amount: %w", err))
	}
	return sats, nil
}

// wireSearchTx is a transaction as btcd's verbose searchrawtransactions
// with vinextra describes it: inputs carry the output they spend.
type wireSearchTx struct {
	TxID string `json:"txid"`
	Vin  []struct {
		TxID    string `json:"txid"`
		Vout    uint32 `json:"vout"`
		PrevOut *struct {
			Addresses []string    `json:"addresses"`
			Value     json.Number `json:"value"`
		} `json:"prevOut"`
	} `json:"vin"`
	Vout          []wireVout `json:"vout"`
	Confirmations int64      `json:"confirmations"`
}

// searchBalance sums address's confirmed history from btcd's address
// index, a page at a time, oldest first.
func (c *Client) searchBalance(ctx context.Context, address string) (int64, error) {
	const method = "searchrawtransactions"
	want := canonicalAddress(address)
	var received, spent int64
	for skip := 0; ; skip += searchPage {
		var page []wireSearchTx
		// verbose 1, vinextra 1 (inputs with their previous output),
		// oldest first, and filteraddrs: btcd leaves out the inputs and
		// outputs that do not involve the address, which keeps pages small.
		// The sums below check the addresses anyway.
		err := c.call(ctx, method, []any{want, 1, skip, searchPage, 1, false, []string{want}}, &page)
		if re := asRPC(err); re != nil {
			switch {
			case re.Code == CodeInvalidAddressOrKey && re.contains("no information available"):
				// Never seen (on the first page), or no more (on a later one).
				page, err = nil, nil
			case re.Code == CodeMethodNotFound,
				re.Code == CodeMisc && re.contains("--addrindex", "--txindex", "address index", "transaction index"):
				// Wrapped, not re.kind: the message says what to run.
				err = fmt.Errorf("%w: %w", ErrNoAddressIndex, err)
			}
		}
		if err != nil {
			return 0, err
		}
		for _, tx := range page {
			if tx.Confirmations <= 0 {
				continue // in the mempool: not confirmed
			}
			for _, out := range tx.Vout {
				if !paysAddress(want, out.ScriptPubKey.Address, out.ScriptPubKey.Addresses) {
					continue
				}
				v, err := parseBTC(out.Value)
				if err != nil {
					return 0, responseError(method, fmt.Errorf("tx %s output %d: %w", excerpt([]byte(tx.TxID), 64), out.N, err))
				}
				received += v
			}
			for i, in := range tx.Vin {
				if in.PrevOut == nil || !paysAddress(want, "", in.PrevOut.Addresses) {
					continue
				}
				v, err := parseBTC(in.PrevOut.Value)
				if err != nil {
					return 0, responseError(method, fmt.Errorf("tx %s input %d: %w", excerpt([]byte(tx.TxID), 64), i, err))
				}
				spent += v
			}
		}
		if len(page) < searchPage {
			break
		}
	}
	if spent > received {
		// A spend whose funding transaction the scan missed (a reorg
		// between two pages): report it rather than a negative balance.
		return 0, responseError(method, fmt.Errorf("address %s spends %d sats more than it received", address, spent-received))
	}
	return received - spent, nil
}

// canonicalAddress lowercases a bech32 address, which nodes print in
// lowercase; base58 addresses are case-sensitive and stay as they are.
func canonicalAddress(a string) string {
	l := strings.ToLower(a)
	for _, hrp := range []string{"bc1", "tb1", "bcrt1"} {
		if strings.HasPrefix(l, hrp) {
			return l
		}
	}
	return a
}

// paysAddress reports whether an output's (or a spent output's) address
// is want: the single address, or the only entry of the list.
func paysAddress(want, single string, list []string) bool {
	if single == "" && len(list) == 1 {
		single = list[0]
	}
	return single != "" && canonicalAddress(single) == want
}
