package store_test

import (
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// KeyHolder names the replica holding a key, where it advertised it
// answers, and says so only while its lock is held: after the holder
// closes, the row still names it but nobody holds the key, and the other
// replica's taking it over names that one.
func TestPostgresKeyHolderFollowsOwnership(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	opts := store.Options{OwnershipInterval: 50 * time.Millisecond}
	s1 := openPostgresURI(t, uri, opts)
	key := keysN(1)[0]
	if url, held, err := s1.KeyHolder(t.Context(), key); err != nil || held || url != "" {
		t.Fatalf("before anyone owns it: %q, %v, %v", url, held, err)
	}
	if err := s1.AdvertisePeer(t.Context(), "http://10.0.0.1:3998"); err != nil {
		t.Fatal(err)
	}
	c := newCluster()
	h1 := c.replica("r1")
	errc1 := runOwner(t, t.Context(), s1, []string{key}, h1)
	eventually.True(t, 10*time.Second, "r1 holds the key", func() bool { return h1.owned() == 1 })
	if url, held, err := s1.KeyHolder(t.Context(), key); err != nil || !held || url != "http://10.0.0.1:3998" {
		t.Fatalf("held by r1: %q, %v, %v", url, held, err)
	}

	s2 := openPostgresURI(t, uri, opts)
	if err := s2.AdvertisePeer(t.Context(), "http://10.0.0.2:3998"); err != nil {
		t.Fatal(err)
	}
	h2 := c.replica("r2")
	runOwner(t, t.Context(), s2, []string{key}, h2)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := waitRun(t, errc1); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "r2 takes the key over", func() bool { return h2.owned() == 1 })
	if url, held, err := s2.KeyHolder(t.Context(), key); err != nil || !held || url != "http://10.0.0.2:3998" {
		t.Fatalf("held by r2: %q, %v, %v", url, held, err)
	}
	if err := s2.ForgetPeer(t.Context()); err != nil {
		t.Fatal(err)
	}
	if url, held, err := s2.KeyHolder(t.Context(), key); err != nil || !held || url != "" {
		t.Fatalf("a holder that advertised nothing: %q, %v, %v", url, held, err)
	}
	c.check(t)
}
