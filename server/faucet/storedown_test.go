package faucet_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// A replica of a shared store owns no key while the store is down (nobody
// can hold one): it stays ready, so that the Service keeps routing to the
// replicas and clients are answered 503 with Retry-After rather than
// refused a connection. With the store up, owning no key is not ready, as
// before: the keys are with other replicas, or not taken yet.
func TestNoKeyWhileTheStoreIsDownIsReady(t *testing.T) {
	pg := pgtest.Start(t)
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, pg.CreateDB(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{key.TestnetAddress(): 1_000_000_000_000}})
	srv := httptest.NewServer(dn.Handler())
	t.Cleanup(srv.Close)
	client, err := node.New(srv.URL, rpcclient.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Shared, and no owner runs: the engine owns no key.
	f, err := faucet.New(faucet.Config{Keys: []*stacks.PrivateKey{key}, Node: client,
		State: faucet.State{Journal: st, History: st, Shared: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Ready(ctx); err == nil {
		t.Fatal("ready without a key while the store answers")
	}

	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := f.Ready(ctx); err != nil {
		t.Fatalf("not ready while the store is down: %v; want ready, to answer 503 rather than be taken out of the Service", err)
	}

	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	if err := f.Ready(ctx); err == nil {
		t.Fatal("ready without a key once the store is back")
	}
}
