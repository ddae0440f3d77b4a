package server

import (
	"context"
	"time"

	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// The HTTP layer sees the engine through three small interfaces of its own,
// one per concern, so that handler tests can stand in for any engine answer
// (a store outage, a busy or dry faucet, a lost node answer) without a node.

// Dispenser pays drips: the engine behind the drip endpoints.
type Dispenser interface {
	// Drip pays one request; a failure is a *faucet.Error whose Reason
	// decides the answer.
	Drip(ctx context.Context, req faucet.Request) (*faucet.Result, error)
	// Record writes an answered drip to the history.
	Record(ctx context.Context, d faucet.DripRecord)
}

// Reporter tells the page, readiness and metrics what the engine knows of
// its keys, funds and node.
type Reporter interface {
	Keys() []faucet.KeyStatus
	Treasury() (faucet.TreasuryStatus, bool)
	Funding() faucet.Funding
	BatchStats() faucet.BatchStats
	NodeUp() bool
	ChainID() (id uint32, ok bool)
	// TipAge is how long ago the engine last saw the Stacks tip rise;
	// known is false before its first read of the tip.
	TipAge() (age time.Duration, known bool)
	// Ready says why a drip would fail now, or nil.
	Ready(ctx context.Context) error
	DefaultAmount() uint64
	StackingAmount(ctx context.Context) (uint64, error)
	// Tokens are the SIP-010 tokens the faucet drips beside STX, in
	// configuration order. TokenFunding is Funding of one, in its base
	// units; ok is false for a name that is not a token.
	Tokens() []faucet.TokenInfo
	TokenFunding(name faucet.Asset) (fund faucet.Funding, ok bool)
}

// DripFinder looks up what became of a transaction the faucet sent, for the
// drip status endpoint.
type DripFinder interface {
	LookupDrip(ctx context.Context, txid string) (faucet.DripRecord, bool, error)
	PendingByTxID(txid string) (faucet.PendingTx, bool)
	PendingAt(sender string, nonce uint64) (faucet.PendingTx, bool)
	ReplacementOf(txid string) (string, bool)
	Dropped(txid string) bool
}

// Engine is everything the HTTP layer asks of the engine.
type Engine interface {
	Dispenser
	Reporter
	DripFinder
}

var _ Engine = (*faucet.Faucet)(nil)
