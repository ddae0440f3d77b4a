package store_test

import (
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// Each group of keys is shared out on its own: two replicas with two
// sending keys, a treasury and a Bitcoin key each hold one sending key,
// whoever holds the other two. Shared as one group of four, a replica
// could hold the treasury and the Bitcoin key alone and pay no drip.
func TestPostgresOwnershipSharesEachGroup(t *testing.T) {
	uri := pgtest.Shared(t).CreateDB(t)
	opts := store.Options{OwnershipInterval: 50 * time.Millisecond}
	keys := keysN(4)
	sending, treasury, btc := keys[:2], keys[2:3], keys[3:]
	sess := journal.Session{Groups: [][]string{sending, treasury, btc}}
	c := newCluster()
	h1, h2 := c.replica("r1"), c.replica("r2")
	runOwnerSession(t, t.Context(), openPostgresURI(t, uri, opts), keys, h1, sess)
	runOwnerSession(t, t.Context(), openPostgresURI(t, uri, opts), keys, h2, sess)
	owns := func(h *replica, ks []string) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, k := range ks {
			if c.owner[k] == h.name {
				n++
			}
		}
		return n
	}
	eventually.True(t, 10*time.Second, "one sending key each, the treasury and the Bitcoin key held", func() bool {
		return owns(h1, sending) == 1 && owns(h2, sending) == 1 &&
			owns(h1, treasury)+owns(h2, treasury) == 1 && owns(h1, btc)+owns(h2, btc) == 1
	})
	c.check(t)
}
