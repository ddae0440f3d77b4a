package server

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
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
// They share the abuse checks and rate limits of the Stacks assets (in
// buckets of their own) but not the Stacks engine.

// BTCFaucet is the BTC engine the endpoints use; *btcfaucet.Faucet has it.
type BTCFaucet interface {
	// DripAmount pays amount satoshis to addr.
	DripAmount(ctx context.Context, addr bitcoin.Address, amount int64) (*btcfaucet.Drip, error)
	Balance(ctx context.Context, addr bitcoin.Address) (int64, error)
	Payout(ctx context.Context, txid string) (btcfaucet.PayoutStatus, bool, error)
	Status() btcfaucet.Status
	Amounts() btcfaucet.Amounts
	Network() bitcoin.Network
}

var _ BTCFaucet = (*btcfaucet.Faucet)(nil)

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

// handleBTCDrip serves the v1 BTC drip.
func (s *server) handleBTCDrip(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.refuseOff(w, assetBTC, false) {
		return
	}
	b := s.cfg.BTC
	addr, size, bad := parseBTCDrip(r, b.Network())
	if bad != nil {
		s.metrics.observeDrip(assetBTC, reasonInvalidRequest, nil)
		writeError(w, http.StatusBadRequest, *bad)
		return
	}
	d, fail := s.dispenseBTC(w.Header(), r, addr, size)
	if fail != nil {
		fail.writeV1(w, s.cfg.Now())
		return
	}
	writeJSON(w, http.StatusOK, btcSuccess{Success: true, TxID: d.TxID, RawTx: hexString(d.Raw)})
}

// handleBTCDripV3 serves the v3 BTC drip: the default amount only.
func (s *server) handleBTCDripV3(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.refuseOff(w, assetBTC, true) {
		return
	}
	b := s.cfg.BTC
	text, status, msg := readV3Address(r)
	if status == 0 {
		var err error
		var addr bitcoin.Address
		if addr, err = bitcoin.ParseAddress(text, b.Network()); err != nil {
			status, msg = http.StatusBadRequest, btcAddressError(text, b.Network(), err).Error
		} else {
			d, fail := s.dispenseBTC(w.Header(), r, addr, btcfaucet.SizeDefault)
			if fail != nil {
				fail.writeV3(w)
				return
			}
			writeJSON(w, http.StatusOK, v3Success{
				Transaction: v3Tx{TxID: "0x" + d.TxID, Chain: "bitcoin"},
				Amount:      v3Amount{string(assetBTC): strconv.FormatInt(d.Amount, 10)},
			})
			return
		}
	}
	s.metrics.observeDrip(assetBTC, reasonInvalidRequest, nil)
	writeJSON(w, status, v3Error{Error: msg})
}

// handleBTCBalance serves GET /extended/v1/faucets/btc/{address}: the
// address's confirmed balance in BTC, read from the node.
func (s *server) handleBTCBalance(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if !s.assetOn(assetBTC) {
		// As the incumbent: the same switches as its drips; nothing counted.
		s.assetOff(assetBTC).writeV1(w, s.cfg.Now())
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

// parseBTCDrip validates a v1 BTC drip: its query, or an address in its
// body.
func parseBTCDrip(r *http.Request, net bitcoin.Network) (bitcoin.Address, btcfaucet.Size, *errorBody) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return bitcoin.Address{}, 0, &errorBody{Error: "invalid query string", Reason: "invalid_query"}
	}
	addrs := q["address"]
	if len(addrs) == 0 || strings.TrimSpace(addrs[0]) == "" {
		// Unlike its Stacks routes, the incumbent's v1 BTC route reads the
		// address from a JSON body when the query has none.
		if a, _, ok := addressFromBody(r); ok {
			addrs = []string{a}
		}
	}
	switch {
	case len(addrs) == 0 || strings.TrimSpace(addrs[0]) == "":
		return bitcoin.Address{}, 0, &errorBody{Error: "address required", Reason: "address_required"}
	case len(addrs) > 1:
		return bitcoin.Address{}, 0, &errorBody{Error: "address given more than once", Reason: "invalid_address"}
	}
	flag := func(name string) (bool, *errorBody) {
		switch v := q[name]; {
		case len(v) == 0:
			return false, nil
		case len(v) > 1:
			return false, &errorBody{Error: name + " given more than once", Reason: "invalid_amount"}
		case v[0] == "true":
			return true, nil
		case v[0] == "false":
			return false, nil
		}
		return false, &errorBody{Error: "invalid " + name + " value, use true or false", Reason: "invalid_amount"}
	}
	large, bad := flag("large")
	if bad != nil {
		return bitcoin.Address{}, 0, bad
	}
	xlarge, bad := flag("xlarge")
	if bad != nil {
		return bitcoin.Address{}, 0, bad
	}
	size := btcfaucet.SizeDefault
	switch {
	case large && xlarge:
		return bitcoin.Address{}, 0, &errorBody{Error: btcBothSizes, Reason: "invalid_amount"}
	case large:
		size = btcfaucet.SizeLarge
	case xlarge:
		size = btcfaucet.SizeXLarge
	}
	text := strings.TrimSpace(addrs[0])
	addr, err := bitcoin.ParseAddress(text, net)
	if err != nil {
		e := btcAddressError(text, net, err)
		return bitcoin.Address{}, 0, &e
	}
	return addr, size, nil
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

// dispenseBTC takes a valid BTC drip through the checks and limits shared
// with the Stacks assets, then the BTC engine.
func (s *server) dispenseBTC(h http.Header, r *http.Request, addr bitcoin.Address, size btcfaucet.Size) (*btcfaucet.Drip, *dripFailure) {
	adm := guard.Admission{Asset: string(assetBTC), Address: addr.String()}
	if ri := infoFrom(r.Context()); ri != nil {
		adm.ClientIP = ri.clientIP
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.DripTimeout)
	defer cancel()
	log := s.log.With("recipient", addr.String(), "asset", string(assetBTC), "client_ip", addrString(adm.ClientIP))
	quote := func(context.Context) (uint64, *dripFailure) { return uint64(max(s.cfg.BTC.Amounts().Of(size), 0)), nil }
	adm, res, fail := s.admit(ctx, r, h, assetBTC, adm, quote, log)
	if fail != nil {
		return nil, fail
	}
	amount := s.cfg.BTC.Amounts().Of(size)
	if res.Amount > 0 {
		amount = int64(min(res.Amount, math.MaxInt64))
	}
	d, err := s.cfg.BTC.DripAmount(ctx, addr, amount)
	if err != nil {
		if rerr := s.cfg.Limits.Release(context.WithoutCancel(ctx), res); rerr != nil {
			log.Warn("rate-limit release failed; the slot stays charged", "err", rerr)
		}
		return nil, s.btcFailure(ctx, log, err)
	}
	s.metrics.observeBTCDrip(d)
	s.outflow.add(assetBTC, sats(d.Amount), s.cfg.Now())
	if s.cfg.Guard != nil {
		s.cfg.Guard.Dispensed(adm.Grant)
	}
	attrs := []any{"amount_sats", d.Amount, "txid", d.TxID, "fee_sats", d.Fee, "batch_size", d.Batch}
	if adm.Grant.Bypassed != "" {
		attrs = append(attrs, "bypass", adm.Grant.Bypassed)
	}
	log.Info("drip sent", attrs...)
	return d, nil
}

// btcFailure maps a BTC engine error to the answer and logs its cause.
func (s *server) btcFailure(ctx context.Context, log *slog.Logger, err error) *dripFailure {
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
	s.metrics.observeDrip(assetBTC, f.reason, nil)
	log.Log(ctx, level, "drip failed", "reason", f.reason, "err", err)
	return f
}
