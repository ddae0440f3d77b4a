package faucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
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
	excluded keySet
	lastErr  *Error
	// recorded, when set (tests only), runs once the entry is in the
	// journal and before its first broadcast.
	recorded func(PendingTx)
}

// chooser picks a key and allocates a nonce on it that can afford spend,
// skipping excluded keys.
type chooser interface {
	choose(ctx context.Context, spend cost, excluded keySet) (*keyState, uint64, *Error)
}

// chooseFunc is a chooser of one function: a key fixed in advance (the
// treasury, a nonce-gap filler's), or a wrapped choice.
type chooseFunc func(ctx context.Context, spend cost, excluded keySet) (*keyState, uint64, *Error)

func (f chooseFunc) choose(ctx context.Context, spend cost, excluded keySet) (*keyState, uint64, *Error) {
	return f(ctx, spend, excluded)
}

// placed is a transaction the node holds or may hold.
type placed struct {
	tx PendingTx
	// lostAnswer is the broadcast's error when the node's answer was lost:
	// the tx is in doubt, recorded, and rebroadcast until its nonce confirms.
	lostAnswer error
}

// errBuild marks a placement whose transaction could not be built or signed.
var errBuild = errors.New("building the transaction failed")

// placer is the one path of every transaction: it holds what placing
// needs and nothing of the policies (drips, batches, refills, repairs)
// that call it.
type placer struct {
	pool    *keyPool
	journal *journal.Journal
	keys    keyKeeper
	// chain's tip starts a committed nonce's stuck clock.
	chain *chainView
	send  *broadcaster
	clk   clock.PassiveClock
	// sent wakes the poll loop when a transaction goes out (poller.sent).
	sent        chan<- struct{}
	maxAttempts int
	log         *slog.Logger
}

// keyKeeper is what placing and repairing ask of the keys' accounts
// (accounts): a fresh read of a key's account, and dropping a key another
// replica took over.
type keyKeeper interface {
	syncKey(ctx context.Context, k *keyState) error
	lose(k *keyState)
}

// chainFor is how a placement's transaction p reaches the node: the
// engine's broadcast, behind the test hook recorded when one is set.
func chainFor(b *broadcaster, recorded func(PendingTx), p *PendingTx) journal.Chain {
	if recorded == nil {
		return b.placing
	}
	return journal.Hooked{Chain: b.placing, Before: func([]byte) error {
		recorded(*p)
		return nil
	}}
}

// outcomeUnknown is true when the node may have accepted the tx although we
// got no answer: the request was sent (not refused at dial) and then timed
// out, was cut off or was cancelled. A definite HTTP answer is not unknown.
func outcomeUnknown(err error) bool {
	var te *node.TransportError
	return (errors.As(err, &te) || journal.Cut(err)) && !journal.NeverSent(err)
}

// broadcastTries is how often a placement sends the identical bytes while
// the node is unavailable: the node answers 200 for a tx already in its
// mempool, so that is idempotent. A resend (repair, resume) tries once;
// the next block tries again.
const broadcastTries = 3

// broadcaster sends the engine's transactions to the node, as a
// journal.Chain: placing (broadcastTries) and resending (once).
type broadcaster struct {
	node txBroadcaster
	// clk times the back-off between tries.
	clk             clock.Clock
	placing, resend journal.Chain
}

// txBroadcaster is the node's transaction endpoint.
type txBroadcaster interface {
	Broadcast(ctx context.Context, rawTx []byte) (string, error)
}

func newBroadcaster(n txBroadcaster, clk clock.Clock) *broadcaster {
	b := &broadcaster{node: n, clk: clk}
	b.placing, b.resend = stacksChain{b, broadcastTries}, stacksChain{b, 1}
	return b
}

type stacksChain struct {
	b     *broadcaster
	tries int
}

// Send submits raw, retrying the identical bytes on transient failures. An
// error that follows an attempt which may have reached the node is
// wrapped as maybeSent, so that a definite failure of a later retry does
// not hide an earlier unknown outcome.
func (c stacksChain) Send(ctx context.Context, raw []byte) error {
	backoff := 50 * time.Millisecond
	maybe := false
	var err error
	for try := 0; try < max(c.tries, 1); try++ {
		if _, err = c.b.node.Broadcast(ctx, raw); err == nil {
			return nil
		}
		maybe = maybe || outcomeUnknown(err)
		if !node.IsUnavailable(err) || journal.NeverSent(err) || try == c.tries-1 {
			break
		}
		select {
		case <-ctx.Done():
			return maybeSent(maybe, err)
		case <-c.b.clk.After(backoff):
		}
		backoff *= 2
	}
	return maybeSent(maybe, err)
}

// Judge: a transaction is in doubt when any attempt may have reached the
// node; otherwise the node surely does not hold it.
func (stacksChain) Judge(err error) journal.Verdict {
	var m *sentMaybe
	if errors.As(err, &m) || outcomeUnknown(err) {
		return journal.InDoubt
	}
	return journal.NotSent
}

// sentMaybe marks a broadcast error after an attempt that may have reached
// the node.
type sentMaybe struct{ err error }

func (m *sentMaybe) Error() string { return m.err.Error() }
func (m *sentMaybe) Unwrap() error { return m.err }

func maybeSent(maybe bool, err error) error {
	if maybe {
		return &sentMaybe{err}
	}
	return err
}

// place chooses a key and nonce, signs, and hands the transaction to the
// journal, which records it, broadcasts it and commits or forgets it; then
// it commits the nonce or classifies the node's refusal, retrying on
// another nonce or key up to MaxAttempts times.
//
// Crash safety is the journal's rule (package journal): the signed bytes
// are recorded (state broadcasting) before the first send, so a crash at
// any point leaves either no trace (the nonce was never used) or bytes
// that resuming rebroadcasts (the node answers 200 for a tx it holds, so
// that is idempotent). Nothing is paid twice and no nonce is lost. An
// answer lost in transit is success in doubt, never an error: an error
// would invite a retry and a second payment.
func (pc *placer) place(ctx context.Context, pl placement) (*placed, *Error) {
	excluded, lastErr := pl.excluded, pl.lastErr
	spend := costOf(pl.asset, pl.amount, pl.fee)
	for attempt := 0; attempt < pc.maxAttempts; attempt++ {
		k, nonce, ferr := pl.choose.choose(ctx, spend, excluded)
		if ferr != nil {
			if lastErr != nil && ferr.Reason != ReasonStoreUnavailable {
				return nil, lastErr // the key-specific failure explains more
			}
			return nil, ferr
		}
		tx, err := pl.build(k.key, nonce)
		if err != nil {
			pc.pool.release(k, nonce)
			return nil, failf(ReasonRejected, fmt.Errorf("%w: %w", errBuild, err), "could not sign the transaction")
		}
		p := &PendingTx{Sender: k.addr, Nonce: nonce, TxID: tx.TxID(), Raw: tx.Serialize(), Recipient: pl.to,
			Asset: pl.asset.OrSTX(), Amount: pl.amount, Fee: pl.fee, SentAt: pc.clk.Now(), State: TxBroadcasting}
		sent, rerr := pc.record(ctx, k, p, chainFor(pc.send, pl.recorded, p), &excluded)
		if rerr != nil {
			if rerr.Reason == ReasonBusy {
				lastErr = rerr
				continue // another replica took the key: try another one
			}
			return nil, rerr
		}
		if sent.Verdict != journal.NotSent {
			// In doubt, the entry stays "broadcasting": repair rebroadcasts
			// the bytes until the node answers or the nonce confirms.
			pc.commit(k, p)
			return &placed{tx: *p, lostAnswer: sent.Err}, nil
		}
		lastErr = pc.handleBroadcastError(ctx, k, p, sent.Err, &excluded)
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

// record hands p to the journal: recorded, broadcast, and committed or
// forgotten there. On a failed record the nonce is given back and nothing
// was sent; the error is ReasonBusy when another key may still be tried
// (another replica took this one over).
func (pc *placer) record(ctx context.Context, k *keyState, p *PendingTx, c journal.Chain, excluded *keySet) (journal.Sent, *Error) {
	e := p.entry()
	sent, err := pc.journal.Send(ctx, &e, c)
	if err == nil {
		p.State = e.State
		return sent, nil
	}
	pc.pool.release(k, p.Nonce)
	if errors.Is(err, journal.ErrNotOwner) {
		// Another replica took the key over: never send with it.
		pc.keys.lose(k)
		excluded.add(k)
		return sent, failf(ReasonBusy, err, "the faucet is busy; try again in a minute")
	}
	return sent, storeFailure(err, "record the transaction")
}

// commit moves an allocated nonce to pending once its tx is (or may be) at
// the node. The journal committed the entry first: a sync that confirms
// the nonce meanwhile finds it allocated, not pending, and so cannot
// forget the entry before that write.
func (pc *placer) commit(k *keyState, p *PendingTx) {
	k.commitPending(p, pc.chain.tip(), pc.clk.Now())
	select {
	case pc.sent <- struct{}{}:
	default: // the poll loop has a wake-up pending already
	}
}

// handleBroadcastError updates key state after a broadcast that surely did
// not place the tx at the node. It returns nil when the placement should
// simply be retried, or the error to report (or to keep as the last error
// while other keys are tried).
func (pc *placer) handleBroadcastError(ctx context.Context, k *keyState, p *PendingTx, err error, excluded *keySet) *Error {
	// The journal forgot the recorded bytes already (by txid, so never a
	// later drip's record for the same nonce).
	var rej *node.RejectionError
	if !errors.As(err, &rej) {
		pc.pool.release(k, p.Nonce)
		var de *node.DecodeError
		switch {
		case errors.As(err, &de):
			// A 400 "Failed to decode": the node refuses these very bytes.
			pc.log.Error("node could not decode the faucet transaction", "sender", k.addr.String(), "nonce", p.Nonce, "err", err)
			return failf(ReasonRejected, err, "the Stacks node refused the transaction")
		case errors.Is(err, context.Canceled):
			return failf(ReasonNodeUnavailable, err, "the request was cancelled")
		}
		return failf(ReasonNodeUnavailable, err, "the Stacks node is unavailable; try again shortly")
	}
	log := pc.log.With("sender", k.addr.String(), "nonce", p.Nonce, "reason", rej.Reason)
	switch rej.Reason {
	case node.ReasonConflictingNonceInMempool:
		// Another writer holds this nonce: mark it taken and move on.
		k.takenByOther(p.Nonce, pc.clk.Now())
		log.Warn("nonce already used in mempool; advancing")
		return nil
	case node.ReasonBadNonce:
		pc.pool.release(k, p.Nonce)
		if serr := pc.keys.syncKey(ctx, k); serr != nil {
			log.Warn("resync after BadNonce failed", "err", serr)
		}
		log.Warn("nonce behind the node; resynced")
		return nil
	case node.ReasonTooMuchChaining:
		pc.pool.release(k, p.Nonce)
		excluded.add(k)
		log.Warn("mempool chaining limit reached for key")
		return failf(ReasonBusy, err, "the faucet is busy; try again in a minute")
	case node.ReasonNotEnoughFunds:
		pc.pool.release(k, p.Nonce)
		k.setDry()
		excluded.add(k)
		log.Warn("node reports key cannot pay; marked dry")
		return failf(ReasonExhausted, err, "the faucet is out of funds")
	case node.ReasonServerFailureNoSuchChainTip, node.ReasonServerFailureDatabase, node.ReasonServerFailureOther:
		// The node blames itself (no chain tip while syncing, its database):
		// it is unavailable, our transaction is not at fault.
		pc.pool.release(k, p.Nonce)
		log.Warn("node failed to process the transaction", "err", err)
		return failf(ReasonNodeUnavailable, err, "the Stacks node is unavailable; try again shortly")
	default:
		pc.pool.release(k, p.Nonce)
		log.Error("node rejected faucet transaction", "err", err)
		return failf(ReasonRejected, err, "the Stacks node refused the transaction")
	}
}
