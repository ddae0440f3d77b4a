package server

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// The BTC faucet's endpoints, answering as the incumbent's do:
//
//	POST /extended/v1/faucets/btc?address=…[&large=true|&xlarge=true] → {success, txid, raw_tx}
//	GET  /extended/v1/faucets/btc/{address}                             → {balance} (BTC)
//	POST /extended/v3/faucets/btc {"address":…}                         → {transaction:{tx_id, chain:"bitcoin"}, amount:{btc}}
//
// They share the abuse checks, rate limits and drip path of the Stacks
// assets (in buckets of their own) but not the Stacks engine.

func init() {
	registerKind(2, func(cfg *Config) []*asset {
		if cfg.BTC == nil {
			return nil
		}
		return []*asset{{name: assetBTC, chain: chainBitcoin, exhaustedV1: http.StatusServiceUnavailable,
			bodyAddress: true, sizes: true, assetKind: btcKind{cfg.BTC}}}
	})
	registerRoutes(btcRoutes)
}

// btcKind pays BTC drips from the BTC faucet's coins.
type btcKind struct{ b BTCFaucet }

// btcRecipient is a Bitcoin address of the faucet's network.
type btcRecipient struct{ bitcoin.Address }

func (r btcRecipient) admit(adm *guard.Admission) { adm.Address = r.String() }

func (btcKind) label() string { return "BTC" }
func (btcKind) decimals() int { return btcDecimals }

// recipient reads an address of the faucet's network: the incumbent's
// text, with the parser's precise cause as detail.
func (k btcKind) recipient(text string) (recipient, *refusal) {
	addr, err := bitcoin.ParseAddress(text, k.b.Network())
	if err != nil {
		e := btcAddressError(text, k.b.Network(), err)
		return nil, &refusal{status: http.StatusBadRequest, body: e, v3: e.Error, v3Detail: e.Detail}
	}
	return btcRecipient{addr}, nil
}

func (btcKind) admits(a *asset, o dripOptions) *refusal { return refuseOptions(a, o, false, true) }

func (k btcKind) quote(_ context.Context, o dripOptions) (uint64, error) {
	return sats(k.b.Amounts().Of(btcSize(o.size))), nil
}

// btcSize is a drip size as the BTC faucet names it.
func btcSize(s dripSize) btcfaucet.Size {
	switch s {
	case sizeLarge:
		return btcfaucet.SizeLarge
	case sizeXLarge:
		return btcfaucet.SizeXLarge
	}
	return btcfaucet.SizeDefault
}

func (k btcKind) pay(ctx context.Context, a ask, amount uint64) (*paid, error) {
	to, _ := a.to.(btcRecipient)
	if amount == 0 {
		amount = sats(k.b.Amounts().Of(btcSize(a.opts.size)))
	}
	d, err := k.b.DripAmount(ctx, to.Address, int64(min(amount, math.MaxInt64)))
	if err != nil {
		return nil, err
	}
	fee := sats(d.Fee)
	if d.Batch > 1 {
		fee /= uint64(d.Batch)
	}
	raw := hexString(d.Raw)
	p := &paid{txid: d.TxID, rawHex: func() string { return raw }, amount: sats(d.Amount), fee: fee, sender: k.b.Status().Address}
	if d.Batch > 1 {
		p.batch = d.Batch
	}
	return p, nil
}

// writeV1 writes the incumbent's {success, txid, raw_tx}.
func (btcKind) writeV1(w http.ResponseWriter, p *paid) {
	writeJSON(w, http.StatusOK, btcSuccess{Success: true, TxID: p.txid, RawTx: p.rawHex()})
}

func (k btcKind) funds() (uint64, float64, bool) {
	st := k.b.Status()
	return sats(st.Balance), 1, st.Ready
}

func (btcKind) dispensed(m *Metrics, _ dripOptions, amount uint64) {
	m.dispensedBTC.WithLabelValues().Add(float64(amount))
}

// btcRoutes are the BTC faucet's routes beside its drips.
func btcRoutes(s *server) []route {
	return []route{{http.MethodGet, "/extended/v1/faucets/btc/{address}", deprecated("Endpoint is deprecated", http.HandlerFunc(s.handleBTCBalance))}}
}

// BTCFaucet is the BTC engine the endpoints use: *btcfaucet.Faucet, or
// the peer path that forwards to the replica holding the key.
type BTCFaucet = btcfaucet.Service

// btcSuccess is the incumbent's v1 BTC answer.
type btcSuccess struct {
	Success bool   `json:"success"`
	TxID    string `json:"txid"`   // 64 hex, no 0x, as Bitcoin tools print it
	RawTx   string `json:"raw_tx"` // hex
}

// btcBalance is the incumbent's balance answer, in BTC.
type btcBalance struct {
	Balance float64 `json:"balance"`
}

// Texts of BTC refusals: the incumbent's where it has one.
const (
	btcBothSizes     = "cannot simultaneously request a large and xlarge amount"
	btcNodeDown      = "The Bitcoin node is unavailable; try again shortly"
	btcNodeBehind    = "The Bitcoin node's chain is behind the faucet's (it restarted or is syncing); try again once it has caught up"
	btcOutOfFunds    = "The faucet is temporarily out of BTC; try again later"
	btcBusy          = "The faucet's coins are all waiting for a block; try again in a few minutes"
	btcRefused       = "The Bitcoin node refused the faucet transaction"
	btcStandby       = "Another replica of this faucet pays BTC drips; try again"
	btcNoAddressInfo = "The Bitcoin node cannot report balances (it needs an address index)"
)

// handleBTCBalance serves GET /extended/v1/faucets/btc/{address}: the
// address's confirmed balance in BTC, read from the node.
func (s *server) handleBTCBalance(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !s.assetOn(assetBTC) {
		// As the incumbent: the same switches as its drips; nothing counted.
		s.assetOff(assetBTC).writeV1(w, s.cfg.Clock.Now())
		return
	}
	b := s.cfg.BTC
	text := strings.TrimSpace(r.PathValue("address"))
	addr, err := bitcoin.ParseAddress(text, b.Network())
	if err != nil {
		writeError(w, http.StatusBadRequest, btcAddressError(text, b.Network(), err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	sats, err := b.Balance(ctx, addr)
	switch {
	case errors.Is(err, btcfaucet.ErrNoAddressIndex):
		writeError(w, http.StatusNotImplemented, errorBody{Error: btcNoAddressInfo, Reason: "balance_unavailable"})
		return
	case errors.Is(err, btcfaucet.ErrBalanceBusy):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, errorBody{Error: "The Bitcoin node is busy with another balance lookup; try again in a few seconds", Reason: "busy"})
		return
	case err != nil:
		s.log.Warn("btc balance read failed", "address", addr.String(), "err", err)
		writeError(w, http.StatusServiceUnavailable, errorBody{Error: btcNodeDown, Reason: string(faucet.ReasonNodeUnavailable)})
		return
	}
	writeJSON(w, http.StatusOK, btcBalance{Balance: float64(sats) / 1e8})
}

// btcAddressError is the 400 of an address the faucet cannot pay: the
// incumbent's text, with the parser's precise cause as detail.
func btcAddressError(text string, net bitcoin.Network, err error) errorBody {
	if errors.Is(err, bitcoin.ErrMainnet) {
		return errorBody{
			Error:  "invalid address: " + shorten(text) + " is a mainnet address; this faucet sends " + net.String() + " BTC, use a " + net.String() + " address",
			Reason: "mainnet_address",
		}
	}
	return errorBody{Error: "Invalid BTC " + net.String() + " address", Reason: "invalid_address", Detail: err.Error()}
}

// failure maps a BTC engine error to the answer.
func (btcKind) failure(_ *asset, err error) (*dripFailure, slog.Level) {
	f := &dripFailure{status: http.StatusInternalServerError, v3Status: http.StatusServiceUnavailable, v3Message: v3Unavailable}
	level := slog.LevelWarn
	switch {
	case errors.Is(err, btcfaucet.ErrNodeDown), errors.Is(err, btcfaucet.ErrNotReady):
		f.status, f.reason, f.message = http.StatusServiceUnavailable, string(faucet.ReasonNodeUnavailable), btcNodeDown
	case errors.Is(err, btcfaucet.ErrNodeBehind):
		f.status, f.reason, f.message = http.StatusServiceUnavailable, string(faucet.ReasonNodeUnavailable), btcNodeBehind
	case errors.Is(err, btcfaucet.ErrStandby), errors.Is(err, journal.ErrNotOwner):
		// One replica at a time pays from the BTC key; the others stand by
		// (and one that just lost the key refuses the drip it was paying).
		f.status, f.reason, f.message = http.StatusServiceUnavailable, string(faucet.ReasonBusy), btcStandby
	case errors.Is(err, btcfaucet.ErrNoCoins):
		f.status, f.reason, f.message, f.v3Message = http.StatusServiceUnavailable, string(faucet.ReasonExhausted), btcOutOfFunds, v3OutOfFunds
	case errors.Is(err, btcfaucet.ErrBusy):
		f.status, f.reason, f.message = http.StatusServiceUnavailable, string(faucet.ReasonBusy), btcBusy
	case errors.Is(err, btcfaucet.ErrRefused):
		level = slog.LevelError
		f.reason, f.message, f.v3Status, f.v3Message = string(faucet.ReasonRejected), btcRefused, http.StatusInternalServerError, v3Failed
	default:
		level = slog.LevelError
		f.reason, f.message, f.v3Status, f.v3Message = reasonInternal, "Internal error", http.StatusInternalServerError, v3Failed
	}
	return f, level
}

// describe: the BTC faucet's state is its own: it pays from another
// chain's node.
func (k btcKind) describe(_ context.Context, env *infoEnv, a *asset, out *infoAsset) {
	st, am := k.b.Status(), k.b.Amounts()
	al := env.limits.Of(string(a.name))
	out.Name, out.Decimals, out.Amount, out.Network = k.label(), &btcDecimals, sats(am.Default), st.Network
	out.Limits = infoLimits{Address: limitInfo(al.PerAddress), IP: limitInfo(al.PerIP)}
	out.Sizes = &infoSizes{Large: sats(am.Large), XLarge: sats(am.XLarge)}
	switch {
	case st.Standby:
		out.State, out.StateMessage = stateStandby, "Another replica of this faucet pays BTC drips; this one stands by."
	case !st.Ready && !st.NodeUp:
		out.State, out.StateMessage = stateNodeUnreachable, "The Bitcoin node is unreachable; BTC drips will fail until it is back."
	case st.Behind:
		out.State, out.StateMessage = stateUnavailable, "The Bitcoin node's chain is behind the faucet's (it restarted or is syncing); BTC drips wait until it catches up."
	case !st.Ready:
		out.State, out.StateMessage = stateReady, "The BTC faucet is starting."
	default:
		left := btcDripsLeft(st, am)
		out.Funding = &infoFunding{DripsLeft: sats(left), Balance: sats(st.Balance)}
		out.State, out.StateMessage = fundingState(faucet.Funding{DripsLeft: uint64(left)}, env.lowDrips(a.name), "BTC")
		if !st.NodeUp {
			out.State, out.StateMessage = stateNodeUnreachable, "The Bitcoin node is unreachable; BTC drips will fail until it is back."
		}
	}
}

// sats is a count or satoshi amount the BTC side keeps signed, never
// below zero on the wire.
func sats(v int64) uint64 { return uint64(max(v, 0)) }
