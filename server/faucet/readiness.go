package faucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// readiness says whether the faucet can serve a drip now, and logs when
// that changes, whoever asked (the poll loop after each poll, a readiness
// probe, the page).
type readiness struct {
	chain *chainView
	pool  *keyPool
	// accounts reads the keys' accounts before the first poll has.
	accounts accountSyncer
	// need is what a key must have available to pay a default drip at
	// the lowest fee; dripCost what one costs in the funding figures.
	need, dripCost uint64
	log            *slog.Logger
	watch          readyWatch
	// store is the shared store (nil: keys are this process's alone).
	store storePinger
	// handingOver: the replica's share of keys fell to none and it keeps
	// them only for the drain, paying what still arrives (HandingOver).
	handingOver atomic.Bool
}

// accountSyncer reads every owned key's account, repairing nothing.
type accountSyncer interface {
	syncAccounts(ctx context.Context)
}

// Keys reports every key's state.
func (f *Faucet) Keys() []KeyStatus { return f.pool.statuses() }

// Ready reports why the faucet cannot serve drips, or nil: the replica
// must not be handing its keys over, the node must be reachable and
// testnet, this replica must own a key, and one of its keys must afford a
// default drip. It reads accounts but never repairs.
func (f *Faucet) Ready(ctx context.Context) error { return f.readiness.check(ctx) }

// HandingOver implements journal.Handover: while on, the replica's share
// of keys fell to none and it keeps them only for the drain, so Ready
// fails (the Service stops sending drips here) while drips that still
// arrive are paid.
func (f *Faucet) HandingOver(on bool) {
	f.readiness.handingOver.Store(on)
	if on {
		// Logged now; the end is logged by the next check, which knows
		// what follows (no key, or ready again).
		f.readiness.noteReady(context.Background(), errHandingOver)
	}
}

// HandingKeysOver reports whether the replica is handing its keys over
// (HandingOver): its answers then ask clients to reconnect, through the
// Service, to a replica that keeps its keys.
func (f *Faucet) HandingKeysOver() bool { return f.readiness.handingOver.Load() }

// errHandingOver is Ready's error while the replica hands its keys over.
var errHandingOver = errors.New("this replica is handing its keys over to another replica")

// handOverErr is errHandingOver while handing over.
func (rd *readiness) handOverErr() error {
	if rd.handingOver.Load() {
		return errHandingOver
	}
	return nil
}

// check is Ready: the answer, its change logged.
func (rd *readiness) check(ctx context.Context) error {
	err := rd.ready(ctx)
	rd.noteReady(ctx, err)
	return err
}

// errNodeUnreachable is Ready's error when the node does not answer.
var errNodeUnreachable = errors.New("node unreachable")

func nodeUnreachable(err error) error {
	if err == nil {
		err = errors.New("no answer yet")
	}
	return fmt.Errorf("%w: %w", errNodeUnreachable, err)
}

// noteReady logs a change of readiness. An answer cut short by the
// caller's own deadline or cancellation says nothing about the faucet.
func (rd *readiness) noteReady(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	reason, changed := rd.watch.changed(err)
	switch {
	case !changed:
	case err != nil:
		rd.log.Warn("faucet not ready", "reason", reason, "err", err)
	default:
		fund := fundingOf(rd.pool.statuses(), rd.dripCost)
		rd.log.Info("faucet ready", "keys", fund.Keys, "drips_left", fund.DripsLeft)
	}
}

func (rd *readiness) ready(ctx context.Context) error {
	if err := rd.handOverErr(); err != nil {
		return err
	}
	ci, err := rd.chain.getInfo(ctx)
	if err != nil {
		return nodeUnreachable(err)
	}
	if err := rd.chain.allowed(ci.chainID); err != nil {
		return err
	}
	keys := rd.pool.statuses()
	if !slices.ContainsFunc(keys, func(s KeyStatus) bool { return s.Owned }) {
		if rd.storeUnreachable(ctx) {
			// No replica can own a key: all of them out of their Service,
			// clients would be refused a connection; in it, they are
			// answered 503 with Retry-After until the store is back.
			return nil
		}
		return errors.New("this replica owns no faucet key")
	}
	if !slices.ContainsFunc(keys, func(s KeyStatus) bool { return s.Owned && s.Synced }) {
		// Before the first poll, read the accounts rather than report "unfunded".
		rd.accounts.syncAccounts(ctx)
		keys = rd.pool.statuses()
	}
	for _, s := range keys {
		if s.Owned && s.Synced && !s.Dry && s.Available >= rd.need {
			return nil
		}
	}
	return errors.New("no faucet key is funded for a drip")
}

// storePinger is a shared store that can say whether it answers.
type storePinger interface {
	Ping(ctx context.Context) error
}

// storePingWait bounds readiness's look at the store, which a network cut
// leaves silent.
const storePingWait = time.Second

// storeUnreachable reports whether the replicas' shared store does not
// answer: then a replica owns no key because none can. (A replica cut off
// alone stays in its Service too, answering 503, until the store is back.)
func (rd *readiness) storeUnreachable(ctx context.Context) bool {
	if rd.store == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, storePingWait)
	defer cancel()
	return rd.store.Ping(ctx) != nil
}

// readyWatch remembers the faucet's last readiness, so that a change is
// logged once, whoever asked (the poll loop after each poll, a readiness
// probe, the page).
type readyWatch struct {
	mu      sync.Mutex
	checked bool
	reason  string // "" when ready
}

// changed records err's reason and reports whether it differs from the
// last one. A node outage is one reason whatever the transport said.
func (w *readyWatch) changed(err error) (reason string, changed bool) {
	switch {
	case err == nil:
	case errors.Is(err, errNodeUnreachable):
		reason = errNodeUnreachable.Error()
	default:
		reason = err.Error()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checked && reason == w.reason {
		return reason, false
	}
	w.checked, w.reason = true, reason
	return reason, true
}
