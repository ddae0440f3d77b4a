package faucet

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"slices"

	"github.com/stxfaucet/faucet-operator/server/settings"
)

// DeriveSecret returns a 32-byte secret for purpose (e.g. signing
// proof-of-work challenges) derived one-way from the faucet's private keys.
// Every replica holds the same keys, so they agree on it without another
// Secret to distribute; the keys cannot be recovered from it.
func (f *Faucet) DeriveSecret(purpose string) []byte {
	hexKeys := make([]string, len(f.pool.keys))
	for i, k := range f.pool.keys {
		hexKeys[i] = k.key.Hex()
	}
	slices.Sort(hexKeys) // the order of keys in the file does not matter
	ikm := sha256.New()
	for _, h := range hexKeys {
		ikm.Write([]byte(h))
		ikm.Write([]byte{0})
	}
	mac := hmac.New(sha256.New, ikm.Sum(nil))
	mac.Write([]byte("faucet-operator derived secret v1\x00" + purpose))
	return mac.Sum(nil)
}

// DefaultAmount is the µSTX of a default drip.
func (f *Faucet) DefaultAmount() uint64 { return f.cfg.Amounts.Default }

// StackingAmount is the µSTX of a stacking drip now (from the node's PoX
// minimum unless fixed); it fails when the node cannot say.
func (f *Faucet) StackingAmount(ctx context.Context) (uint64, error) {
	return f.amount(ctx, true)
}

// Funding summarises what the faucet can still pay, from the keys' last
// synced balances. Keys this replica does not own or has not synced yet are
// not counted.
type Funding struct {
	// Available is µSTX the counted keys can spend beyond what is in flight.
	Available uint64
	// DripsLeft is how many default drips (DripCost each) that pays.
	DripsLeft uint64
	// Keys counted; 0 means nothing is known yet.
	Keys int
}

// Funding reports the faucet's funding; see Funding.
func (f *Faucet) Funding() Funding {
	return fundingOf(f.Keys(), DripCost(f.cfg.Amounts.Default, f.cfg.Fees.Fallback))
}

// TokenFunding is Funding for a token, in its base units: DripsLeft counts
// its drips on keys that are not out of STX for the fee. ok is false for a
// name that is not a configured token.
func (f *Faucet) TokenFunding(name Asset) (_ Funding, ok bool) {
	tok := f.tokens.byName(name)
	if tok == nil {
		return Funding{}, false
	}
	var out Funding
	for _, s := range f.Keys() {
		b, known := s.Tokens[name]
		if !s.Owned || !s.Synced || !known || !b.Known {
			continue
		}
		out.Keys++
		out.Available = satAdd(out.Available, b.Available)
		if !s.Dry {
			out.DripsLeft = satAdd(out.DripsLeft, b.Available/tok.cfg.Amount)
		}
	}
	return out, true
}

// The arithmetic of funding is package settings': the page, the metrics
// and the operator's status share it.
var (
	// DripCost is what one default drip costs a key in every funding
	// figure: the amount plus the fee fallback.
	DripCost = settings.DripCost
	// LevelOf classifies drips left against the low threshold.
	LevelOf = settings.LevelOf
)

// FundingLevel is how the drips a faucet can still pay compare with its
// low threshold.
type FundingLevel = settings.FundingLevel

const (
	FundsEmpty = settings.FundsEmpty
	FundsLow   = settings.FundsLow
	FundsOK    = settings.FundsOK
)

// PendingByTxID finds an in-flight transaction of this process by txid
// (after a fee bump the entry carries the new txid). It scans at most
// MaxInFlight entries per key.
func (f *Faucet) PendingByTxID(txid string) (PendingTx, bool) {
	want := normTxID(txid)
	for _, k := range f.pool.all() { // refills too
		if p, ok := k.findTx(want); ok {
			return p, true
		}
	}
	return PendingTx{}, false
}

// PendingAt returns the in-flight transaction of sender at nonce, if any: a
// drip whose transaction was replaced (fee bump) is still tracked there.
func (f *Faucet) PendingAt(sender string, nonce uint64) (PendingTx, bool) {
	for _, k := range f.pool.all() {
		if k.addr.String() == sender {
			return k.pendingAt(nonce)
		}
	}
	return PendingTx{}, false
}

// ChainID is the chain id the node last reported; ok is false before the
// first successful read.
func (f *Faucet) ChainID() (id uint32, ok bool) {
	id = f.chain.info.Peek().chainID
	return id, id != 0
}

// NodeUp reports whether the engine's last read of the node's tip
// succeeded (false before the first one).
func (f *Faucet) NodeUp() bool {
	_, seen := f.ChainID()
	return seen && f.chain.info.LastErr() == nil
}
