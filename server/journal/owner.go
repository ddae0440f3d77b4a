package journal

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"k8s.io/utils/clock"
)

// Ownership: when several replicas share a store, each key (a Stacks
// sending key, the treasury, the Bitcoin key) has exactly one writer at
// any moment. An Owner (store.Postgres) spreads the keys over the live
// replicas and tells a Handler of every change; the store fences each
// write with the owner's epoch, so a replica that lost a key cannot write,
// and hence cannot send, even before it notices. Without an Owner (one
// process on SQLite or in memory) every key is this process's.

// Owner spreads keys over the replicas sharing a store.
type Owner interface {
	// Run keeps this replica's share of keys until ctx ends, telling h of
	// every change, by s's rules. It returns when ctx ends or ownership
	// can no longer be kept (the store is down); every key held was
	// released or Lost by then.
	Run(ctx context.Context, keys []string, h Handler, s Session) error
}

// Session is how a replica takes part in ownership; the zero Session is a
// member until its context ends that gives keys up at once.
type Session struct {
	// Leave, once closed (at SIGTERM), withdraws the replica from the
	// share at once, so the others' shares are counted without it, while
	// it keeps the keys it holds until Run's context ends (what is in
	// flight finishes with them); then it releases them. nil: never.
	Leave <-chan struct{}
	// Drain is how long a replica whose share falls to no key keeps its
	// last keys, still paying but telling its handlers it is handing over
	// (Handover) so that it stops looking ready and traffic moves to the
	// other replicas before it gives them up. 0: give them up at once.
	Drain time.Duration
	// Groups partitions the keys into groups each shared out on its own
	// (the sending keys, the treasury, the Bitcoin key), so that no
	// replica ends up with only a key of one kind while another holds all
	// of another. nil: one group of every key.
	Groups [][]string
}

// Handler is a payer's side of ownership.
type Handler interface {
	// Acquired: the key is ours. The payer loads its entries, resolves
	// those in doubt and starts using it; it returns once done.
	Acquired(ctx context.Context, key string)
	// Releasing: the key is about to be given up. The payer stops using it
	// and returns once nothing it started with the key is under way.
	Releasing(ctx context.Context, key string)
	// Lost: ownership ended without notice. The payer stops using the key
	// at once; the store refuses any write still under way.
	Lost(key string)
}

// Handover is a Handler that takes part in draining: HandingOver(true)
// says this replica's share fell to no key and it keeps the keys it holds
// for the Session's Drain only, still paying what arrives, so it should
// stop looking ready; HandingOver(false) says that is over (the keys were
// given up, or the share came back). Calls are idempotent.
type Handover interface {
	HandingOver(on bool)
}

// Router is one Handler for several payers: each key's changes go to the
// payer that registered it.
type Router struct {
	keys []string
	by   map[string]Handler
	all  []Handler // every Add's handler, for HandingOver
	// groups are the keys of each Add, shared out on their own.
	groups [][]string
}

// Add routes keys to h. A key added twice goes to the last handler. The
// keys of one Add are one group: replicas share each group out on its own
// (Session.Groups), so add keys of different kinds (sending keys, a
// treasury, a Bitcoin key) in Adds of their own.
func (r *Router) Add(h Handler, keys ...string) {
	if r.by == nil {
		r.by = map[string]Handler{}
	}
	r.all = append(r.all, h)
	r.groups = append(r.groups, slices.Clone(keys))
	for _, k := range keys {
		if _, dup := r.by[k]; !dup {
			r.keys = append(r.keys, k)
		}
		r.by[k] = h
	}
}

// Keys lists the routed keys in the order they were added.
func (r *Router) Keys() []string { return slices.Clone(r.keys) }

// Groups lists the keys of each Add.
func (r *Router) Groups() [][]string { return slices.Clone(r.groups) }

// Acquired implements Handler.
func (r *Router) Acquired(ctx context.Context, key string) {
	if h := r.by[key]; h != nil {
		h.Acquired(ctx, key)
	}
}

// Releasing implements Handler.
func (r *Router) Releasing(ctx context.Context, key string) {
	if h := r.by[key]; h != nil {
		h.Releasing(ctx, key)
	}
}

// Lost implements Handler.
func (r *Router) Lost(key string) {
	if h := r.by[key]; h != nil {
		h.Lost(key)
	}
}

// HandingOver implements Handover: every handler that takes part hears it
// (one added twice hears it twice; calls are idempotent).
func (r *Router) HandingOver(on bool) {
	for _, h := range r.all {
		if d, ok := h.(Handover); ok {
			d.HandingOver(on)
		}
	}
}

// Keep is KeepSession with the zero Session: a member until ctx ends.
func Keep(ctx context.Context, clk clock.Clock, o Owner, r *Router, pause time.Duration, log *slog.Logger) {
	KeepSession(ctx, clk, o, r, Session{}, pause, log)
}

// KeepSession runs o for r's keys by s's rules until ctx ends, starting it
// again after pause on clk (nil: the real clock) whenever it fails (a
// store outage ends its session; every key was Lost) — unless the replica
// has left (s.Leave), when there is nothing to take part in any more.
func KeepSession(ctx context.Context, clk clock.Clock, o Owner, r *Router, s Session, pause time.Duration, log *slog.Logger) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	keys := r.Keys()
	if s.Groups == nil {
		s.Groups = r.Groups()
	}
	for {
		err := o.Run(ctx, keys, r, s)
		// An Owner gives up every key when it returns; saying so again is
		// harmless and covers one that did not.
		for _, k := range keys {
			r.Lost(k)
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-s.Leave:
			<-ctx.Done()
			return
		default:
		}
		log.Warn("key ownership session ended; retrying", "err", err, "retry_in", pause.String())
		select {
		case <-ctx.Done():
			return
		case <-s.Leave:
			<-ctx.Done()
			return
		case <-clk.After(pause):
		}
	}
}
