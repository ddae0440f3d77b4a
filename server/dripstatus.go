package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// Drip states of the drip status endpoint.
const (
	dripPending   = "pending"
	dripConfirmed = "confirmed"
	dripFailed    = "failed"
	dripUnknown   = "unknown"
)

// dripStatusBody answers GET /faucet/v1/drips/{txid}. Fields the faucet
// does not know are null.
type dripStatusBody struct {
	TxID        string  `json:"tx_id"`
	State       string  `json:"state"`
	BlockHeight *uint64 `json:"block_height"`
	Recipient   *string `json:"recipient"`
	// Asset is what the drip pays ("stx", a token's name, "btc"); Amount is in its base
	// units (µSTX, satoshis). AmountUSTX repeats an STX amount for the
	// clients that read it and is null for a token drip.
	Asset      string  `json:"asset,omitempty"`
	Amount     *string `json:"amount"`
	AmountUSTX *string `json:"amount_ustx"`
	Stacking   *bool   `json:"stacking"`
	SentAt     *string `json:"sent_at"`
	// Batch is how many drips the transaction pays when it is a send-many
	// call; recipient is then null (the txid alone does not say which
	// recipient asks) and amount_ustx is each recipient's amount.
	Batch int `json:"batch,omitempty"`
	// ReplacedBy is the txid now carrying the same transfer after the
	// faucet raised its fee.
	ReplacedBy string `json:"replaced_by,omitempty"`
	Message    string `json:"message"`
}

// dripStatusTimeout bounds the node reads of one drip status request.
const dripStatusTimeout = 5 * time.Second

// handleDripStatus serves GET /faucet/v1/drips/{txid} from the faucet's own
// records and the node. Only transactions this faucet sent are looked up at
// the node, so the endpoint is no open proxy to it.
func (s *server) handleDripStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	id, err := stacks.ParseTxID(r.PathValue("txid"))
	if err != nil {
		writeError(w, http.StatusBadRequest, errorBody{Error: "invalid txid: " + err.Error(), Reason: "invalid_txid"})
		return
	}
	writeJSON(w, http.StatusOK, s.dripStatus(r.Context(), id))
}

// dripStatus finds where a drip of this faucet is, for the endpoint and
// the MCP tool.
func (s *server) dripStatus(ctx context.Context, id stacks.TxID) dripStatusBody {
	ctx, cancel := context.WithTimeout(ctx, dripStatusTimeout)
	defer cancel()
	f := s.cfg.Faucet
	out := dripStatusBody{TxID: id.Hex0x()}

	rec, found, err := f.LookupDrip(ctx, id.String())
	if err != nil {
		s.log.Warn("drip status: history lookup failed", "err", err)
	}
	if a, ok := s.lookup(rec.Asset); found && ok && a.chain == chainBitcoin {
		// A BTC drip: the Bitcoin node follows it, the history dates it.
		b, _ := s.btcDripStatus(ctx, id.String(), &rec)
		return b
	}
	inflight, isPending := f.PendingByTxID(id.String())
	switch {
	case found:
		out.Recipient, out.Stacking = &rec.Recipient, &rec.Stacking
		if rec.Batch > 1 {
			out.Recipient, out.Batch = nil, rec.Batch
		}
		at := rec.At.UTC().Format(time.RFC3339)
		out.SentAt = &at
		out.setAmount(rec.Asset, rec.Amount)
	case isPending:
		rcpt, amount, at := inflight.Recipient.String(), inflight.Amount, inflight.SentAt.UTC().Format(time.RFC3339)
		out.Recipient = &rcpt
		if n := inflight.BatchSize(); n > 0 {
			out.Recipient, out.Batch, amount = nil, n, inflight.Amount/uint64(n)
		}
		out.SentAt = &at
		out.setAmount(inflight.Asset, amount)
	default:
		if s.cfg.BTC != nil {
			if b, ok := s.btcDripStatus(ctx, id.String(), nil); ok {
				return b
			}
		}
		out.State, out.Message = dripUnknown, "This faucet has no record of that transaction."
		return out
	}
	if isPending {
		// The engine still holds it above its key's confirmed nonce as of
		// the last block it saw (it syncs every block): pending, without a
		// node round trip for each poll of the page.
		out.State, out.Message = dripPending, "Pending: waiting for the next block."
		if inflight.State == faucet.TxBroadcasting {
			out.Message = "Pending: the faucet is making sure the node has it."
		}
		return out
	}
	out.State, out.Message = s.txState(ctx, id, rec, found, &out)
	return out
}

// setAmount fills the asset and its amount fields.
func (b *dripStatusBody) setAmount(asset faucet.Asset, amount uint64) {
	asset = asset.OrSTX()
	amt := strconv.FormatUint(amount, 10)
	b.Asset, b.Amount = string(asset), &amt
	if asset.IsSTX() {
		b.AmountUSTX = &amt
	}
}

// txState asks the node where a faucet transaction is.
func (s *server) txState(ctx context.Context, id stacks.TxID, rec faucet.DripRecord, found bool, out *dripStatusBody) (string, string) {
	pendingMsg := "Pending: waiting for the next block."
	if s.cfg.Txs == nil {
		return dripPending, "Sent; this faucet cannot look up confirmations."
	}
	mined, err := s.cfg.Txs.Transaction(ctx, id.Hex0x())
	indexed := !errors.Is(err, node.ErrTxIndexDisabled)
	switch {
	case err == nil && mined.IsCanonical != nil && !*mined.IsCanonical:
		// Mined only in a fork the node abandoned: it may still be mined
		// on the canonical chain.
		return dripPending, "Pending: the block that held it is no longer on the main chain."
	case err == nil:
		out.BlockHeight = mined.BlockHeight
		if !mined.IsOK() {
			return dripFailed, "The transaction was mined but failed: " + shorten(mined.Result)
		}
		if mined.BlockHeight != nil {
			return dripConfirmed, "Confirmed in block " + strconv.FormatUint(*mined.BlockHeight, 10) + "."
		}
		return dripConfirmed, "Confirmed."
	case errors.Is(err, node.ErrTxNotFound), errors.Is(err, node.ErrTxIndexDisabled):
	default:
		// The page asks every few seconds: an outage is the engine's to
		// report (with back-off), anything else is worth a warning.
		level := slog.LevelWarn
		if node.IsUnavailable(err) {
			level = slog.LevelDebug
		}
		s.log.Log(ctx, level, "drip status: node lookup failed", "err", err)
		return dripPending, "Sent; the Stacks node is unreachable, so its progress is unknown right now."
	}
	keys := s.cfg.Faucet.Keys()
	if ts, ok := s.cfg.Faucet.Treasury(); ok {
		// Refills are in the history too, sent by the treasury.
		keys = append(keys, faucet.KeyStatus{Address: ts.Address, Synced: ts.Synced, ConfirmedNonce: ts.ConfirmedNonce})
	}
	past := found && rec.Sender != "" && confirmedPast(keys, rec.Sender, rec.Nonce)
	if past && !indexed {
		// Without a transaction index the node only tells us the sender's
		// nonce moved past this one: it is in a block. (Checked before the
		// mempool, which keeps mined transactions for a while.)
		return dripConfirmed, "Confirmed."
	}
	if in, err := s.cfg.Txs.MempoolTx(ctx, id.Hex0x()); err == nil && in {
		return dripPending, pendingMsg
	}
	replacement, replaced := s.cfg.Faucet.ReplacementOf(id.String())
	if replaced {
		out.ReplacedBy = "0x" + replacement
	}
	if found && rec.Sender != "" {
		// The same payment (recipient and amount, alone or in a batch)
		// still in flight at the nonce under another txid is a fee-bumped
		// replacement; another one there means this one was dropped and
		// the nonce reused.
		if p, ok := s.cfg.Faucet.PendingAt(rec.Sender, rec.Nonce); ok && p.TxID.String() != id.String() &&
			p.Pays(rec.Recipient, rec.Amount) {
			out.ReplacedBy = p.TxID.Hex0x()
			return dripPending, "Pending: the faucet raised the fee; the same transfer now travels as " + out.ReplacedBy + "."
		}
	}
	if s.cfg.Faucet.Dropped(id.String()) {
		return dripFailed, "The Stacks node refused this transaction, so it will not be mined. Please request again."
	}
	if past {
		if replaced {
			// The nonce moved on but no block holds this txid: the fee-bumped
			// replacement of the same transfer was mined.
			return dripConfirmed, "Confirmed (delivered by a replacement transaction with a higher fee)."
		}
		// No block holds this txid and its nonce is used; this process did
		// not see why (another replica or an earlier run handled it).
		return dripUnknown, "This transaction is not in a block, and its nonce was used by another faucet transaction (possibly a higher-fee replacement of the same transfer). Check your balance before asking again."
	}
	return dripPending, pendingMsg
}

// confirmedPast reports whether the node's confirmed nonce of the faucet
// key sender (as of the last block sync) is above nonce.
func confirmedPast(keys []faucet.KeyStatus, sender string, nonce uint64) bool {
	for _, k := range keys {
		if k.Address == sender {
			return k.Synced && k.ConfirmedNonce > nonce
		}
	}
	return false
}

// btcDripStatus answers for a BTC payout of this faucet, with its history
// row when there is one (rec); false when txid is not one.
func (s *server) btcDripStatus(ctx context.Context, txid string, rec *faucet.DripRecord) (dripStatusBody, bool) {
	out := dripStatusBody{TxID: txid, Asset: string(assetBTC)}
	if rec != nil {
		rcpt, amt, at := rec.Recipient, strconv.FormatUint(rec.Amount, 10), rec.At.UTC().Format(time.RFC3339)
		out.Recipient, out.Amount, out.SentAt, out.Batch = &rcpt, &amt, &at, rec.Batch
		if rec.Batch > 1 {
			out.Recipient = nil // the txid alone does not say which recipient asks
		}
	}
	var p btcfaucet.PayoutStatus
	ok, err := false, error(nil)
	if s.cfg.BTC != nil {
		p, ok, err = s.cfg.BTC.Payout(ctx, txid)
	}
	if err != nil {
		s.log.Warn("drip status: btc lookup failed", "err", err)
	}
	switch {
	case !ok && rec != nil:
		out.State, out.Message = dripPending, "Sent; the Bitcoin node cannot tell its progress right now."
		return out, true
	case !ok:
		return dripStatusBody{}, false
	case rec == nil && len(p.Outputs) == 1:
		// Without a history row the payout's one output says who and how much.
		rcpt, amt := p.Outputs[0].Address, strconv.FormatInt(p.Outputs[0].Amount, 10)
		out.Recipient, out.Amount = &rcpt, &amt
	case rec == nil && len(p.Outputs) > 1:
		out.Batch = len(p.Outputs)
	}
	if out.SentAt == nil && !p.SentAt.IsZero() {
		// Not in the history yet (its writer runs behind the answer): the
		// payout's own record dates it.
		at := p.SentAt.UTC().Format(time.RFC3339)
		out.SentAt = &at
	}
	switch {
	case p.Confirmations > 0:
		out.State, out.Message = dripConfirmed, confirmationsText(p.Confirmations, p.Height)
		if p.Height > 0 {
			h := uint64(p.Height)
			out.BlockHeight = &h
		}
	default:
		out.State, out.Message = dripPending, "Pending: waiting for the next Bitcoin block."
	}
	return out, true
}

// confirmationsText says how deep a payout is: in block height (0:
// unknown) with n confirmations.
func confirmationsText(n, height int64) string {
	count := strconv.FormatInt(n, 10) + " confirmations"
	if n == 1 {
		count = "1 confirmation"
	}
	if height > 0 {
		return "Confirmed in block " + strconv.FormatInt(height, 10) + " (" + count + ")."
	}
	return "Confirmed (" + count + ")."
}
