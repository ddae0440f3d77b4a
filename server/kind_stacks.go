package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// What the Stacks kinds (STX and the SIP-010 tokens) share: they read the
// same recipients and are paid, answered and funded by the Stacks engine.

// stacksRecipient is a Stacks principal: a standard address or a contract.
type stacksRecipient struct{ stacks.Principal }

func (r stacksRecipient) admit(adm *guard.Admission) { adm.Recipient = r.Principal }

// stacksRecipientOf reads a Stacks recipient of an asset labelled label.
// v3 answers the incumbent's one text for every bad address, with v1's
// precise one as its detail.
func stacksRecipientOf(label, text string) (recipient, *refusal) {
	p, err := stacks.ParseTestnetPrincipal(text)
	var body errorBody
	switch {
	case errors.Is(err, stacks.ErrMainnetAddress):
		body = errorBody{
			Error:  "invalid address: " + shorten(text) + " is a mainnet address; this faucet sends testnet " + label + ", use a testnet address (ST…)",
			Reason: "mainnet_address",
		}
	case err != nil:
		body = errorBody{Error: "invalid address: " + err.Error(), Reason: "invalid_address"}
	default:
		return stacksRecipient{p}, nil
	}
	return nil, &refusal{status: http.StatusBadRequest, body: body, v3: v3InvalidAddress, v3Detail: body.Error}
}

// stacksPayer pays the drips of one Stacks asset through the engine.
type stacksPayer struct {
	engine  Engine
	name    faucet.Asset
	senders *addressText
}

// addressText keeps the text of the faucet's few sending addresses: a
// c32check encoding costs two SHA-256 rounds, on every drip otherwise.
type addressText struct{ m sync.Map }

func (c *addressText) of(a stacks.Address) string {
	if s, ok := c.m.Load(a); ok {
		return s.(string)
	}
	s := a.String()
	c.m.Store(a, s)
	return s
}

func (p stacksPayer) pay(ctx context.Context, k ask, amount uint64) (*paid, error) {
	to, _ := k.to.(stacksRecipient)
	res, err := p.engine.Drip(ctx, faucet.Request{Recipient: to.Principal, Asset: p.name, Stacking: k.opts.stacking, Amount: amount})
	if err != nil {
		return nil, err
	}
	return &paid{txid: res.TxID.String(), rawHex: res.TxRawHex, amount: res.Amount, fee: res.Fee,
		sender: p.senders.of(res.Sender), nonce: res.Nonce, batch: res.Batch, inDoubt: res.InDoubt}, nil
}

// writeV1 writes the incumbent's {success, txId, txRaw}.
func (stacksPayer) writeV1(w http.ResponseWriter, p *paid) {
	writeDripSuccess(w, "0x"+p.txid, p.rawHex())
}

// stacksFunds is the available balance of the keys this replica holds,
// as read reports it, and their share of all keys.
func stacksFunds(engine Engine, read func() (faucet.Funding, bool)) (uint64, float64, bool) {
	fund, ok := read()
	total := len(engine.Keys())
	if !ok || fund.Keys == 0 || total == 0 {
		return 0, 0, false
	}
	return fund.Available, float64(fund.Keys) / float64(total), true
}

// Fixed user-facing texts per failure. They are ours, not the engine's, so
// no internal detail can reach a client through them.
var dripErrorText = map[faucet.Reason]string{
	faucet.ReasonExhausted:           "The faucet is temporarily out of funds; try again later",
	faucet.ReasonBusy:                "The faucet is busy; try again in a minute",
	faucet.ReasonNodeUnavailable:     "The Stacks node is unavailable; try again shortly",
	faucet.ReasonRejected:            "The Stacks node refused the faucet transaction",
	faucet.ReasonStackingUnavailable: "The stacking amount is unavailable (no PoX information from the node); try again shortly",
	faucet.ReasonStoreUnavailable:    "The faucet's state store is unavailable; try again shortly",
}

// failure maps an engine error to the answer: v1 keeps the seed's 500s
// (an empty faucet of another asset answers 503, as the incumbent's token
// route does), v3 the incumbent's 503s.
func (stacksPayer) failure(a *asset, err error) (*dripFailure, slog.Level) {
	var fe *faucet.Error
	if !errors.As(err, &fe) {
		return &dripFailure{status: http.StatusInternalServerError, reason: reasonInternal, message: "Internal error", v3Message: v3Failed}, slog.LevelError
	}
	if fe.Reason == faucet.ReasonDisabled {
		// The engine's disabled messages name only the cause (a mainnet
		// node, another chain id), so they are shown as detail.
		return &dripFailure{status: http.StatusForbidden, reason: string(fe.Reason), message: "Faucet is not available", detail: fe.Message,
			v3Message: a.label() + " faucet is not available"}, slog.LevelInfo
	}
	text, known := dripErrorText[fe.Reason]
	if !known {
		return &dripFailure{status: http.StatusInternalServerError, reason: reasonInternal, message: "Internal error", v3Message: v3Failed}, slog.LevelWarn
	}
	f := &dripFailure{status: http.StatusInternalServerError, reason: string(fe.Reason), message: text,
		v3Status: http.StatusServiceUnavailable, v3Message: v3Unavailable}
	level := slog.LevelWarn
	switch fe.Reason {
	case faucet.ReasonExhausted:
		f.status, f.v3Message = a.exhaustedV1, v3OutOfFunds
	case faucet.ReasonRejected:
		f.v3Status, f.v3Message, level = http.StatusInternalServerError, v3Failed, slog.LevelError
	}
	return f, level
}
