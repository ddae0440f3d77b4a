package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/stxfaucet/faucet-operator/server"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// readBTCKeyFile loads the BTC key: the first field of the first line that
// is not blank or a comment. An address after it must be the key's own,
// which catches a key file of another network or a pasted wrong pair. The
// key never appears in an error.
func readBTCKeyFile(path string, net bitcoin.Network) (*bitcoin.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--btc-key-file: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		key, err := bitcoin.ParsePrivateKey(fields[0], net)
		if err != nil {
			return nil, fmt.Errorf("--btc-key-file %s: %w", path, err)
		}
		if len(fields) > 1 && fields[1] != key.Address().String() {
			return nil, fmt.Errorf("--btc-key-file %s: the address after the key is %s, but the key's %s address is %s", path, shortField(fields[1]), net, key.Address())
		}
		return key, nil
	}
	return nil, fmt.Errorf("--btc-key-file %s: no key in it", path)
}

func shortField(s string) string {
	if len(s) > 90 {
		return s[:90] + "…"
	}
	return s
}

// btcPool is the Bitcoin node pool of the BTC flags: one client per
// --btc-rpc-url, probed once so that the first reads go to a node in
// rotation.
func btcPool(ctx context.Context, clk procClock, o *options.BTC, log *slog.Logger) (*nodepool.BTCPool, error) {
	opts := []rpcclient.Option{rpcclient.WithTimeout(o.RPCTimeout), rpcclient.WithUserAgent("faucet-operator/" + version), rpcclient.WithClock(clk)}
	if o.CredentialsFile != "" {
		opts = append(opts, rpcclient.WithCredentialsFile(o.CredentialsFile))
	}
	var clients []*btcnode.Client
	for _, u := range o.RPCURLs {
		c, err := btcnode.New(u, opts...)
		if err != nil {
			return nil, fmt.Errorf("--btc-rpc-url: %w", err)
		}
		clients = append(clients, c)
	}
	pool, err := nodepool.NewBTC(nodepool.BTCConfig{Clients: clients, Chains: btcChains(o.Network), Logger: log, Clock: clk})
	if err != nil {
		return nil, fmt.Errorf("--btc-rpc-url: %w", err)
	}
	probeCtx, cancel := context.WithTimeout(ctx, o.RPCTimeout)
	defer cancel()
	pool.Probe(probeCtx)
	return pool, nil
}

// btcChains are the chains a node of network may report.
func btcChains(n bitcoin.Network) []btcnode.Chain {
	switch n {
	case bitcoin.Regtest:
		return []btcnode.Chain{btcnode.ChainRegtest}
	case bitcoin.Signet:
		return []btcnode.Chain{btcnode.ChainSignet}
	default:
		return []btcnode.Chain{btcnode.ChainTestnet3, btcnode.ChainTestnet4}
	}
}

// btcNodesTask probes the Bitcoin nodes (a no-op when BTC is off).
func btcNodesTask(p *nodepool.BTCPool) func(context.Context) error {
	if p == nil {
		return func(ctx context.Context) error { <-ctx.Done(); return nil }
	}
	return p.Run
}

// btcTask runs the BTC faucet's loop (a no-op when BTC is off).
func btcTask(f *btcfaucet.Faucet) func(context.Context) error {
	if f == nil {
		return func(ctx context.Context) error { <-ctx.Done(); return nil }
	}
	return f.Run
}

// btcOrNil keeps a nil *btcfaucet.Faucet a nil interface: BTC off.
func btcOrNil(f *btcfaucet.Faucet) server.BTCFaucet {
	if f == nil {
		return nil
	}
	return f
}

// nodeHealthOrNil keeps a nil pool a nil interface: BTC off.
func nodeHealthOrNil(p *nodepool.BTCPool) server.NodeHealth {
	if p == nil {
		return nil
	}
	return p
}

// startDevnetBTC starts the devnet's btcd when one is found and points the
// BTC flags at it; the caller defers the returned stop. Without btcd the
// devnet runs without BTC and says how to turn it on.
func startDevnetBTC(ctx context.Context, clk procClock, o *options.Serve, logger *slog.Logger) (*bitcoin.PrivateKey, func(), error) {
	bin, err := findBtcd()
	if errors.Is(err, errNoBtcd) {
		logger.Info("BTC faucet off: no btcd found; run `make btcd` (or set FAUCET_BTCD to a btcd binary) and restart to turn it on")
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	d, err := startDevnetBtcd(ctx, clk, bin, o.Devnet.BTCBlockTime, logger.With("component", "btcd"))
	if err != nil {
		return nil, nil, err
	}
	o.BTC.RPCURLs = options.URLList{d.url}
	o.BTC.Network = bitcoin.Regtest
	return d.key, d.Stop, nil
}
