package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/store"
)

// engineState is where the engine keeps its nonces, limits and history, and
// what runs beside it (pruning) until the command stops.
type engineState struct {
	kind string
	// journal records every transaction of every chain before it is sent;
	// its writes are fenced by owner on Postgres, where replicas share it.
	journal journal.Store
	limiter guard.Limiter
	history faucet.History
	owner   journal.Owner // nil: this process owns every key
	// peers is where replicas find each other (nil: one process).
	peers peerStore
	// spent remembers used proof-of-work challenges (shared by replicas on
	// Postgres).
	spent guard.SpentChallenges
	// background runs until ctx ends (history and slot pruning).
	background func(ctx context.Context) error
	close      func() error
}

// pruneInterval is how often expired limit slots and old history go.
const pruneInterval = 10 * time.Minute

// openState opens what --store names: memory, an SQLite file, or Postgres,
// on clk, the process's clock (the spent challenges' expiry, the pruner).
// An unreachable or unwritable store fails here, at start, with a message
// naming it (a Postgres password never appears).
func openState(ctx context.Context, clk clock.WithTicker, o options.Store, devnet bool, logger *slog.Logger) (*engineState, error) {
	dsn := o.Resolved(devnet)
	if dsn == options.StoreMemory {
		return &engineState{
			kind: options.StoreMemory, journal: journal.NewMemoryStore(), limiter: guard.NewMemoryLimiter(),
			spent:      guard.NewMemorySpent(clk),
			background: func(ctx context.Context) error { <-ctx.Done(); return nil },
			close:      func() error { return nil },
		}, nil
	}
	st, err := store.Open(ctx, dsn, store.Options{Logger: logger.With("component", "store"), Clock: clk})
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	es := &engineState{
		kind: st.Kind(), journal: st, limiter: st, history: st, spent: st,
		background: func(ctx context.Context) error {
			st.RunPruner(ctx, o.HistoryRetention, pruneInterval)
			return nil
		},
		close: st.Close,
	}
	if owner, ok := any(st).(journal.Owner); ok && st.Kind() == store.KindPostgres {
		es.owner = owner
		es.peers, _ = any(st).(peerStore)
	}
	return es, nil
}

// keepOwnership runs the store's key ownership for every payer's keys (the
// Stacks engine's, the BTC faucet's) until ctx ends; without an owner
// (one process) every key is this process's and it just waits. Once leave
// is closed the replica leaves the share and keeps its keys until ctx
// ends; one whose share falls to none drains for drain first
// (journal.Session).
func (s *engineState) keepOwnership(ctx context.Context, leave <-chan struct{}, drain time.Duration, clk clock.Clock,
	f *faucet.Faucet, btc *btcfaucet.Faucet, logger *slog.Logger) error {
	if s.owner == nil {
		<-ctx.Done()
		return nil
	}
	var r journal.Router
	// Each kind of key is shared out on its own: every replica gets
	// sending keys when there are enough, whoever holds the treasury or
	// the Bitcoin key.
	for _, g := range f.JournalKeyGroups() {
		r.Add(f, g...)
	}
	if btc != nil {
		r.Add(btc, btc.Address().String())
	}
	journal.KeepSession(ctx, clk, s.owner, &r, journal.Session{Leave: leave, Drain: drain}, time.Second, logger.With("component", "ownership"))
	return nil
}
