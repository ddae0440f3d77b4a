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
	// every change. It returns when ctx ends or ownership can no longer be
	// kept (the store is down); every key held was Lost by then.
	Run(ctx context.Context, keys []string, h Handler) error
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

// Router is one Handler for several payers: each key's changes go to the
// payer that registered it.
type Router struct {
	keys []string
	by   map[string]Handler
}

// Add routes keys to h. A key added twice goes to the last handler.
func (r *Router) Add(h Handler, keys ...string) {
	if r.by == nil {
		r.by = map[string]Handler{}
	}
	for _, k := range keys {
		if _, dup := r.by[k]; !dup {
			r.keys = append(r.keys, k)
		}
		r.by[k] = h
	}
}

// Keys lists the routed keys in the order they were added.
func (r *Router) Keys() []string { return slices.Clone(r.keys) }

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

// Keep runs o for r's keys until ctx ends, starting it again after pause
// on clk (nil: the real clock) whenever it fails (a store outage ends its
// session; every key was Lost).
func Keep(ctx context.Context, clk clock.Clock, o Owner, r *Router, pause time.Duration, log *slog.Logger) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	keys := r.Keys()
	for {
		err := o.Run(ctx, keys, r)
		// An Owner loses every key when it returns; saying so again is
		// harmless and covers one that did not.
		for _, k := range keys {
			r.Lost(k)
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("key ownership session ended; retrying", "err", err, "retry_in", pause.String())
		select {
		case <-ctx.Done():
			return
		case <-clk.After(pause):
		}
	}
}
