package faucet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// placement is one transaction to place: what it moves (for the ledger row
// and the key's in-flight spend), how to sign it for a key and nonce, and
// which key may send it. Drips, send-many batches, treasury refills and
// nonce-gap fillers are placements; place is the only code that sends one.
type placement struct {
	// to, asset and amount are the ledger row's recipient and what it
	// moves: a transfer's own, a send-many call's contract and total, or a
	// token transfer's recipient and token amount.
	to     stacks.Principal
	asset  Asset
	amount uint64
	fee    uint64
	// build signs the transaction for key at nonce.
	build func(key *stacks.PrivateKey, nonce uint64) (*stacks.Transaction, error)
	// choose picks a key and allocates a nonce on it that can afford spend,
	// skipping excluded keys.
	choose chooser
	// excluded and lastErr start the retry state: keys already known not
	// to work, and why.
	excluded map[*keyState]bool
	lastErr  *Error
	// recorded, when set (tests only), runs once the row is in the ledger
	// and before its first broadcast.
	recorded func(PendingTx)
}

// chooser picks a key and allocates a nonce on it that can afford spend,
// skipping excluded keys.
type chooser func(ctx context.Context, spend cost, excluded map[*keyState]bool) (*keyState, uint64, *Error)

// placed is a transaction the node holds or may hold.
type placed struct {
	tx PendingTx
	// lostAnswer is the broadcast's error when the node's answer was lost:
	// the tx is in doubt, recorded, and rebroadcast until its nonce confirms.
	lostAnswer error
}

// errBuild marks a placement whose transaction could not be built or signed.
var errBuild = errors.New("building the transaction failed")

// place chooses a key and nonce, signs, records, broadcasts, and commits the
// nonce or classifies the node's refusal, retrying on another nonce or key
// up to MaxAttempts times.
//
// Crash safety lives here and only here: the signed bytes are in the ledger
// (state broadcasting) before the first send, so a crash at any point leaves
// either no trace (the nonce was never used) or bytes that resuming
// rebroadcasts (the node answers 200 for a tx it holds, so that is
// idempotent). Nothing is paid twice and no nonce is lost. An answer lost
// in transit is success in doubt, never an error: an error would invite a
// retry and a second payment.
func (f *Faucet) place(ctx context.Context, pl placement) (*placed, *Error) {
	excluded, lastErr := pl.excluded, pl.lastErr
	if excluded == nil {
		excluded = map[*keyState]bool{}
	}
	spend := costOf(pl.asset, pl.amount, pl.fee)
	for attempt := 0; attempt < f.cfg.Timing.MaxAttempts; attempt++ {
		k, nonce, ferr := pl.choose(ctx, spend, excluded)
		if ferr != nil {
			if lastErr != nil && ferr.Reason != ReasonStoreUnavailable {
				return nil, lastErr // the key-specific failure explains more
			}
			return nil, ferr
		}
		tx, err := pl.build(k.key, nonce)
		if err != nil {
			f.pool.release(k, nonce)
			return nil, failf(ReasonRejected, fmt.Errorf("%w: %w", errBuild, err), "could not sign the transaction")
		}
		raw := tx.Serialize()
		p := &PendingTx{Sender: k.addr, Nonce: nonce, TxID: tx.TxID(), Raw: raw, Recipient: pl.to,
			Asset: pl.asset.OrSTX(), Amount: pl.amount, Fee: pl.fee, SentAt: f.cfg.Now(), State: TxBroadcasting}
		if retry, rerr := f.recordSending(ctx, k, p, excluded); rerr != nil {
			if retry {
				lastErr = rerr
				continue
			}
			return nil, rerr
		}
		if pl.recorded != nil {
			pl.recorded(*p)
		}
		maybeSent, err := f.broadcast(ctx, raw)
		if err == nil || maybeSent {
			if err == nil {
				p.State = TxPending
			}
			// In doubt, the row stays "broadcasting": repair rebroadcasts
			// the bytes until the node answers or the nonce confirms.
			f.commit(ctx, k, p)
			return &placed{tx: *p, lostAnswer: err}, nil
		}
		lastErr = f.handleBroadcastError(ctx, k, p, err, excluded)
		if lastErr == nil {
			continue // retry on the same or another key
		}
		if lastErr.Reason != ReasonExhausted && lastErr.Reason != ReasonBusy {
			return nil, lastErr
		}
	}
	if lastErr == nil {
		lastErr = failf(ReasonBusy, nil, "the faucet could not place the transaction; try again shortly")
	}
	return nil, lastErr
}

// recordSending writes p (state broadcasting) to the ledger before its
// first broadcast. On failure the nonce is given back; retry is true when
// another key may still be tried (another replica took this one over).
func (f *Faucet) recordSending(ctx context.Context, k *keyState, p *PendingTx, excluded map[*keyState]bool) (retry bool, _ *Error) {
	err := f.cfg.State.Ledger.Put(ctx, *p)
	if err == nil {
		return false, nil
	}
	f.pool.release(k, p.Nonce)
	if errors.Is(err, ErrNotOwner) {
		// Another replica took the key over: never send with it.
		f.Lost(k.addr)
		excluded[k] = true
		return true, failf(ReasonBusy, err, "the faucet is busy; try again in a minute")
	}
	return false, storeFailure(err, "record the transaction")
}

// commit moves an allocated nonce to pending once its tx is (or may be) at
// the node. The ledger write comes first: a sync that confirms the nonce
// meanwhile finds it allocated, not pending, and so cannot delete the row
// before this write re-adds it.
func (f *Faucet) commit(ctx context.Context, k *keyState, p *PendingTx) {
	if p.State == TxPending {
		if err := f.cfg.State.Ledger.Put(context.WithoutCancel(ctx), *p); err != nil {
			// The row stays "broadcasting": resuming rebroadcasts the same
			// bytes, which the node answers 200. Nothing is lost.
			f.log.Warn("ledger update after broadcast failed", "sender", k.addr.String(), "nonce", p.Nonce, "err", err)
		}
	}
	k.commitPending(p, f.chain.Peek().height, f.cfg.Now())
	select {
	case f.sent <- struct{}{}:
	default: // the poll loop has a wake-up pending already
	}
}

// handleBroadcastError updates key state after a broadcast that surely did
// not place the tx at the node. It returns nil when the placement should
// simply be retried, or the error to report (or to keep as the last error
// while other keys are tried).
func (f *Faucet) handleBroadcastError(ctx context.Context, k *keyState, p *PendingTx, err error, excluded map[*keyState]bool) *Error {
	// Forget the recorded bytes before the nonce can be reused: a later
	// drip's record for the same nonce must not be deleted by this one.
	if derr := f.cfg.State.Ledger.Delete(context.WithoutCancel(ctx), k.addr, p.Nonce); derr != nil {
		f.log.Warn("ledger delete after a refused broadcast failed", "sender", k.addr.String(), "nonce", p.Nonce, "err", derr)
	}
	var rej *node.RejectionError
	if !errors.As(err, &rej) {
		f.pool.release(k, p.Nonce)
		var de *node.DecodeError
		switch {
		case errors.As(err, &de):
			// A 400 "Failed to decode": the node refuses these very bytes.
			f.log.Error("node could not decode the faucet transaction", "sender", k.addr.String(), "nonce", p.Nonce, "err", err)
			return failf(ReasonRejected, err, "the Stacks node refused the transaction")
		case errors.Is(err, context.Canceled):
			return failf(ReasonNodeUnavailable, err, "the request was cancelled")
		}
		return failf(ReasonNodeUnavailable, err, "the Stacks node is unavailable; try again shortly")
	}
	log := f.log.With("sender", k.addr.String(), "nonce", p.Nonce, "reason", rej.Reason)
	switch rej.Reason {
	case node.ReasonConflictingNonceInMempool:
		// Another writer holds this nonce: mark it taken and move on.
		k.takenByOther(p.Nonce, f.cfg.Now())
		log.Warn("nonce already used in mempool; advancing")
		return nil
	case node.ReasonBadNonce:
		f.pool.release(k, p.Nonce)
		if serr := f.syncKey(ctx, k); serr != nil {
			log.Warn("resync after BadNonce failed", "err", serr)
		}
		log.Warn("nonce behind the node; resynced")
		return nil
	case node.ReasonTooMuchChaining:
		f.pool.release(k, p.Nonce)
		excluded[k] = true
		log.Warn("mempool chaining limit reached for key")
		return failf(ReasonBusy, err, "the faucet is busy; try again in a minute")
	case node.ReasonNotEnoughFunds:
		f.pool.release(k, p.Nonce)
		k.setDry()
		excluded[k] = true
		log.Warn("node reports key cannot pay; marked dry")
		return failf(ReasonExhausted, err, "the faucet is out of funds")
	case node.ReasonServerFailureNoSuchChainTip, node.ReasonServerFailureDatabase, node.ReasonServerFailureOther:
		// The node blames itself (no chain tip while syncing, its database):
		// it is unavailable, our transaction is not at fault.
		f.pool.release(k, p.Nonce)
		log.Warn("node failed to process the transaction", "err", err)
		return failf(ReasonNodeUnavailable, err, "the Stacks node is unavailable; try again shortly")
	default:
		f.pool.release(k, p.Nonce)
		log.Error("node rejected faucet transaction", "err", err)
		return failf(ReasonRejected, err, "the Stacks node refused the transaction")
	}
}

// outcomeUnknown is true when the node may have accepted the tx although we
// got no answer: the request was sent (not refused at dial) and then timed
// out, was cut off or was cancelled. A definite HTTP answer is not unknown.
func outcomeUnknown(err error) bool {
	var te *node.TransportError
	sent := errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
	return sent && !neverSent(err)
}

// neverSent is true when the request provably did not reach the node (the
// connection was refused), so the nonce can be reused.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// broadcast submits raw, retrying the identical bytes on transient failures:
// the node answers 200 for a tx already in its mempool, so this is idempotent.
// maybeSent reports whether any attempt may have reached the node, so that a
// definite failure of a later retry does not hide an earlier unknown outcome.
func (f *Faucet) broadcast(ctx context.Context, raw []byte) (maybeSent bool, err error) {
	backoff := 50 * time.Millisecond
	for try := 0; try < 3; try++ {
		if _, err = f.cfg.Node.Broadcast(ctx, raw); err == nil {
			return true, nil
		}
		maybeSent = maybeSent || outcomeUnknown(err)
		if !node.IsUnavailable(err) || neverSent(err) {
			return maybeSent, err
		}
		select {
		case <-ctx.Done():
			return maybeSent, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	return maybeSent, err
}

// chooseDistributor is the key choice of drips and batches: the
// least-loaded distributor that can pay, waiting up to wait for a slot.
func (f *Faucet) chooseDistributor(wait time.Duration) chooser {
	return f.chooseKeeping(wait, 0)
}

// chooseKeeping is chooseDistributor leaving keep slots of each key free.
func (f *Faucet) chooseKeeping(wait time.Duration, keep int) chooser {
	return func(ctx context.Context, spend cost, excluded map[*keyState]bool) (*keyState, uint64, *Error) {
		return f.pool.pickWithin(ctx, spend, excluded, wait, keep, func(k *keyState) *Error { return f.prepareKey(ctx, k) })
	}
}

// prepareKey loads an owned key's ledger and syncs it if it never was, so
// that the pick sees it; a key another replica took over is dropped.
func (f *Faucet) prepareKey(ctx context.Context, k *keyState) *Error {
	owned, _, synced := k.flags()
	if !owned {
		return nil
	}
	if err := f.loadKey(ctx, k); err != nil {
		if errors.Is(err, ErrNotOwner) {
			f.Lost(k.addr)
			return nil
		}
		return storeFailure(err, "load the key's ledger")
	}
	if !synced {
		if err := f.syncKey(ctx, k); err != nil {
			f.log.Warn("key sync failed", "sender", k.addr.String(), "err", err)
		}
	}
	return nil
}
