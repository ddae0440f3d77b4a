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
	// stateOff: the operator turned the asset off (--disable-asset).
	stateOff = "off"
	// stateStandby: another replica pays this asset (BTC's one key).
	stateStandby = "standby"
	// stateUnavailable: the asset cannot be dripped (a token whose
	// contract is unknown); state_message says why.
	stateUnavailable = "unavailable"
	// stateStalled: the Stacks chain has made no block for StallAfter;
	// drips are still paid and wait for the chain (overStall).
	stateStalled = "stalled"
)

// infoBody is the discovery document the web page (and any client) reads
// to learn amounts, limits, the chain and whether a proof of work is needed.
// Amounts and counts are JSON numbers in base units (µSTX, satoshis): the
// supplies of STX, the tokens and BTC all stay below 2^53, so a JavaScript
// client reads them exactly.
type infoBody struct {
	Network       string      `json:"network"`
	ChainID       *uint32     `json:"chain_id"`
	State         string      `json:"state"`
	StateMessage  string      `json:"state_message"`
	ChainTip      *infoTip    `json:"chain_tip"`
	Amounts       infoAmounts `json:"amounts"`
	Limits        infoLimits  `json:"limits"`
	Challenge     infoPoW     `json:"challenge"`
	ExplorerTxURL string      `json:"explorer_tx_url"`
	// Devnet is true under `serve --devnet`: the explorer knows nothing
	// of its transactions.
	Devnet         bool         `json:"devnet"`
	BalanceCapUSTX *uint64      `json:"balance_cap_ustx"`
	Funding        *infoFunding `json:"funding"`
	// Assets lists what the faucet drips, STX first: each with its amount,
	// limits, endpoints and funding state. The top-level amounts, limits,
	// state and funding are STX's, as before assets existed.
	Assets []infoAsset `json:"assets"`
	// Nodes are the Stacks nodes the faucet reads from and sends
	// through, with their health.
	Nodes []infoNode `json:"nodes,omitempty"`
	// SignIn says whether and how people sign in, and the tiers.
	SignIn *infoSignIn `json:"sign_in"`
	// BTCNodes are the Bitcoin nodes of the BTC faucet, likewise.
	BTCNodes      []infoNode `json:"btc_nodes,omitempty"`
	ServerVersion string     `json:"server_version"`
}

// infoAsset is one asset the faucet drips. Amounts are in base units
// (µSTX, satoshis, a token's); Decimals converts them for people.
type infoAsset struct {
	Asset string `json:"asset"`
	// Name is how people write it: a token's symbol, as its contract
	// says (the asset's name in capitals until the contract answered).
	Name            string  `json:"name"`
	AssetIdentifier *string `json:"asset_identifier"`
	// AssetSource says where a token's identifier comes from:
	// "configured", or settings.SourcePoX when the node named it.
	AssetSource string `json:"asset_source,omitempty"`
	// Decimals is null for a token whose contract has not answered yet.
	Decimals     *int         `json:"decimals"`
	Amount       uint64       `json:"amount"`
	Limits       infoLimits   `json:"limits"`
	State        string       `json:"state"`
	StateMessage string       `json:"state_message"`
	Funding      *infoFunding `json:"funding"`
	Endpoints    infoRoutes   `json:"endpoints"`
	// Network is the Bitcoin network BTC is paid on (regtest, signet,
	// testnet); absent for the Stacks assets.
	Network string `json:"network,omitempty"`
	// Sizes are BTC's larger amounts (v1's large=true and xlarge=true).
	Sizes *infoSizes `json:"sizes,omitempty"`
	// Budget is what the asset may pay out per period and what is left
	// (null: no budget); Runway how long its balance lasts.
	Budget *infoBudget `json:"budget"`
	Runway *infoRunway `json:"runway"`
}

type infoSizes struct {
	Large  uint64 `json:"large"`
	XLarge uint64 `json:"xlarge"`
}

type infoRoutes struct {
	V1 string `json:"v1"`
	V3 string `json:"v3"`
}

// Decimals of the chains' own assets: µSTX, satoshis. A token's are its
// contract's.
var (
	stxDecimals = 6
	btcDecimals = 8
)

type infoTip struct {
	Height          uint64 `json:"height"`
	BurnBlockHeight uint64 `json:"burn_block_height"`
}

type infoAmounts struct {
	DefaultUSTX  uint64  `json:"default_ustx"`
	StackingUSTX *uint64 `json:"stacking_ustx"`
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
	DripsLeft uint64 `json:"drips_left"`
	// Balance is what the faucet can spend on drips now, in the asset's
	// base units (µSTX, satoshis): the counted keys' available µSTX or
	// token units beyond what is in flight, or the BTC faucet's spendable
	// coins.
	Balance uint64 `json:"balance"`
}

func fundingInfo(f faucet.Funding) *infoFunding {
	return &infoFunding{DripsLeft: f.DripsLeft, Balance: f.Available}
}

// handleInfo serves GET /faucet/v1/info.
func (s *server) handleInfo(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	body, err := s.info(r.Context())
	if err != nil {
		return // the client went away
	}
	writeJSON(w, http.StatusOK, body)
}

// info is the discovery document, for the endpoint and the MCP tool; it
// fails only when ctx ends.
func (s *server) info(ctx context.Context) (infoBody, error) {
	snap, err := s.status.get(ctx)
	if err != nil {
		return infoBody{}, err
	}
	f := s.cfg.Faucet
	body := infoBody{
		Network:       "testnet",
		ExplorerTxURL: s.cfg.ExplorerTxURL,
		Devnet:        s.cfg.Devnet,
		ServerVersion: s.status.serverVersion,
		Amounts:       infoAmounts{DefaultUSTX: f.DefaultAmount()},
		Challenge:     infoPoW{Endpoint: pathChallenge},
		Nodes:         nodesInfo(s.cfg.Nodes),
		BTCNodes:      nodesInfo(s.cfg.BTCNodes),
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
			body.BalanceCapUSTX = &c
		}
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if snap.status != statusNodeUnreachable {
		if amt, err := f.StackingAmount(ctx); err == nil {
			body.Amounts.StackingUSTX = &amt
		}
	}
	// The top-level state is STX's, as before assets had entries of their
	// own; the tokens share its node and keys, not its switches.
	state, message, fund := s.faucetState(ctx, snap)
	stall := s.chainStall()
	body.State, body.StateMessage = overStall(state, message, stall)
	body.State, body.StateMessage = s.switchedState(faucet.AssetSTX, body.State, body.StateMessage)
	if fund.Keys > 0 {
		body.Funding = fundingInfo(fund)
	}
	env := &infoEnv{limits: lim, state: state, message: message, fund: fund, lowDrips: s.cfg.lowDrips}
	for _, a := range s.assets {
		out := infoAsset{Asset: string(a.name), Endpoints: assetRoutes(a.name)}
		a.describe(ctx, env, a, &out)
		if a.chain == chainStacks { // BTC is paid on another chain
			out.State, out.StateMessage = overStall(out.State, out.StateMessage, stall)
		}
		out.State, out.StateMessage = s.switchedState(a.name, out.State, out.StateMessage)
		out.Budget, out.Runway = s.budgetInfo(ctx, a.name), s.runwayInfo(a.name)
		body.Assets = append(body.Assets, out)
	}
	body.SignIn = s.signInInfo()
	return body, nil
}

// infoEnv is what info reads once for every asset's entry: the limits,
// and the Stacks faucet's state (its node, its STX funds) before switches.
type infoEnv struct {
	limits         guard.Limits
	state, message string
	fund           faucet.Funding
	lowDrips       func(faucet.Asset) int
}

func assetRoutes(a faucet.Asset) infoRoutes {
	return infoRoutes{V1: "/extended/v1/faucets/" + string(a), V3: "/extended/v3/faucets/" + string(a)}
}

func limitInfo(l guard.Limit) *infoLimit {
	if l.Requests <= 0 {
		return nil
	}
	return &infoLimit{Requests: l.Requests, WindowSeconds: int64(l.Window / time.Second)}
}

// faucetState summarises whether a STX drip would work now, for people:
// the node and the funds left (the suspension is the caller's).
func (s *server) faucetState(ctx context.Context, snap *statusSnapshot) (state, message string, fund faucet.Funding) {
	f := s.cfg.Faucet
	if snap.status == statusNodeUnreachable {
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
	state, message = fundingState(fund, s.cfg.LowDrips, "")
	return state, message, fund
}

// fundingState words an asset's funding level; asset names it in the
// message ("" for the faucet as a whole).
func fundingState(fund faucet.Funding, lowDrips int, asset string) (state, message string) {
	funds := "funds"
	if asset != "" {
		funds = asset
	}
	switch faucet.LevelOf(fund.DripsLeft, uint64(lowDrips)) {
	case faucet.FundsEmpty:
		return stateEmpty, "The faucet is out of " + funds + "; its operator has been asked to refill it."
	case faucet.FundsLow:
		return stateLow, "The faucet is running low on " + funds + " (" + strconv.FormatUint(fund.DripsLeft, 10) + " drips left)."
	}
	return stateReady, "The faucet is ready."
}

// chainStall words the Stacks chain's stall for people: "" while the tip
// has risen within StallAfter, before the engine first read it, and when
// StallAfter is 0.
func (s *server) chainStall() string {
	after := s.cfg.StallAfter
	if after <= 0 {
		return ""
	}
	age, known := s.cfg.Faucet.TipAge()
	if !known || age < after {
		return ""
	}
	return "No new Stacks block for " + ageText(age) + ": the chain looks stalled. Drips are still accepted, but they stay pending until blocks resume."
}

// overStall puts the chain's stall (its message, "" for none) over an
// asset's state where a drip would be paid (ready, low): paid, it would
// wait for the chain, and that wait is what the user needs to hear of. A
// state that refuses drips outright (node_unreachable, empty, unavailable;
// off and suspended, applied after) stays: a stall is no news to someone
// who cannot get a drip at all. The drips are not refused themselves: the
// chain may resume at any moment, and refusing would turn a wait into a
// failure.
func overStall(state, message, stall string) (string, string) {
	switch {
	case stall == "":
		return state, message
	case state == stateReady:
		return stateStalled, stall
	case state == stateLow:
		return stateStalled, stall + " " + message
	}
	return state, message
}

// ageText writes an age as people read it: "45 s", "42 min", "3 h 5 min".
func ageText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + " s"
	case d < time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + " min"
	}
	h := strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	if m := d % time.Hour / time.Minute; m > 0 {
		return h + " " + strconv.FormatInt(int64(m), 10) + " min"
	}
	return h
}
