package main

import (
	"fmt"
	"log/slog"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// The engines' configurations from the serve flags. They live here, not in
// package options, so that the flag model (which the operator also
// builds) does not import the engines.

// engineToken is t as the Stacks engine drips it.
func engineToken(t options.Token) (faucet.Token, error) {
	asset, fromPoX, err := t.AssetInfo()
	if err != nil {
		return faucet.Token{}, err
	}
	return faucet.Token{Name: faucet.Asset(t.Name), Asset: asset, FromPoX: fromPoX, Amount: t.Amount,
		RefillBelow: t.RefillBelow, RefillAmount: t.RefillAmount}, nil
}

// engineTokens are the engine's tokens, in the flags' order.
func engineTokens(o *options.Serve) ([]faucet.Token, error) {
	var out []faucet.Token
	for _, t := range o.TokenList() {
		e, err := engineToken(t)
		if err != nil {
			return nil, fmt.Errorf("--token %s: %w", t.Name, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// engineConfig is the Stacks engine's configuration: keys, node and state
// given, the rest from the flags.
func engineConfig(o *options.Serve, clk procClock, keys []*stacks.PrivateKey, treasury *stacks.PrivateKey, node faucet.NodeClient, state faucet.State, log *slog.Logger) (faucet.Config, error) {
	contract, err := o.Batching.ContractID()
	if err != nil {
		return faucet.Config{}, err
	}
	tokens, err := engineTokens(o)
	if err != nil {
		return faucet.Config{}, err
	}
	padding := o.Amounts.StackingPadding
	return faucet.Config{
		Keys: keys, Node: node, ChainID: uint32(o.Node.ChainID), Logger: log, Clock: clk,
		Amounts:  faucet.Amounts{Default: o.Amounts.Default, Stacking: o.Amounts.Stacking, StackingPaddingPercent: &padding, Memo: o.Amounts.Memo},
		Tokens:   tokens,
		Fees:     faucet.Fees{Min: o.Fees.Min, Max: o.Fees.Max, Fallback: o.Fees.Fallback, Reserve: o.Fees.Reserve},
		Batching: faucet.Batching{Max: o.Batching.Max, Window: o.Batching.Window, Contract: contract},
		Refills:  faucet.Refills{Treasury: treasury, Below: o.Keys.RefillBelow, Amount: o.Keys.RefillAmount},
		State:    state,
		Timing: faucet.Timing{MaxInFlight: o.Sending.MaxInFlight, StuckBlocks: o.Sending.StuckBlocks, BusyWait: o.Sending.BusyWait,
			PollInterval: o.Node.PollInterval, BusyPollInterval: o.Node.BusyPollInterval},
	}, nil
}

// stacksPoolConfig is the Stacks nodes' pool over clients. Its probes read
// /v2/info as the engine's idle poll does, so they share its cadence: one
// flag slows both for a rate-limited gateway. (The BTC nodes' pool keeps
// its own: those are the operator's nodes, not a metered gateway.)
func stacksPoolConfig(o *options.Node, clients []*node.Client, clk procClock, log *slog.Logger) nodepool.Config {
	return nodepool.Config{Clients: clients, ChainID: uint32(o.ChainID), //nolint:gosec // validated to fit
		ProbeInterval: o.PollInterval, Logger: log, Clock: clk}
}

// btcConfig is the BTC faucet's configuration: its key and node, and the
// journal its payouts go in (shared by replicas when shared).
func btcConfig(o *options.BTC, clk procClock, key *bitcoin.PrivateKey, node btcfaucet.FaucetNode, j journal.Store, shared bool, log *slog.Logger) btcfaucet.Config {
	return btcfaucet.Config{
		Key: key, Node: node, Journal: j, Shared: shared, Clock: clk,
		Fees: btcfaucet.Fees(o.Fees), Amounts: btcfaucet.Amounts(o.Amounts),
		StartHeight: o.StartHeight, BatchMax: o.BatchMax, Logger: log,
	}
}
