package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// This file holds the reading of the tokens of spec.assets: which token
// each entry names (as the faucet will read it), and one read of every
// token's balances, each token on its own.

// tokenTarget is one token of spec.assets to read.
type tokenTarget struct {
	name string
	// asset is the token; for a token to be found on the node only its
	// token name, its contract then being the one the node names in
	// /v2/pox (fromPoX), looked up at each read.
	asset   stacks.AssetInfo
	fromPoX bool
}

// tokenTargets are the tokens of spec.assets, in order, parsed as the
// faucet parses its --token flags (options.Token.AssetInfo). The CRD checks an
// identifier's shape; only a parse checks its address's c32 checksum,
// which a typo breaks: that is the error, naming the entry.
func tokenTargets(fs *faucetv1alpha1.FaucetServer) ([]tokenTarget, error) {
	var out []tokenTarget
	for _, a := range fs.Tokens() {
		asset, fromPoX, err := options.Token{Name: a.Name, Asset: a.Token.AssetIdentifier}.AssetInfo()
		if err != nil {
			return nil, fmt.Errorf("spec.assets[name=%s].token.assetIdentifier: %w", a.Name, err)
		}
		out = append(out, tokenTarget{name: a.Name, asset: asset, fromPoX: fromPoX})
	}
	return out, nil
}

// tokenReading is one read of a token's balances.
type tokenReading struct {
	asset    stacks.AssetInfo // the token read (for fromPoX, the contract /v2/pox named)
	balances []uint64         // aligned with target.addresses
	treasury uint64
	err      error // why the token could not be read; nil if it was
}

// tokenResult is what the FundingMonitor last learned of one token: the
// figures of its last successful read (ok), and the latest attempt's error.
type tokenResult struct {
	ok       bool
	asset    stacks.AssetInfo
	balances []uint64 // aligned with target.addresses
	treasury uint64
	checked  time.Time
	err      error
}

// mergeTokens is the tokens' results after a reading at now: a token read
// takes the new figures; one that failed keeps its last ones, with the
// error. prev is nil, or aligned with rd (one target).
func mergeTokens(prev []tokenResult, rd []tokenReading, now time.Time) []tokenResult {
	out := make([]tokenResult, len(rd))
	for i, r := range rd {
		if r.err == nil {
			out[i] = tokenResult{ok: true, asset: r.asset, balances: r.balances, treasury: r.treasury, checked: now}
			continue
		}
		if i < len(prev) {
			out[i] = prev[i]
		}
		out[i].err = r.err
	}
	return out
}

// readTokens reads every token of t through p, each on its own: one that
// fails (no such contract, no token contract named in /v2/pox, a call the
// node refused or did not answer) leaves the others.
func readTokens(ctx context.Context, p *nodepool.Pool, t fundingTarget) []tokenReading {
	var (
		pox    *node.PoXInfo
		poxErr error
	)
	out := make([]tokenReading, len(t.tokens))
	for i, tok := range t.tokens {
		asset := tok.asset
		if tok.fromPoX {
			if pox == nil && poxErr == nil {
				if pox, poxErr = p.PoX(ctx); poxErr != nil {
					poxErr = fmt.Errorf("the node's /v2/pox: %w", poxErr)
				}
			}
			var err error
			if asset, err = poxToken(pox, poxErr, tok.asset.Name); err != nil {
				out[i].err = err
				continue
			}
		}
		out[i] = readToken(ctx, p, asset, t)
	}
	return out
}

// poxToken is the token of the contract the node names in /v2/pox, else
// the testnet default, by the faucet's own rule (node.PoXInfo.Token).
func poxToken(pox *node.PoXInfo, poxErr error, name string) (stacks.AssetInfo, error) {
	if poxErr != nil {
		return stacks.AssetInfo{}, poxErr
	}
	a, _, err := pox.Token(name)
	return a, err
}

// readToken reads asset's get-balance of each of t's addresses and of its
// treasury.
func readToken(ctx context.Context, p *nodepool.Pool, asset stacks.AssetInfo, t fundingTarget) tokenReading {
	rd := tokenReading{asset: asset, balances: make([]uint64, len(t.addresses))}
	balance := func(addr string) (uint64, error) {
		owner, err := stacks.ParsePrincipal(addr)
		if err != nil {
			return 0, err
		}
		bal, err := p.TokenBalance(ctx, asset.Contract, owner)
		if err != nil {
			return 0, fmt.Errorf("%s balance of %s: %w", asset, addr, err)
		}
		return bal, nil
	}
	for i, addr := range t.addresses {
		if rd.balances[i], rd.err = balance(addr); rd.err != nil {
			return tokenReading{asset: asset, err: rd.err}
		}
	}
	if t.treasury != "" {
		var err error
		if rd.treasury, err = balance(t.treasury); err != nil {
			return tokenReading{asset: asset, err: fmt.Errorf("treasury: %w", err)}
		}
	}
	return rd
}

// tokenRefused reports whether a token's read failed on an answer about
// the token rather than on the node's health: the node ran its get-balance
// and refused it (typically no such contract on this network), or names
// a token contract that is not a testnet one. That is Funded reason
// AssetUnreadable: look at spec.assets, not at the node.
func tokenRefused(err error) bool {
	var refused *node.ReadOnlyError
	return errors.As(err, &refused) || errors.Is(err, node.ErrPoXTokenNotTestnet)
}
