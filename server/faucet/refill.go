package faucet

import (
	"context"
	"errors"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The refill pass: at every block the treasury tops up the distributors
// that fell low (the rules in treasury.go).

// refill tops up every distributor key whose available balance of an
// asset fell below its refill threshold and has no refill of it in flight.
// synced names the owned keys whose account was read this block (after the
// treasury's).
func (t *treasury) refill(ctx context.Context, height uint64, synced map[*keyState]bool) {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	for _, d := range t.pool.keys {
		for _, r := range t.rules {
			if ctx.Err() != nil {
				return
			}
			// The in-flight check before the balance read, never after:
			// once a refill is no longer in flight, its nonce had
			// confirmed at the treasury read behind that answer, so a
			// distributor read started after the check includes it.
			if t.pool.refillInFlight(d.addr, r.asset) {
				continue
			}
			avail, ok := t.distributorAvailable(ctx, d, r.asset, synced[d])
			if !ok || avail >= r.below {
				continue
			}
			if t.isDry(r.asset) {
				t.warnDry(height, r.asset, d.addr, "treasury cannot pay a refill; the distributor key is low")
				continue
			}
			t.sendRefill(ctx, d, r, height)
		}
	}
}

// distributorAvailable is what a distributor key can spend: from this
// replica's state when it owns the key (read this block), else from the
// node's balance minus the key's in-flight entries in the shared ledger.
// ok is false when it is unknown. A key it reports below the refill
// threshold was read from the node after the call began (see refill).
func (t *treasury) distributorAvailable(ctx context.Context, d *keyState, asset Asset, syncedNow bool) (uint64, bool) {
	owned, loaded, isSynced := d.flags()
	_, avail := d.fundsOf(asset, t.reserve)
	if owned && loaded {
		if !syncedNow || !isSynced || (!asset.IsSTX() && !d.tokenIsKnown(asset)) {
			return 0, false
		}
		if avail >= t.rule(asset).below {
			return avail, true
		}
		// Low as of this poll's read, which may predate the treasury read
		// that saw this key's refill confirm (another poll's, or a resync):
		// read it again. syncKey never applies a read older than one
		// already applied, so the state is now at least this fresh.
		if err := t.accounts.syncKey(ctx, d); err != nil {
			t.log.Warn("refill: re-reading a distributor's account failed", "recipient", d.addr.String(), "err", err)
			return 0, false
		}
		if owned, loaded, synced := d.flags(); !owned || !loaded || !synced {
			return 0, false // ownership changed meanwhile
		}
		if !asset.IsSTX() && !d.tokenIsKnown(asset) {
			return 0, false
		}
		_, avail := d.fundsOf(asset, t.reserve)
		return avail, true
	}
	if owned {
		return 0, false // its ledger is not loaded: in-flight spends unknown
	}
	acct, err := t.node.Account(ctx, d.addr.String())
	if err != nil {
		t.log.Warn("refill: reading a distributor's account failed", "recipient", d.addr.String(), "err", err)
		return 0, false
	}
	balance := acct.Balance
	if !asset.IsSTX() {
		id, ok := t.tokenAsset(asset)
		if !ok {
			return 0, false
		}
		// Read after the account, like syncTokens: errs low, never high.
		if balance, err = t.node.TokenBalance(ctx, id.Contract, stacks.Principal{Address: d.addr}); err != nil {
			t.log.Warn("refill: reading a distributor's token balance failed", "recipient", d.addr.String(), "asset", string(asset), "err", err)
			return 0, false
		}
	}
	entries, err := t.journal.Load(ctx, d.addr.String())
	if err != nil {
		t.log.Warn("refill: reading a distributor's journal failed", "recipient", d.addr.String(), "err", err)
		return 0, false
	}
	txs, err := pendingOfAll(entries)
	if err != nil {
		t.log.Warn("refill: reading a distributor's journal failed", "recipient", d.addr.String(), "err", err)
		return 0, false
	}
	var stx, moving uint64
	for _, e := range txs {
		if e.Nonce >= acct.Nonce && !e.Foreign {
			c := costOf(e.Asset, e.Amount, e.Fee)
			stx = satAdd(stx, c.stx)
			if c.token == asset {
				moving = satAdd(moving, c.amount)
			}
		}
	}
	if !asset.IsSTX() {
		return satSub(balance, moving), true
	}
	return satSub(satSub(balance, stx), t.reserve), true
}

// tokenAsset is the identifier of a token whose contract is known.
func (t *treasury) tokenAsset(name Asset) (stacks.AssetInfo, bool) {
	tok := t.tokens.byName(name)
	if tok == nil {
		return stacks.AssetInfo{}, false
	}
	asset, err := tok.usable()
	return asset, err == nil
}

// sendRefill sends one refill of r's asset from the treasury to d: a
// placement whose only possible key is the treasury's.
func (t *treasury) sendRefill(ctx context.Context, d *keyState, r refillRule, height uint64) {
	k := t.key
	to := stacks.Principal{Address: d.addr}
	chainID := t.chain.id()
	log := t.log.With("sender", k.addr.String(), "recipient", d.addr.String(), "asset", string(r.asset), "amount", r.amount)
	fee := t.price.transfer(ctx, to)
	build := func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
		return stacks.NewTokenTransfer(stacks.TransferParams{
			Recipient: to, Amount: r.amount, Nonce: nonce, Fee: fee, Memo: t.memo, ChainID: chainID,
		}, key)
	}
	if !r.asset.IsSTX() {
		asset, ok := t.tokenAsset(r.asset)
		if !ok {
			return // its contract is not known yet
		}
		fee = t.price.token(ctx, asset, to, []byte(RefillMemo))
		build = func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error) {
			return stacks.NewSIP010Transfer(stacks.SIP010TransferParams{
				Asset: asset, Recipient: to, Amount: r.amount, Memo: []byte(RefillMemo), Nonce: nonce, Fee: fee, ChainID: chainID,
			}, key)
		}
	}
	var refused allocRefusal
	var balance uint64
	done, err := t.placer.place(ctx, placement{
		to: to, asset: r.asset, amount: r.amount, fee: fee, recorded: t.onRecorded, build: build,
		choose: chooseFunc(func(_ context.Context, spend cost, excluded keySet) (*keyState, uint64, *Error) {
			if excluded[k] {
				return nil, 0, failf(ReasonBusy, nil, "the treasury cannot send now")
			}
			var nonce uint64
			nonce, refused, balance = t.pool.allocateOn(k, spend)
			if refused != 0 {
				return nil, 0, failf(ReasonBusy, nil, "the treasury cannot send now")
			}
			return k, nonce, nil
		}),
	})
	if err == nil {
		t.refillSent(ctx, d, &done.tx, done.lostAnswer)
		return
	}
	var rej *node.RejectionError
	switch {
	case refused == refusedNotOurs:
		return // ownership changed meanwhile: the new writer refills
	case refused == refusedBusy:
		log.Warn("treasury at its in-flight cap; refill waits for the next block")
		return
	case refused == refusedShort:
		t.failed.Add(1)
		short := r.asset
		if !r.asset.IsSTX() {
			if _, avail := k.fundsOf(AssetSTX, t.reserve); avail < fee {
				short = AssetSTX // it cannot pay the fee
			} else {
				balance, _ = k.fundsOf(r.asset, 0)
			}
		}
		if !t.markDry(short, balance) {
			t.warnDry(height, short, d.addr, "treasury balance too low for a refill; marked dry until it is funded")
		}
		return
	case errors.As(err, &rej) && rej.Reason == node.ReasonNotEnoughFunds:
		// The node checks the µSTX a transaction spends (a token call's
		// fee), never tokens: STX is what is short.
		t.failed.Add(1)
		bal, _ := k.fundsOf(AssetSTX, t.reserve)
		if !t.markDry(AssetSTX, bal) {
			t.warnDry(height, AssetSTX, d.addr, "node reports the treasury cannot pay a refill; marked dry until it is funded")
		}
		return
	}
	t.failed.Add(1)
	log.Warn("refill not placed; retried at the next block", "err", err)
}

// refillSent counts, logs and records a refill now in flight. sendErr is
// the broadcast's error when its outcome is unknown.
func (t *treasury) refillSent(ctx context.Context, d *keyState, p *PendingTx, sendErr error) {
	t.sent.Add(1)
	args := []any{"sender", p.Sender.String(), "recipient", d.addr.String(), "amount", p.Amount,
		"fee", p.Fee, "txid", p.TxID.Hex0x(), "nonce", p.Nonce}
	if sendErr != nil {
		t.log.Warn("treasury refill sent, node answer lost; tracked and rebroadcast until its nonce confirms", append(args, "err", sendErr)...)
	} else {
		t.log.Info("treasury refill sent", args...)
	}
	t.history.record(ctx, DripRecord{
		At: p.SentAt, Recipient: d.addr.String(), Asset: p.Asset.OrSTX(), Amount: p.Amount, Fee: p.Fee,
		TxID: p.TxID.String(), Sender: p.Sender.String(), Nonce: p.Nonce, Outcome: OutcomeRefill,
	})
}
