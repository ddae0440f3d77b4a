package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/store"
)

// engineState is where the engine keeps its nonces, limits and history, and
// what runs beside it (pruning) until the command stops.
type engineState struct {
	kind    string
	ledger  faucet.Ledger
	limiter guard.Limiter
	history faucet.History
	owner   faucet.KeyOwner // nil: this process owns every key
	// spent remembers used proof-of-work challenges (shared by replicas on
	// Postgres).
	spent guard.SpentChallenges
	// btcOwner holds the BTC key's payout ledger: fenced on Postgres,
	// where replicas share it.
	btcOwner func(key string) btcfaucet.Owner
	// background runs until ctx ends (history and slot pruning).
	background func(ctx context.Context) error
	close      func() error
}

// pruneInterval is how often expired limit slots and old history go.
const pruneInterval = 10 * time.Minute

// openState opens what --store names: memory, an SQLite file, or Postgres.
// An unreachable or unwritable store fails here, at start, with a message
// naming it (a Postgres password never appears).
func openState(ctx context.Context, o serveOptions, logger *slog.Logger) (*engineState, error) {
	dsn := o.store
	if dsn == "" {
		dsn = defaultStorePath
		if o.devnet {
			dsn = storeMemory
		}
	}
	if o.historyRetain <= 0 {
		return nil, fmt.Errorf("--history-retention must be positive, got %s", o.historyRetain)
	}
	if dsn == storeMemory {
		return &engineState{
			kind: storeMemory, ledger: faucet.NewMemoryLedger(), limiter: guard.NewMemoryLimiter(),
			spent:      guard.NewMemorySpent(),
			btcOwner:   func(string) btcfaucet.Owner { return btcfaucet.SoleOwner(btcfaucet.NewMemoryLedger()) },
			background: func(ctx context.Context) error { <-ctx.Done(); return nil },
			close:      func() error { return nil },
		}, nil
	}
	st, err := store.Open(ctx, dsn, store.Options{Logger: logger.With("component", "store")})
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	es := &engineState{
		kind: st.Kind(), ledger: st, limiter: st, history: st, spent: st,
		background: func(ctx context.Context) error {
			st.RunPruner(ctx, o.historyRetain, pruneInterval, time.Now)
			return nil
		},
		close: st.Close,
	}
	switch st := st.(type) {
	case *store.SQLite:
		es.btcOwner = st.BTCOwner
	case *store.Postgres:
		es.btcOwner = st.BTCOwner
	}
	if owner, ok := any(st).(faucet.KeyOwner); ok && st.Kind() == "postgres" {
		es.owner = owner
	}
	return es, nil
}
