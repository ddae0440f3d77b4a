package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunMain(m)) }

// subject is one implementation of the state interfaces under contract.
type subject struct {
	journal journal.Store
	limiter guard.Limiter
	history faucet.History // nil: not implemented (memory)
	byTxID  func(ctx context.Context, txid string) (faucet.DripRecord, bool, error)
}

// opener makes a fresh, empty subject for one test.
type opener func(t *testing.T) subject

// The same contract, whatever keeps the state.
func TestContractMemory(t *testing.T) {
	runContract(t, func(*testing.T) subject {
		return subject{journal: journal.NewMemoryStore(), limiter: guard.NewMemoryLimiter()}
	})
}

func TestContractSQLite(t *testing.T) {
	runContract(t, func(t *testing.T) subject { return storeSubject(openSQLite(t)) })
	// One process per file (the store's lock sees to it), so every
	// caller shares the one store.
	runChallengeContract(t, func(t *testing.T, n int, clk clock.WithTicker) []challengeStore {
		s := openSQLitePath(t, filepath.Join(t.TempDir(), "faucet.db"), store.Options{Clock: clk})
		out := make([]challengeStore, n)
		for i := range out {
			out[i] = s
		}
		return out
	})
}

func TestContractPostgres(t *testing.T) {
	runContract(t, func(t *testing.T) subject { return storeSubject(openPostgres(t)) })
	// Two replicas on one database.
	runChallengeContract(t, func(t *testing.T, n int, clk clock.WithTicker) []challengeStore {
		uri := pgtest.Shared(t).CreateDB(t)
		out := make([]challengeStore, n)
		for i := range out {
			out[i] = openPostgresURI(t, uri, store.Options{Clock: clk})
		}
		return out
	})
}

func storeSubject(s interface {
	journal.Store
	guard.Limiter
	faucet.History
	DripByTxID(context.Context, string) (faucet.DripRecord, bool, error)
}) subject {
	return subject{journal: s, limiter: s, history: s, byTxID: s.DripByTxID}
}

func runContract(t *testing.T, open opener) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, subject)
	}{
		{"JournalRoundTrip", testJournalRoundTrip},
		{"JournalUpsert", testJournalUpsert},
		{"JournalFeeBumpDelete", testJournalFeeBumpDelete},
		{"JournalDeleteBelow", testJournalDeleteBelow},
		{"JournalKeysIsolated", testJournalKeysIsolated},
		{"LimiterConcurrentExact", testLimiterConcurrentExact},
		{"LimiterAllOrNothing", testLimiterAllOrNothing},
		{"LimiterRelease", testLimiterRelease},
		{"LimiterWait", testLimiterWait},
		{"LimiterDisabledBuckets", testLimiterDisabledBuckets},
		{"LimiterPeek", testLimiterPeek},
		{"BudgetScalesAndRefills", testBudgetScalesAndRefills},
		{"BudgetAllOrNothing", testBudgetAllOrNothing},
		{"BudgetRelease", testBudgetRelease},
		{"BudgetShares", testBudgetShares},
		{"BudgetConcurrentExact", testBudgetConcurrentExact},
		{"History", testHistory},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, open(t))
		})
	}
}

func testAddr(i byte) stacks.Address {
	return stacks.Address{Version: stacks.AddressVersionTestnetSingleSig, Hash160: [20]byte{i, 0xfa, 0x0c, 0xe7, 19: i}}
}

func testTxID(i byte) stacks.TxID {
	var id stacks.TxID
	for j := range id {
		id[j] = i ^ byte(j*7)
	}
	return id
}

// stxKey is a Stacks sending key's journal key (an ST… address); btcKey a
// Bitcoin key's (a bcrt1… address).
func stxKey(i byte) string { return testAddr(i).String() }

func btcKey(t testing.TB, i byte) string {
	t.Helper()
	a, err := btcutil.NewAddressWitnessPubKeyHash(bytes.Repeat([]byte{i}, 20), &chaincfg.RegressionNetParams)
	if err != nil {
		t.Fatal(err)
	}
	return a.EncodeAddress()
}

// stxEntryMeta is the JSON of a Stacks entry's Meta, as package faucet
// writes it (stxMeta in server/faucet/ledger.go).
func stxEntryMeta(recipient, asset string, amount, fee uint64, rebroadcasts, replacements int) []byte {
	return fmt.Appendf(nil, `{"recipient":%q,"asset":%q,"amount":%d,"fee":%d,"rebroadcasts":%d,"replacements":%d}`,
		recipient, asset, int64(amount), int64(fee), rebroadcasts, replacements)
}

// sameEntry compares journal entries field by field: times by instant,
// bytes exactly (Raw and Meta alike: the store keeps them as they are).
func sameEntry(t *testing.T, got, want journal.Entry) {
	t.Helper()
	g, w := got, want
	if !bytes.Equal(g.Raw, w.Raw) {
		t.Errorf("%s/%s: raw %x, want %x", w.Key, w.TxID, g.Raw, w.Raw)
	}
	if !bytes.Equal(g.Meta, w.Meta) {
		t.Errorf("%s/%s: meta %q, want %q", w.Key, w.TxID, g.Meta, w.Meta)
	}
	if !g.SentAt.Equal(w.SentAt) {
		t.Errorf("%s/%s: sent at %v, want %v", w.Key, w.TxID, g.SentAt, w.SentAt)
	}
	g.Raw, w.Raw, g.Meta, w.Meta = nil, nil, nil, nil
	if g.Key != w.Key || g.TxID != w.TxID || g.Seq != w.Seq || g.State != w.State || g.Replaces != w.Replaces {
		t.Errorf("entry\n got %+v\nwant %+v", g, w)
	}
}

// sameEntries compares a List with the entries it should return, in order.
func sameEntries(t *testing.T, what string, got []journal.Entry, want ...journal.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d:\n got %s\nwant %s", what, len(got), len(want), entryIDs(got), entryIDs(want))
	}
	for i := range want {
		sameEntry(t, got[i], want[i])
	}
}

// entryIDs lists entries as seq/txid, for messages.
func entryIDs(es []journal.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, " %d/%.8s", e.Seq, e.TxID)
	}
	return b.String()
}

func list(t *testing.T, s journal.Store, key string) []journal.Entry {
	t.Helper()
	got, err := s.List(t.Context(), key)
	if err != nil {
		t.Fatalf("list %s: %v", key, err)
	}
	return got
}

func put(t *testing.T, s journal.Store, es ...journal.Entry) {
	t.Helper()
	for _, e := range es {
		if err := s.Put(t.Context(), e); err != nil {
			t.Fatalf("put %s/%s seq %d: %v", e.Key, e.TxID, e.Seq, err)
		}
	}
}

// Every field comes back as it was put, Seq as a full uint64 (the stores
// keep its bits in a signed column), and List orders by Seq as a uint64,
// then SentAt, then TxID.
func testJournalRoundTrip(t *testing.T, s subject) {
	a := stxKey(1)
	contract := stacks.Principal{Address: testAddr(9), ContractName: "faucet-sink_v2"}
	all := make([]byte, 256) // every byte value, NUL included
	for i := range all {
		all[i] = byte(255 - i)
	}
	at := time.Unix(1_700_000_000, 123_456_789)
	want := []journal.Entry{
		{Key: a, TxID: testTxID(0).String(), Seq: 0, Raw: []byte{0}, State: journal.Pending, SentAt: time.Unix(1, 1),
			Meta: stxEntryMeta(testAddr(7).String(), "stx", 1, 1, 0, 0)},
		{Key: a, TxID: testTxID(2).String(), Seq: 2, Raw: []byte{0, 1, 0, 255}, State: journal.Pending, SentAt: at,
			Meta: stxEntryMeta(testAddr(7).String(), "stx", math.MaxUint64, 180, 3, 0)},
		// A fee bump: the same Seq, another txid, 1ns later (the first's
		// time is in another zone); it names the one it replaces.
		{Key: a, TxID: testTxID(5).String(), Seq: 5, Raw: all, State: journal.Broadcasting,
			SentAt: time.Date(2031, 2, 3, 4, 5, 6, 7, time.FixedZone("x", 3600)),
			Meta:   stxEntryMeta(contract.String(), "sbtc", 1<<63, math.MaxInt64, 0, 2)},
		{Key: a, TxID: testTxID(55).String(), Seq: 5, Raw: []byte{5, 5}, State: journal.Broadcasting,
			SentAt: time.Date(2031, 2, 3, 3, 5, 6, 8, time.UTC), Replaces: testTxID(5).String(),
			Meta: stxEntryMeta(contract.String(), "sbtc", 1<<63, math.MaxInt64, 0, 3)},
		// Same Seq and SentAt: by TxID ("0b…" before "f0…").
		{Key: a, TxID: "0b" + strings.Repeat("0", 62), Seq: 7, Raw: []byte{7}, State: journal.Pending, SentAt: at,
			Meta: []byte(`{"z": 1, "a": ["\u00e9", "é", null], "nested": {"k": "v"}}`)},
		{Key: a, TxID: "f0" + strings.Repeat("0", 62), Seq: 7, Raw: []byte{7, 7}, State: journal.Pending, SentAt: at,
			Meta: []byte(`{}`)},
		// The largest int64, then beyond it: still in uint64 order.
		{Key: a, TxID: testTxID(8).String(), Seq: math.MaxInt64, Raw: []byte{8}, State: journal.Pending, SentAt: time.Unix(3, 0),
			Meta: []byte(`{"n":1}`)},
		{Key: a, TxID: testTxID(9).String(), Seq: 1 << 63, Raw: []byte{9}, State: journal.Pending, SentAt: time.Unix(2, 0),
			Meta: []byte(`{"n":2}`)},
		{Key: a, TxID: testTxID(10).String(), Seq: 1<<63 + 1, Raw: []byte{10}, State: journal.Pending,
			Meta: []byte(`{"n":3}`)}, // no time
		{Key: a, TxID: testTxID(11).String(), Seq: math.MaxUint64, Raw: bytes.Repeat([]byte{0xab}, 100_000),
			State: journal.Broadcasting, SentAt: time.Unix(0, 1), Meta: []byte(`{"n":4}`)},
	}
	// Put in a scrambled order.
	for _, i := range []int{7, 3, 0, 9, 5, 2, 8, 4, 1, 6} {
		put(t, s.journal, want[i])
	}
	sameEntries(t, "list", list(t, s.journal, a), want...)
	// Listing twice gives the same; an unknown key has nothing.
	sameEntries(t, "list again", list(t, s.journal, a), want...)
	if got := list(t, s.journal, stxKey(3)); len(got) != 0 {
		t.Fatalf("unknown key: %s", entryIDs(got))
	}
	// A List's entries are copies: changing them changes nothing stored.
	got := list(t, s.journal, a)
	got[1].Raw[0], got[1].Meta[0] = 0xee, 'X'
	sameEntries(t, "list after changing a listed entry", list(t, s.journal, a), want...)
}

// Put replaces every field of the entry (Key, TxID).
func testJournalUpsert(t *testing.T, s subject) {
	a := stxKey(1)
	e := journal.Entry{Key: a, TxID: testTxID(7).String(), Seq: 7, Raw: []byte{1, 2, 3}, State: journal.Broadcasting,
		SentAt: time.Unix(100, 0), Meta: stxEntryMeta(testAddr(5).String(), "stx", 500, 10, 0, 0)}
	put(t, s.journal, e)
	e2 := e
	e2.Seq, e2.Raw, e2.State, e2.SentAt, e2.Replaces = 1<<63+7, []byte{9}, journal.Pending, time.Unix(200, 999_999_999), testTxID(70).String()
	e2.Meta = stxEntryMeta(testAddr(5).String(), "stx", 500, 10, 1, 1)
	put(t, s.journal, e2)
	sameEntries(t, "after the upsert", list(t, s.journal, a), e2)
	// Back to the first: every field again, Replaces cleared.
	put(t, s.journal, e)
	sameEntries(t, "after the second upsert", list(t, s.journal, a), e)
	// Marking it pending, as the journal's commit does: the same entry.
	e.State = journal.Pending
	put(t, s.journal, e)
	sameEntries(t, "after the commit", list(t, s.journal, a), e)
}

// A fee bump: two entries at one Seq, with different txids, are both
// kept; Delete by txid removes one and leaves the other.
func testJournalFeeBumpDelete(t *testing.T, s subject) {
	ctx := t.Context()
	a, b := stxKey(1), btcKey(t, 1)
	orig := journal.Entry{Key: a, TxID: testTxID(7).String(), Seq: 7, Raw: []byte{1, 2, 3}, State: journal.Pending,
		SentAt: time.Unix(100, 0), Meta: stxEntryMeta(testAddr(5).String(), "stx", 500, 10, 0, 0)}
	bump := orig
	bump.TxID, bump.Raw, bump.State, bump.SentAt, bump.Replaces = testTxID(77).String(), []byte{4, 5}, journal.Broadcasting,
		time.Unix(100, 1), orig.TxID
	bump.Meta = stxEntryMeta(testAddr(5).String(), "stx", 500, 20, 0, 1)
	next := orig
	next.TxID, next.Seq = testTxID(8).String(), 8
	// The same txid under the Bitcoin key: another entry.
	other := orig
	other.Key = b
	put(t, s.journal, bump, next, orig, other)
	sameEntries(t, "both at one seq", list(t, s.journal, a), orig, bump, next)

	if err := s.journal.Delete(ctx, a, orig.TxID); err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "after deleting the replaced one", list(t, s.journal, a), bump, next)
	sameEntries(t, "the other key after a delete of the same txid", list(t, s.journal, b), other)
	// Deleting what is not there is no error.
	for _, k := range [][2]string{{a, orig.TxID}, {stxKey(4), orig.TxID}, {a, "00"}, {"", ""}} {
		if err := s.journal.Delete(ctx, k[0], k[1]); err != nil {
			t.Fatalf("delete %q/%q: %v", k[0], k[1], err)
		}
	}
	// The replacement is refused: the replaced entry is put back, and the
	// replacement deleted.
	put(t, s.journal, orig)
	if err := s.journal.Delete(ctx, a, bump.TxID); err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "after deleting the replacement", list(t, s.journal, a), orig, next)
	sameEntries(t, "the other key at the end", list(t, s.journal, b), other)
}

// DeleteBelow removes what a block confirmed: a key's entries below a Seq
// (compared as uint64), none of another key's.
func testJournalDeleteBelow(t *testing.T, s subject) {
	ctx := t.Context()
	a, b, c := stxKey(1), stxKey(2), btcKey(t, 1)
	entry := func(key string, seq uint64, id byte) journal.Entry {
		return journal.Entry{Key: key, TxID: testTxID(id).String(), Seq: seq, Raw: []byte{id}, State: journal.Pending,
			SentAt: time.Unix(1+int64(id), 0), Meta: []byte(`{}`)}
	}
	var as, bs, cs []journal.Entry
	for i, seq := range []uint64{0, 9, 10, 11, 11, 12, math.MaxInt64, 1 << 63, math.MaxUint64} {
		as = append(as, entry(a, seq, byte(i)))
		bs = append(bs, entry(b, seq, byte(i)))
		cs = append(cs, entry(c, seq, byte(i)))
	}
	put(t, s.journal, as...)
	put(t, s.journal, bs...)
	put(t, s.journal, cs...)

	below := func(key string, seq uint64) {
		t.Helper()
		if err := s.journal.DeleteBelow(ctx, key, seq); err != nil {
			t.Fatalf("delete %s below %d: %v", key, seq, err)
		}
	}
	below(a, 0)
	sameEntries(t, "below 0", list(t, s.journal, a), as...)
	below(a, 11)
	sameEntries(t, "below 11", list(t, s.journal, a), as[3:]...)
	below(a, 11) // again: nothing more
	sameEntries(t, "below 11 again", list(t, s.journal, a), as[3:]...)
	below(a, 12)
	sameEntries(t, "below 12", list(t, s.journal, a), as[5:]...)
	// Beyond int64: 2^63 is above every smaller Seq, below the larger.
	below(a, 1<<63)
	sameEntries(t, "below 2^63", list(t, s.journal, a), as[7:]...)
	below(a, math.MaxUint64)
	sameEntries(t, "below the largest", list(t, s.journal, a), as[8:]...)
	// The other keys, Stacks and Bitcoin, are untouched.
	sameEntries(t, "another Stacks key", list(t, s.journal, b), bs...)
	sameEntries(t, "the Bitcoin key", list(t, s.journal, c), cs...)

	below(c, 1)
	sameEntries(t, "the Bitcoin key below 1", list(t, s.journal, c), cs[1:]...)
	below(b, 1<<63+1)
	sameEntries(t, "another key below 2^63+1", list(t, s.journal, b), bs[8:]...)
	below(stxKey(9), math.MaxUint64) // an unknown key
	sameEntries(t, "the first key at the end", list(t, s.journal, a), as[8:]...)
}

// The keys of both chains share the store, never their entries: a Stacks
// and a Bitcoin key, each with a payout of its own, the same txid under
// both, writes to one unseen from the other.
func testJournalKeysIsolated(t *testing.T, s subject) {
	ctx := t.Context()
	stx, btc := stxKey(1), btcKey(t, 1)
	if !strings.HasPrefix(stx, "ST") || !strings.HasPrefix(btc, "bcrt1") {
		t.Fatalf("keys %q and %q: want an ST… and a bcrt1… address", stx, btc)
	}
	payout := `{"coins":[{"txid":"` + strings.Repeat("ab", 32) + `","vout":2,"value":5000000000,"pk_script":"0014` +
		strings.Repeat("01", 20) + `"}],"outputs":[{"address":"bcrt1qexample","amount":4611686018427387907}],"fee":1234,"depth":2}`
	shared := testTxID(42).String()
	st := []journal.Entry{
		{Key: stx, TxID: shared, Seq: 3, Raw: []byte{0x80, 0x80}, State: journal.Pending, SentAt: time.Unix(1_700_000_000, 5),
			Meta: stxEntryMeta(testAddr(7).String(), "stx", 5, 180, 0, 0)},
	}
	bt := []journal.Entry{
		{Key: btc, TxID: testTxID(43).String(), Seq: 1, Raw: bytes.Repeat([]byte{1, 0xff, 0}, 70), State: journal.Pending,
			SentAt: time.Unix(1_700_000_000, 987_654_321), Meta: []byte(payout)},
		{Key: btc, TxID: shared, Seq: 2, Raw: []byte{2, 0xff, 0}, State: journal.Broadcasting,
			SentAt: time.Unix(1_700_000_001, 0), Replaces: testTxID(44).String(), Meta: []byte(payout)},
	}
	put(t, s.journal, bt[1], st[0], bt[0])
	sameEntries(t, "the Stacks key", list(t, s.journal, stx), st...)
	sameEntries(t, "the Bitcoin key", list(t, s.journal, btc), bt...)
	// Deleting the shared txid under one key leaves the other's.
	if err := s.journal.Delete(ctx, btc, shared); err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "the Stacks key after the Bitcoin delete", list(t, s.journal, stx), st...)
	sameEntries(t, "the Bitcoin key after its delete", list(t, s.journal, btc), bt[0])
	if err := s.journal.DeleteBelow(ctx, stx, math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	sameEntries(t, "the Stacks key after its DeleteBelow", list(t, s.journal, stx))
	sameEntries(t, "the Bitcoin key after the Stacks DeleteBelow", list(t, s.journal, btc), bt[0])
	// Keys are compared exactly.
	for _, k := range []string{strings.ToLower(stx), strings.ToUpper(btc), btc + " ", stx[:len(stx)-1]} {
		if got := list(t, s.journal, k); len(got) != 0 {
			t.Fatalf("key %q lists %s", k, entryIDs(got))
		}
	}
}

var errorf = fmt.Errorf

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func bucket(key string, n int, w time.Duration) guard.Bucket {
	return guard.Bucket{Key: key, Limit: guard.Limit{Requests: n, Window: w}}
}

func reserve(t *testing.T, l guard.Limiter, now time.Time, bs ...guard.Bucket) (guard.Reservation, time.Duration, bool) {
	t.Helper()
	r, wait, ok, err := l.Reserve(t.Context(), now, bs)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	return r, wait, ok
}

// concurrentReserve runs n Reserve calls at once, spread over limiters,
// and returns how many succeeded.
func concurrentReserve(t *testing.T, limiters []guard.Limiter, n int, now time.Time, bs ...guard.Bucket) int {
	t.Helper()
	var ok atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			r, wait, got, err := limiters[i%len(limiters)].Reserve(t.Context(), now, bs)
			switch {
			case err != nil:
				errs <- err
			case got && len(r.IDs) == len(bs):
				ok.Add(1)
			case got:
				errs <- errorf("reservation with %d ids for %d buckets", len(r.IDs), len(bs))
			case wait <= 0:
				errs <- errorf("refused with wait %v", wait)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return int(ok.Load())
}

func testLimiterConcurrentExact(t *testing.T, s subject) {
	if got := concurrentReserve(t, []guard.Limiter{s.limiter}, 40, t0, bucket("addr:X", 5, time.Minute)); got != 5 {
		t.Fatalf("%d of 40 concurrent reservations succeeded, want exactly 5", got)
	}
}

func testLimiterAllOrNothing(t *testing.T, s subject) {
	a, b := bucket("a", 2, time.Minute), bucket("b", 1, time.Minute)
	if _, _, ok := reserve(t, s.limiter, t0, a, b); !ok {
		t.Fatal("first reservation refused")
	}
	// b is full: nothing is taken from a either.
	if _, wait, ok := reserve(t, s.limiter, t0.Add(time.Second), a, b); ok || wait != 59*time.Second {
		t.Fatalf("reservation with b full: ok=%v wait=%v, want refused, 59s", ok, wait)
	}
	if _, _, ok := reserve(t, s.limiter, t0.Add(2*time.Second), a); !ok {
		t.Fatal("a's second slot was taken by a refused reservation")
	}
	if _, _, ok := reserve(t, s.limiter, t0.Add(3*time.Second), a); ok {
		t.Fatal("a allowed a third slot")
	}
	// Many buckets, concurrently: exactly the tightest limit gets through.
	bs := []guard.Bucket{bucket("c1", 3, time.Minute), bucket("c2", 4, time.Minute), bucket("c3", 9, time.Minute)}
	if got := concurrentReserve(t, []guard.Limiter{s.limiter}, 20, t0, bs...); got != 3 {
		t.Fatalf("%d concurrent multi-bucket reservations succeeded, want 3", got)
	}
	if _, _, ok := reserve(t, s.limiter, t0, bucket("c2", 4, time.Minute)); !ok {
		t.Fatal("c2 lost a slot to a refused multi-bucket reservation")
	}
}

func testLimiterRelease(t *testing.T, s subject) {
	ctx := t.Context()
	a, b := bucket("a", 1, time.Hour), bucket("b", 1, time.Hour)
	r1, _, ok := reserve(t, s.limiter, t0, a, b)
	if !ok || len(r1.IDs) != 2 {
		t.Fatalf("reserve: %+v %v", r1, ok)
	}
	if _, _, ok := reserve(t, s.limiter, t0, a); ok {
		t.Fatal("full bucket reserved")
	}
	if err := s.limiter.Release(ctx, r1); err != nil {
		t.Fatal(err)
	}
	r2, _, ok := reserve(t, s.limiter, t0, a, b)
	if !ok {
		t.Fatal("released slots not freed")
	}
	// Releasing the old reservation again frees nothing of the new one.
	if err := s.limiter.Release(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := reserve(t, s.limiter, t0, b); ok {
		t.Fatal("a second release of an old reservation freed a new slot")
	}
	if err := s.limiter.Release(ctx, guard.Reservation{}); err != nil {
		t.Fatalf("empty release: %v", err)
	}
	if err := s.limiter.Release(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := reserve(t, s.limiter, t0, a, b); !ok {
		t.Fatal("second release not freed")
	}
}

func testLimiterWait(t *testing.T, s subject) {
	w := time.Minute
	for _, d := range []time.Duration{0, 10 * time.Second, 20 * time.Second} {
		if _, _, ok := reserve(t, s.limiter, t0.Add(d), bucket("k", 3, w)); !ok {
			t.Fatalf("slot at +%v refused", d)
		}
	}
	// Full: the slot that frees first is t0's, at t0+60s.
	if _, wait, ok := reserve(t, s.limiter, t0.Add(30*time.Second), bucket("k", 3, w)); ok || wait != 30*time.Second {
		t.Fatalf("at +30s: ok=%v wait=%v, want refused, 30s", ok, wait)
	}
	if _, wait, ok := reserve(t, s.limiter, t0.Add(w-time.Nanosecond), bucket("k", 3, w)); ok || wait != time.Nanosecond {
		t.Fatalf("1ns before: ok=%v wait=%v, want refused, 1ns", ok, wait)
	}
	// At t0+60s t0's slot has left the window.
	if _, _, ok := reserve(t, s.limiter, t0.Add(w), bucket("k", 3, w)); !ok {
		t.Fatal("at +60s refused")
	}
	// Live now: +10s, +20s, +60s; the oldest of the last 3 is +10s.
	if _, wait, ok := reserve(t, s.limiter, t0.Add(61*time.Second), bucket("k", 3, w)); ok || wait != 9*time.Second {
		t.Fatalf("at +61s: ok=%v wait=%v, want refused, 9s", ok, wait)
	}
	// A lower limit on the same log: the oldest of the last 1 is +60s.
	if _, wait, ok := reserve(t, s.limiter, t0.Add(61*time.Second), bucket("k", 1, w)); ok || wait != 59*time.Second {
		t.Fatalf("limit 1 at +61s: ok=%v wait=%v, want refused, 59s", ok, wait)
	}
	// Several full buckets: the longest wait.
	if _, _, ok := reserve(t, s.limiter, t0, bucket("z", 1, time.Hour)); !ok {
		t.Fatal("z refused")
	}
	if _, wait, ok := reserve(t, s.limiter, t0.Add(61*time.Second), bucket("k", 3, w), bucket("z", 1, time.Hour), bucket("free", 9, w)); ok || wait != time.Hour-61*time.Second {
		t.Fatalf("two full buckets: ok=%v wait=%v, want refused, %v", ok, wait, time.Hour-61*time.Second)
	}
}

func testLimiterDisabledBuckets(t *testing.T, s subject) {
	off := guard.Bucket{Key: "off", Limit: guard.Limit{Requests: 0, Window: time.Minute}}
	for i := range 3 {
		r, _, ok := reserve(t, s.limiter, t0, off, bucket("on", 5, time.Minute))
		if !ok || len(r.IDs) != 1 {
			t.Fatalf("round %d: %+v %v, want one id", i, r, ok)
		}
	}
	if r, _, ok := reserve(t, s.limiter, t0, off); !ok || len(r.IDs) != 0 {
		t.Fatalf("only disabled buckets: %+v %v", r, ok)
	}
	if r, _, ok := reserve(t, s.limiter, t0); !ok || len(r.IDs) != 0 {
		t.Fatalf("no buckets: %+v %v", r, ok)
	}
}

// Peek agrees with Reserve (the wait a refused Reserve gives) and takes
// nothing: peeking at a bucket with one slot left leaves it for Reserve.
func testLimiterPeek(t *testing.T, s subject) {
	w := time.Minute
	k, other, off := bucket("k", 3, w), bucket("other", 1, w), guard.Bucket{Key: "off"}
	peek := func(at time.Duration) []guard.BucketUse {
		t.Helper()
		u, err := s.limiter.Peek(t.Context(), t0.Add(at), []guard.Bucket{k, off, other})
		if err != nil || len(u) != 3 {
			t.Fatalf("peek at +%v: %v %v", at, u, err)
		}
		return u
	}
	if u := peek(0); u[0] != (guard.BucketUse{}) || u[1] != (guard.BucketUse{}) || u[2] != (guard.BucketUse{}) {
		t.Fatalf("empty: %+v", u)
	}
	for _, d := range []time.Duration{0, 10 * time.Second} {
		if _, _, ok := reserve(t, s.limiter, t0.Add(d), k); !ok {
			t.Fatalf("slot at +%v refused", d)
		}
	}
	for range 5 {
		if u := peek(15 * time.Second); u[0] != (guard.BucketUse{Used: 2, Reset: 45 * time.Second}) {
			t.Fatalf("two of three used at +15s: %+v", u[0])
		}
	}
	// Reserve reports each bucket's use as it leaves it, its own slot
	// counted, as Peek then reads it; an inactive bucket is zero.
	r, _, ok := reserve(t, s.limiter, t0.Add(20*time.Second), k, off, other)
	if !ok {
		t.Fatal("the slot peeks left was taken")
	}
	want := []guard.BucketUse{{Used: 3, Reset: 40 * time.Second, Wait: 40 * time.Second}, {}, {Used: 1, Reset: w, Wait: w}}
	if !slices.Equal(r.Use, want) || !slices.Equal(peek(20*time.Second), want) {
		t.Fatalf("after the third slot: reserve %+v, peek %+v, want %+v", r.Use, peek(20*time.Second), want)
	}
	u := peek(30 * time.Second)
	r, wait, ok := reserve(t, s.limiter, t0.Add(30*time.Second), k)
	if ok || u[0] != (guard.BucketUse{Used: 3, Reset: 30 * time.Second, Wait: wait}) || wait != 30*time.Second || !slices.Equal(r.Use, u[:1]) {
		t.Fatalf("full at +30s: peek %+v, reserve ok=%v wait=%v use %+v", u[0], ok, wait, r.Use)
	}
	if _, _, ok := reserve(t, s.limiter, t0.Add(30*time.Second), other); ok {
		t.Fatal("other: a second slot in a bucket of one")
	}
	// After the window the expired slots no longer count.
	if u := peek(75 * time.Second); u[0] != (guard.BucketUse{Used: 1, Reset: 5 * time.Second}) {
		t.Fatalf("at +75s: %+v", u[0])
	}
}

func testHistory(t *testing.T, s subject) {
	if s.history == nil {
		t.Skip("no durable history in this implementation")
	}
	ctx := t.Context()
	recs := []faucet.DripRecord{
		{At: t0, Recipient: testAddr(1).String(), Asset: faucet.AssetSTX, Amount: 500_000_000, Fee: 180, TxID: testTxID(1).String(),
			Sender: testAddr(9).String(), Nonce: 41, Outcome: faucet.OutcomeSent, ClientBucket: "203.0.113.7", Batch: 200},
		{At: t0.Add(time.Hour), Recipient: testAddr(2).String() + ".some-contract", Asset: "sbtc", Stacking: true, Amount: 1<<63 + 9,
			Fee: math.MaxUint64, TxID: testTxID(2).String(), Sender: testAddr(9).String(), Nonce: 1<<63 + 2,
			Outcome: faucet.OutcomeSent, ClientBucket: "2001:db8:1:2::/64"},
		{At: t0.Add(2 * time.Hour), Recipient: testAddr(3).String(), Outcome: "rate_limited"},
	}
	for _, r := range recs {
		if err := s.history.Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range recs[:2] {
		for _, q := range []string{want.TxID, "0x" + want.TxID} {
			got, ok, err := s.byTxID(ctx, q)
			if err != nil || !ok {
				t.Fatalf("by txid %s: %v %v", q, ok, err)
			}
			if !got.At.Equal(want.At) {
				t.Errorf("record %d: at %v, want %v", i, got.At, want.At)
			}
			got.At = want.At
			if got != want {
				t.Errorf("record %d:\n got %+v\nwant %+v", i, got, want)
			}
		}
	}
	for _, q := range []string{"", testTxID(3).String()} {
		if _, ok, err := s.byTxID(ctx, q); ok || err != nil {
			t.Fatalf("by txid %q: %v %v, want none", q, ok, err)
		}
	}
	// The newest record of a txid wins (a retried status).
	again := recs[0]
	again.At, again.Outcome = t0.Add(3*time.Hour), "node_rejected"
	if err := s.history.Record(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.byTxID(ctx, again.TxID); got.Outcome != "node_rejected" {
		t.Fatalf("by txid returned %+v, want the newest", got)
	}

	if n, err := s.history.Prune(ctx, t0.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v; want 1", n, err)
	}
	if got, ok, _ := s.byTxID(ctx, recs[0].TxID); !ok || got.Outcome != "node_rejected" {
		t.Fatalf("after prune: %+v %v", got, ok)
	}
	if _, ok, _ := s.byTxID(ctx, recs[1].TxID); !ok {
		t.Fatal("prune removed a record at the cut-off")
	}
	if n, err := s.history.Prune(ctx, t0.Add(24*time.Hour)); err != nil || n != 3 {
		t.Fatalf("prune all: %d, %v; want 3", n, err)
	}
}

// The spent-challenge contract (replay protection of proofs of work), for
// the two drivers only: the memory variant lives with the guard.

// challengeStore is a store's side of the challenge contract.
type challengeStore interface {
	SpendChallenge(ctx context.Context, id string, expires time.Time) (fresh bool, err error)
	PruneChallenges(ctx context.Context, now time.Time) (int64, error)
	Close() error
}

// challengeOpener opens n handles ("replicas") on one fresh database, all
// judging expiry by clk.
type challengeOpener func(t *testing.T, n int, clk clock.WithTicker) []challengeStore

func runChallengeContract(t *testing.T, open challengeOpener) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, []challengeStore, *clocktesting.FakeClock)
	}{
		{"ChallengeSpendOnce", testChallengeSpendOnce},
		{"ChallengeConcurrent", testChallengeConcurrent},
		{"ChallengeExpiry", testChallengeExpiry},
		{"ChallengePrune", testChallengePrune},
		{"ChallengeErrors", testChallengeErrors},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			c.run(t, open(t, 2, clk), clk)
		})
	}
}

// spend spends id on s and fails the test on an error.
func spend(t *testing.T, s challengeStore, id string, expires time.Time) bool {
	t.Helper()
	fresh, err := s.SpendChallenge(t.Context(), id, expires)
	if err != nil {
		t.Fatalf("spend %q: %v", id, err)
	}
	return fresh
}

func testChallengeSpendOnce(t *testing.T, ss []challengeStore, clk *clocktesting.FakeClock) {
	exp := clk.Now().Add(5 * time.Minute)
	if !spend(t, ss[0], "c1", exp) {
		t.Fatal("first spend not fresh")
	}
	if spend(t, ss[0], "c1", exp) {
		t.Fatal("second spend fresh")
	}
	if spend(t, ss[1], "c1", exp) {
		t.Fatal("spend on another replica fresh")
	}
	// A later expiry is no way around it.
	if spend(t, ss[1], "c1", exp.Add(time.Hour)) {
		t.Fatal("spend with another expiry fresh")
	}
	// Ids are compared exactly.
	for _, id := range []string{"c2", "C1", "c1 ", strings.Repeat("x", 300) + "\u00e9"} {
		if !spend(t, ss[1], id, exp) {
			t.Fatalf("first spend of %q not fresh", id)
		}
		if spend(t, ss[0], id, exp) {
			t.Fatalf("second spend of %q fresh", id)
		}
	}
}

// concurrentSpend spends id n times at once, spread over ss, and returns
// how many spends were fresh.
func concurrentSpend(t *testing.T, ss []challengeStore, n int, id string, expires time.Time) int {
	t.Helper()
	var fresh atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			ok, err := ss[i%len(ss)].SpendChallenge(t.Context(), id, expires)
			if err != nil {
				errs <- err
			} else if ok {
				fresh.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return int(fresh.Load())
}

func testChallengeConcurrent(t *testing.T, ss []challengeStore, clk *clocktesting.FakeClock) {
	exp := clk.Now().Add(time.Minute)
	if got := concurrentSpend(t, ss[:1], 32, "one-store", exp); got != 1 {
		t.Fatalf("%d of 32 concurrent spends on one store fresh, want exactly 1", got)
	}
	if got := concurrentSpend(t, ss, 32, "two-stores", exp); got != 1 {
		t.Fatalf("%d of 32 concurrent spends across two stores fresh, want exactly 1", got)
	}
	// Many ids at once: each is fresh exactly once.
	const ids = 8
	var fresh atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 * ids {
		wg.Go(func() {
			ok, err := ss[i%2].SpendChallenge(t.Context(), fmt.Sprintf("many-%d", i%ids), exp)
			if err != nil {
				t.Error(err)
			} else if ok {
				fresh.Add(1)
			}
		})
	}
	wg.Wait()
	if got := fresh.Load(); got != ids {
		t.Fatalf("%d fresh spends of %d ids spent 4 times each, want %d", got, ids, ids)
	}
	// Re-spending an expired id races the same way.
	clk.Step(time.Minute)
	if got := concurrentSpend(t, ss, 32, "two-stores", clk.Now().Add(time.Minute)); got != 1 {
		t.Fatalf("%d of 32 concurrent spends of an expired id fresh, want exactly 1", got)
	}
}

func testChallengeExpiry(t *testing.T, ss []challengeStore, clk *clocktesting.FakeClock) {
	exp := clk.Now().Add(time.Minute)
	if !spend(t, ss[0], "e", exp) {
		t.Fatal("first spend not fresh")
	}
	clk.Step(time.Minute - time.Nanosecond)
	if spend(t, ss[1], "e", clk.Now().Add(time.Minute)) {
		t.Fatal("spent 1ns before its expiry: fresh")
	}
	// That refused spend did not move the expiry: at exp it has expired,
	// and may be spent again (with a new expiry) although not yet pruned.
	clk.Step(time.Nanosecond)
	exp2 := clk.Now().Add(time.Minute)
	if !spend(t, ss[1], "e", exp2) {
		t.Fatal("spend at its expiry: not fresh")
	}
	if spend(t, ss[0], "e", exp2) {
		t.Fatal("second spend after re-spending: fresh")
	}
	clk.Step(time.Minute - time.Nanosecond)
	if spend(t, ss[0], "e", exp2) {
		t.Fatal("the re-spend's expiry was not kept")
	}
	// An id spent already expired protects nothing: every spend is fresh.
	for i := range 2 {
		if !spend(t, ss[i], "late", clk.Now()) {
			t.Fatalf("spend %d of an already expired challenge not fresh", i)
		}
	}
}

func testChallengePrune(t *testing.T, ss []challengeStore, clk *clocktesting.FakeClock) {
	ctx := t.Context()
	at := clk.Now()
	for i, d := range []time.Duration{1, 2, 3} {
		if !spend(t, ss[i%2], fmt.Sprintf("p%d", d), at.Add(d*time.Minute)) {
			t.Fatalf("p%d not fresh", d)
		}
	}
	if n, err := ss[0].PruneChallenges(ctx, at.Add(time.Minute-time.Nanosecond)); err != nil || n != 0 {
		t.Fatalf("prune before any expiry: %d, %v; want 0", n, err)
	}
	if n, err := ss[1].PruneChallenges(ctx, at.Add(2*time.Minute)); err != nil || n != 2 {
		t.Fatalf("prune at p2's expiry: %d, %v; want 2", n, err)
	}
	if n, err := ss[0].PruneChallenges(ctx, at.Add(2*time.Minute)); err != nil || n != 0 {
		t.Fatalf("prune again: %d, %v; want 0", n, err)
	}
	// The clock has not moved: p3 is still spent, the pruned ones are
	// forgotten.
	if spend(t, ss[0], "p3", at.Add(3*time.Minute)) {
		t.Fatal("p3 was pruned before its expiry")
	}
	for _, id := range []string{"p1", "p2"} {
		if !spend(t, ss[1], id, at.Add(time.Hour)) {
			t.Fatalf("%s not fresh after pruning", id)
		}
	}
	if n, err := ss[0].PruneChallenges(ctx, at.Add(59*time.Minute)); err != nil || n != 1 {
		t.Fatalf("prune p3: %d, %v; want 1", n, err)
	}
}

func testChallengeErrors(t *testing.T, ss []challengeStore, clk *clocktesting.FakeClock) {
	ctx := t.Context()
	if _, err := ss[0].SpendChallenge(ctx, "", clk.Now().Add(time.Minute)); err == nil || errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("empty id: %v, want a plain error", err)
	}
	if _, err := ss[0].SpendChallenge(ctx, "z", time.Time{}); err == nil || errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("zero expiry: %v, want a plain error", err)
	}
	// Refused arguments spend nothing.
	if !spend(t, ss[0], "z", clk.Now().Add(time.Minute)) {
		t.Fatal("z was spent by a refused call")
	}
	if err := ss[1].Close(); err != nil {
		t.Fatal(err)
	}
	_, err := ss[1].SpendChallenge(ctx, "after-close", clk.Now().Add(time.Minute))
	if !errors.Is(err, faucet.ErrStoreUnavailable) || strings.Contains(err.Error(), pgtest.Password) {
		t.Fatalf("spend after close: %v, want ErrStoreUnavailable without the password", err)
	}
	if _, err := ss[1].PruneChallenges(ctx, clk.Now()); !errors.Is(err, faucet.ErrStoreUnavailable) {
		t.Fatalf("prune after close: %v, want ErrStoreUnavailable", err)
	}
	// The other store (a replica of its own, on Postgres) is unaffected.
	if ss[0] != ss[1] && spend(t, ss[0], "z", clk.Now().Add(time.Minute)) {
		t.Fatal("z fresh twice")
	}
}
