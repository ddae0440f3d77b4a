package main

import (
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// Every `faucet serve` flag's default is a Go constant of the package that
// owns the setting (the same constant the engine, the server or the guard
// applies to a zero value, and TestCRDDefaultsAreTheServerDefaults holds
// the CRD to): none is typed a second time here. A new flag must be added
// to this table.
func TestServeFlagDefaultsAreThePackageDefaults(t *testing.T) {
	limit := options.LimitString
	want := map[string]string{
		"listen":                   fmt.Sprintf(":%d", server.DefaultPort),
		"node-timeout":             node.DefaultTimeout.String(),
		"node-poll-interval":       faucet.DefaultPollInterval.String(),
		"node-busy-poll-interval":  faucet.DefaultBusyPollInterval.String(),
		"status-cache-ttl":         server.DefaultStatusCacheTTL.String(),
		"amount":                   strconv.FormatUint(faucet.DefaultAmount, 10),
		"stacking-padding-percent": strconv.FormatUint(faucet.DefaultStackingPadding, 10),
		"memo":                     faucet.DefaultMemo,
		"fee-min":                  strconv.FormatUint(faucet.DefaultFeeMin, 10),
		"fee-max":                  strconv.FormatUint(faucet.DefaultFeeMax, 10),
		"fee-fallback":             strconv.FormatUint(faucet.DefaultFeeFallback, 10),
		"max-in-flight":            strconv.Itoa(faucet.DefaultMaxInFlight),
		"stuck-blocks":             strconv.FormatUint(faucet.DefaultStuckBlocks, 10),
		"busy-wait":                faucet.DefaultBusyWait.String(),
		"batch-window":             "0s", // adaptive
		"batch-max":                strconv.Itoa(faucet.DefaultBatchMax),
		"batch-contract":           stacks.SendManyMemoTestnet,
		"limit-address":            limit(guard.DefaultLimits().PerAddress),
		"limit-stacking":           limit(guard.DefaultLimits().StackingPerAddress),
		"limit-ip":                 limit(guard.DefaultLimits().PerIP),
		// Every asset without limits of its own gets these.
		"sbtc-limit-address": limit(guard.DefaultAssetLimits().PerAddress),
		"sbtc-limit-ip":      limit(guard.DefaultAssetLimits().PerIP),
		"btc-limit-address":  limit(guard.DefaultAssetLimits().PerAddress),
		"btc-limit-ip":       limit(guard.DefaultAssetLimits().PerIP),
		"btc-amount":         strconv.FormatInt(btcfaucet.DefaultAmount, 10),
		"btc-large-amount":   strconv.FormatInt(btcfaucet.DefaultLargeAmount, 10),
		"btc-xlarge-amount":  strconv.FormatInt(btcfaucet.DefaultXLargeAmount, 10),
		"btc-fee-rate":       strconv.FormatInt(btcfaucet.DefaultFallbackFeeRate, 10),
		"btc-min-fee-rate":   strconv.FormatInt(bitcoin.MinFeeRate, 10),
		"btc-max-fee-rate":   strconv.FormatInt(btcfaucet.DefaultMaxFeeRate, 10),
		"btc-batch-max":      strconv.Itoa(btcfaucet.DefaultBatchMax),
		"btc-network":        bitcoin.Regtest.String(),
		"btc-rpc-timeout":    btcnode.DefaultTimeout.String(),
		"pow-difficulty":     strconv.Itoa(guard.DefaultDifficulty),
		"pow-max-difficulty": strconv.Itoa(guard.DefaultMaxDifficulty),
		"pow-ttl":            guard.DefaultChallengeTTL.String(),
		"explorer-tx-url":    server.DefaultExplorerTxURL,
		"low-drips":          strconv.Itoa(server.DefaultLowDrips),
		"stall-after":        options.DefaultStallAfter.String(),
		"mcp":                strconv.FormatBool(options.Defaults().HTTP.MCP),
		"history-retention":  options.DefaultHistoryRetention.String(),
		"peer-listen":        fmt.Sprintf(":%d", options.PeerPort),
		// Sign-in: sessions last identity's default; anonymous drips are
		// on and whole until a tier says otherwise.
		"session-ttl":              identity.DefaultSessionTTL.String(),
		"anonymous-drips":          "true",
		"anonymous-amount-percent": "100",
		// Settings of serve alone: the devnet, logging.
		"devnet-keys": "4", "devnet-sbtc": "true", "devnet-test-token": "true", "block-time": (2 * time.Second).String(),
		"devnet-btc": "true", "btc-block-time": (10 * time.Second).String(),
		"log-level": "info", "log-format": "json",
	}
	o := options.Defaults()
	fs := newServeFlags(&o)
	fs.VisitAll(func(f *flag.Flag) {
		w, listed := want[f.Name]
		zero := f.DefValue == "" || f.DefValue == "0" || f.DefValue == "false" || f.DefValue == "0s"
		switch {
		case listed && f.DefValue != w:
			t.Errorf("--%s defaults to %q, the package default is %q", f.Name, f.DefValue, w)
		case !listed && !zero:
			t.Errorf("--%s has a default (%q) this test does not check against its package", f.Name, f.DefValue)
		}
	})

}
