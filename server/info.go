package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// Our own endpoints live under /faucet/v1/, a prefix the incumbent API
// (/extended/…, /v2/… proxied to the node, /rosetta/…) does not use.
const (
	pathInfo      = "/faucet/v1/info"
	pathChallenge = "/faucet/v1/challenge"
	pathDrip      = "/faucet/v1/drips/{txid}"
)

// Faucet states the discovery endpoint reports.
const (
	stateReady           = "ready"
	stateLow             = "low"
	stateEmpty           = "empty"
	stateNodeUnreachable = "node_unreachable"
	stateSuspended       = "suspended"
)

// infoBody is the discovery document the web page (and any client) reads
// to learn amounts, limits, the chain and whether a proof of work is needed.
// µSTX amounts are decimal strings: JavaScript numbers lose precision above
// 2^53.
type infoBody struct {
	Network        string       `json:"network"`
	ChainID        *uint32      `json:"chain_id"`
	State          string       `json:"state"`
	StateMessage   string       `json:"state_message"`
	ChainTip       *infoTip     `json:"chain_tip"`
	Amounts        infoAmounts  `json:"amounts"`
	Limits         infoLimits   `json:"limits"`
	Challenge      infoPoW      `json:"challenge"`
	ExplorerTxURL  string       `json:"explorer_tx_url"`
	BalanceCapUSTX *string      `json:"balance_cap_ustx"`
	Funding        *infoFunding `json:"funding"`
	ServerVersion  string       `json:"server_version"`
}

type infoTip struct {
	Height          uint64 `json:"height"`
	BurnBlockHeight uint64 `json:"burn_block_height"`
}

type infoAmounts struct {
	DefaultUSTX  string  `json:"default_ustx"`
	StackingUSTX *string `json:"stacking_ustx"`
}

type infoLimit struct {
	Requests      int   `json:"requests"`
	WindowSeconds int64 `json:"window_seconds"`
}

type infoLimits struct {
	Address  *infoLimit `json:"address"`
	Stacking *infoLimit `json:"stacking"`
	IP       *infoLimit `json:"ip"`
}

type infoPoW struct {
	Required   bool   `json:"required"`
	Difficulty int    `json:"difficulty"`
	Endpoint   string `json:"endpoint"`
}

type infoFunding struct {
	DripsLeft string `json:"drips_left"`
}

// handleInfo serves GET /faucet/v1/info.
func (s *server) handleInfo(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	snap, err := s.status.get(r.Context())
	if err != nil {
		return // the client went away
	}
	f := s.cfg.Faucet
	body := infoBody{
		Network:       "testnet",
		ExplorerTxURL: s.cfg.ExplorerTxURL,
		ServerVersion: s.status.serverVersion,
		Amounts:       infoAmounts{DefaultUSTX: strconv.FormatUint(f.DefaultAmount(), 10)},
		Challenge:     infoPoW{Endpoint: pathChallenge},
	}
	if id := snap.chainID; id != 0 {
		body.ChainID = &id
	} else if id, ok := f.ChainID(); ok {
		body.ChainID = &id
	}
	if snap.tip != nil {
		body.ChainTip = &infoTip{Height: snap.tip.BlockHeight, BurnBlockHeight: snap.tip.BurnBlockHeight}
	}
	lim := s.cfg.Limits.Limits()
	body.Limits = infoLimits{Address: limitInfo(lim.PerAddress), Stacking: limitInfo(lim.StackingPerAddress), IP: limitInfo(lim.PerIP)}
	if g := s.cfg.Guard; g != nil {
		body.Challenge.Required = g.Required()
		if body.Challenge.Required {
			body.Challenge.Difficulty = g.Difficulty()
		}
		if c := g.BalanceCap(); c > 0 {
			v := strconv.FormatUint(c, 10)
			body.BalanceCapUSTX = &v
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if snap.status != statusNodeUnreachable {
		if amt, err := f.StackingAmount(ctx); err == nil {
			v := strconv.FormatUint(amt, 10)
			body.Amounts.StackingUSTX = &v
		}
	}
	var fund faucet.Funding
	body.State, body.StateMessage, fund = s.faucetState(ctx, snap)
	if fund.Keys > 0 {
		body.Funding = &infoFunding{DripsLeft: strconv.FormatUint(fund.DripsLeft, 10)}
	}
	writeJSON(w, http.StatusOK, body)
}

func limitInfo(l guard.Limit) *infoLimit {
	if l.Requests <= 0 {
		return nil
	}
	return &infoLimit{Requests: l.Requests, WindowSeconds: int64(l.Window / time.Second)}
}

// faucetState summarises whether a drip would work now, for people: the
// node, the suspension switch and the funds left.
func (s *server) faucetState(ctx context.Context, snap *statusSnapshot) (state, message string, fund faucet.Funding) {
	f := s.cfg.Faucet
	switch {
	case s.cfg.Suspended:
		return stateSuspended, "The faucet is suspended by its operator.", f.Funding()
	case snap.status == statusNodeUnreachable:
		return stateNodeUnreachable, "The Stacks node is unreachable; drips will fail until it is back.", f.Funding()
	}
	fund = f.Funding()
	if fund.Keys == 0 {
		// Before the first block poll the balances are unknown: read them.
		_ = f.Ready(ctx)
		fund = f.Funding()
	}
	if fund.Keys == 0 {
		return stateReady, "The faucet is starting.", fund
	}
	switch faucet.LevelOf(fund.DripsLeft, uint64(s.cfg.LowDrips)) {
	case faucet.FundsEmpty:
		return stateEmpty, "The faucet is out of funds; its operator has been asked to refill it.", fund
	case faucet.FundsLow:
		return stateLow, "The faucet is running low on funds (" + strconv.FormatUint(fund.DripsLeft, 10) + " drips left).", fund
	}
	return stateReady, "The faucet is ready.", fund
}
