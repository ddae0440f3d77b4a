package btcfaucet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
)

// ErrNoAddressIndex: the node cannot report an address's balance (btcd
// without --addrindex, or a node with neither scantxoutset nor an index).
var ErrNoAddressIndex = btcnode.ErrNoAddressIndex

// AddressBalancer reads any address's confirmed balance; *btcnode.Client
// does, through scantxoutset (Core) or searchrawtransactions (btcd with
// --addrindex).
type AddressBalancer interface {
	AddressBalance(ctx context.Context, address string) (int64, error)
}

// BalanceTTL is how long one node read answers the balance of an address:
// a scan of the UTXO set (Core) or of an address's history (btcd) is
// costly, and the endpoint is public.
const BalanceTTL = 10 * time.Second

// maxBalanceEntries bounds the balance cache.
const maxBalanceEntries = 4096

// ErrBalanceBusy: the node is already scanning for another balance.
var ErrBalanceBusy = errors.New("the node is busy with another balance lookup")

type balanceEntry struct {
	sats int64
	at   time.Time
}

// balances caches address balances and lets one node scan run at a time:
// Bitcoin Core runs one scantxoutset per node and refuses others.
type balances struct {
	mu      sync.Mutex
	entries map[string]balanceEntry
	scan    chan struct{} // a token: held while a scan runs
}

// Balance is addr's confirmed balance in sats, as the node reports it,
// cached BalanceTTL per address; lookups queue for the one scan at a
// time until ctx ends (then ErrBalanceBusy).
func (f *Faucet) Balance(ctx context.Context, addr bitcoin.Address) (int64, error) {
	ab, ok := f.cfg.Node.(AddressBalancer)
	if !ok {
		return 0, fmt.Errorf("btc faucet: %w", ErrNoAddressIndex)
	}
	b := &f.bal
	key := addr.String()
	b.mu.Lock()
	if b.entries == nil {
		b.entries, b.scan = map[string]balanceEntry{}, make(chan struct{}, 1)
	}
	e, hit := b.entries[key]
	scan := b.scan
	b.mu.Unlock()
	if hit && f.cfg.Clock.Now().Sub(e.at) < BalanceTTL {
		return e.sats, nil
	}
	select {
	case scan <- struct{}{}:
	case <-ctx.Done():
		return 0, fmt.Errorf("btc faucet: balance of %s: %w", addr, ErrBalanceBusy)
	}
	defer func() { <-scan }()
	// Another request may have read it while this one queued.
	b.mu.Lock()
	e, hit = b.entries[key]
	b.mu.Unlock()
	if hit && f.cfg.Clock.Now().Sub(e.at) < BalanceTTL {
		return e.sats, nil
	}
	sats, err := ab.AddressBalance(ctx, key)
	if btcnode.IsScanInProgress(err) {
		return 0, fmt.Errorf("btc faucet: balance of %s: %w: %w", addr, ErrBalanceBusy, err)
	}
	if err != nil {
		return 0, fmt.Errorf("btc faucet: balance of %s: %w", addr, err)
	}
	b.mu.Lock()
	if len(b.entries) >= maxBalanceEntries {
		clear(b.entries) // crude but bounded; entries live seconds anyway
	}
	b.entries[key] = balanceEntry{sats: sats, at: f.cfg.Clock.Now()}
	b.mu.Unlock()
	return sats, nil
}
