package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/internal/clocktest"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunMain(m)) }

// subject is one implementation of the state interfaces under contract.
type subject struct {
	ledger  faucet.Ledger
	limiter guard.Limiter
	history faucet.History // nil: not implemented (memory)
	byTxID  func(ctx context.Context, txid string) (faucet.DripRecord, bool, error)
}

// opener makes a fresh, empty subject for one test.
type opener func(t *testing.T) subject

// The same contract, whatever keeps the state.
func TestContractMemory(t *testing.T) {
	runContract(t, func(*testing.T) subject {
		return subject{ledger: faucet.NewMemoryLedger(), limiter: guard.NewMemoryLimiter()}
	})
}

func TestContractSQLite(t *testing.T) {
	runContract(t, func(t *testing.T) subject { return storeSubject(openSQLite(t)) })
	// One process per file (the store's lock sees to it), so every
	// caller shares the one store.
	runChallengeContract(t, func(t *testing.T, n int, now func() time.Time) []challengeStore {
		s := openSQLitePath(t, filepath.Join(t.TempDir(), "faucet.db"), store.Options{Now: now})
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
	runChallengeContract(t, func(t *testing.T, n int, now func() time.Time) []challengeStore {
		uri := pgtest.Shared(t).CreateDB(t)
		out := make([]challengeStore, n)
		for i := range out {
			out[i] = openPostgresURI(t, uri, store.Options{Now: now})
		}
		return out
	})
}

func storeSubject(s interface {
	faucet.Ledger
	guard.Limiter
	faucet.History
	DripByTxID(context.Context, string) (faucet.DripRecord, bool, error)
}) subject {
	return subject{ledger: s, limiter: s, history: s, byTxID: s.DripByTxID}
}

func runContract(t *testing.T, open opener) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, subject)
	}{
		{"LedgerRoundTrip", testLedgerRoundTrip},
		{"LedgerUpsertDelete", testLedgerUpsertDelete},
		{"LimiterConcurrentExact", testLimiterConcurrentExact},
		{"LimiterAllOrNothing", testLimiterAllOrNothing},
		{"LimiterRelease", testLimiterRelease},
		{"LimiterWait", testLimiterWait},
		{"LimiterDisabledBuckets", testLimiterDisabledBuckets},
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

// sameTx compares ledger entries field by field: times by instant, raw
// bytes exactly (nil and empty alike).
func sameTx(t *testing.T, got, want faucet.PendingTx) {
	t.Helper()
	g, w := got, want
	if !bytes.Equal(g.Raw, w.Raw) {
		t.Errorf("nonce %d: raw %x, want %x", w.Nonce, g.Raw, w.Raw)
	}
	if !g.SentAt.Equal(w.SentAt) {
		t.Errorf("nonce %d: sent at %v, want %v", w.Nonce, g.SentAt, w.SentAt)
	}
	g.Raw, w.Raw, g.SentAt, w.SentAt = nil, nil, time.Time{}, time.Time{}
	if !equalTx(g, w) {
		t.Errorf("entry\n got %+v\nwant %+v", g, w)
	}
}

func equalTx(a, b faucet.PendingTx) bool {
	return a.Sender == b.Sender && a.Nonce == b.Nonce && a.TxID == b.TxID && a.Recipient == b.Recipient &&
		a.Amount == b.Amount && a.Fee == b.Fee && a.State == b.State && a.Foreign == b.Foreign &&
		a.Rebroadcasts == b.Rebroadcasts && a.Replacements == b.Replacements && assetOrSTX(a.Asset) == assetOrSTX(b.Asset)
}

// assetOrSTX reads a row without an asset as STX, as the stores do.
func assetOrSTX(a faucet.Asset) faucet.Asset {
	if a == "" {
		return faucet.AssetSTX
	}
	return a
}

func testLedgerRoundTrip(t *testing.T, s subject) {
	ctx := t.Context()
	a, b := testAddr(1), testAddr(2)
	contract := stacks.Principal{Address: testAddr(9), ContractName: "faucet-sink_v2"}
	raw := make([]byte, 300)
	for i := range raw {
		raw[i] = byte(255 - i)
	}
	want := []faucet.PendingTx{
		{Sender: a, Nonce: 2, TxID: testTxID(2), Raw: []byte{0, 1, 0, 255}, Recipient: stacks.Principal{Address: testAddr(7)},
			Amount: math.MaxUint64, Fee: 180, SentAt: time.Unix(1_700_000_000, 123_456_789), State: faucet.TxPending, Rebroadcasts: 3},
		// A foreign nonce: no bytes, no recipient, no time.
		{Sender: a, Nonce: 3, State: faucet.TxPending, Foreign: true},
		{Sender: a, Nonce: 5, TxID: testTxID(5), Raw: raw, Recipient: contract, Asset: faucet.AssetSBTC, Amount: 1 << 63, Fee: math.MaxInt64,
			SentAt: time.Date(2031, 2, 3, 4, 5, 6, 7, time.FixedZone("x", 3600)), State: faucet.TxBroadcasting, Replacements: 2},
		// Beyond int64: still after 5.
		{Sender: a, Nonce: 1<<63 + 1, TxID: testTxID(8), Raw: []byte{8}, Recipient: contract, Amount: 1, Fee: 1,
			SentAt: time.Unix(1, 0), State: faucet.TxPending},
	}
	// Put out of order, plus another sender's entry.
	for _, i := range []int{2, 0, 3, 1} {
		if err := s.ledger.Put(ctx, want[i]); err != nil {
			t.Fatalf("put nonce %d: %v", want[i].Nonce, err)
		}
	}
	if err := s.ledger.Put(ctx, faucet.PendingTx{Sender: b, Nonce: 4, TxID: testTxID(4), State: faucet.TxPending}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ledger.List(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("list: %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		sameTx(t, got[i], want[i])
	}
	if got, err := s.ledger.List(ctx, b); err != nil || len(got) != 1 || got[0].Nonce != 4 {
		t.Fatalf("other sender: %+v, %v", got, err)
	}
	if got, err := s.ledger.List(ctx, testAddr(3)); err != nil || len(got) != 0 {
		t.Fatalf("unknown sender: %+v, %v", got, err)
	}
}

func testLedgerUpsertDelete(t *testing.T, s subject) {
	ctx := t.Context()
	a := testAddr(1)
	tx := faucet.PendingTx{Sender: a, Nonce: 7, TxID: testTxID(7), Raw: []byte{1, 2, 3},
		Recipient: stacks.Principal{Address: testAddr(5)}, Amount: 500, Fee: 10, SentAt: time.Unix(100, 0), State: faucet.TxBroadcasting}
	if err := s.ledger.Put(ctx, tx); err != nil {
		t.Fatal(err)
	}
	// Put replaces every field of the same (sender, nonce).
	tx2 := tx
	tx2.TxID, tx2.Raw, tx2.Fee, tx2.State, tx2.Rebroadcasts, tx2.Replacements = testTxID(70), []byte{9}, 20, faucet.TxPending, 1, 1
	tx2.SentAt = time.Unix(200, 0)
	if err := s.ledger.Put(ctx, tx2); err != nil {
		t.Fatal(err)
	}
	got, err := s.ledger.List(ctx, a)
	if err != nil || len(got) != 1 {
		t.Fatalf("after upsert: %+v, %v", got, err)
	}
	sameTx(t, got[0], tx2)

	other := tx
	other.Nonce = 8
	if err := s.ledger.Put(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := s.ledger.Delete(ctx, a, 7); err != nil {
		t.Fatal(err)
	}
	// Deleting what is not there is no error.
	if err := s.ledger.Delete(ctx, a, 7); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if err := s.ledger.Delete(ctx, testAddr(4), 1); err != nil {
		t.Fatalf("delete unknown: %v", err)
	}
	got, err = s.ledger.List(ctx, a)
	if err != nil || len(got) != 1 || got[0].Nonce != 8 {
		t.Fatalf("after delete: %+v, %v", got, err)
	}

	// DeleteBelow drops what a block confirmed, one sender only.
	for n := uint64(9); n <= 12; n++ {
		tx := other
		tx.Nonce = n
		if err := s.ledger.Put(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	b := other
	b.Sender = testAddr(2)
	if err := s.ledger.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.ledger.DeleteBelow(ctx, a, 11); err != nil {
		t.Fatal(err)
	}
	got, err = s.ledger.List(ctx, a)
	if err != nil || len(got) != 2 || got[0].Nonce != 11 || got[1].Nonce != 12 {
		t.Fatalf("after DeleteBelow(11): %+v, %v", got, err)
	}
	if got, _ := s.ledger.List(ctx, b.Sender); len(got) != 1 {
		t.Fatalf("DeleteBelow touched another sender: %+v", got)
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

func testHistory(t *testing.T, s subject) {
	if s.history == nil {
		t.Skip("no durable history in this implementation")
	}
	ctx := t.Context()
	recs := []faucet.DripRecord{
		{At: t0, Recipient: testAddr(1).String(), Asset: faucet.AssetSTX, Amount: 500_000_000, Fee: 180, TxID: testTxID(1).String(),
			Sender: testAddr(9).String(), Nonce: 41, Outcome: faucet.OutcomeSent, ClientBucket: "203.0.113.7", Batch: 200},
		{At: t0.Add(time.Hour), Recipient: testAddr(2).String() + ".some-contract", Asset: faucet.AssetSBTC, Stacking: true, Amount: 1<<63 + 9,
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
// judging expiry by now.
type challengeOpener func(t *testing.T, n int, now func() time.Time) []challengeStore

func runChallengeContract(t *testing.T, open challengeOpener) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, []challengeStore, *clocktest.Manual)
	}{
		{"ChallengeSpendOnce", testChallengeSpendOnce},
		{"ChallengeConcurrent", testChallengeConcurrent},
		{"ChallengeExpiry", testChallengeExpiry},
		{"ChallengePrune", testChallengePrune},
		{"ChallengeErrors", testChallengeErrors},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktest.New()
			c.run(t, open(t, 2, clk.Now), clk)
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

func testChallengeSpendOnce(t *testing.T, ss []challengeStore, clk *clocktest.Manual) {
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

func testChallengeConcurrent(t *testing.T, ss []challengeStore, clk *clocktest.Manual) {
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
	clk.Advance(time.Minute)
	if got := concurrentSpend(t, ss, 32, "two-stores", clk.Now().Add(time.Minute)); got != 1 {
		t.Fatalf("%d of 32 concurrent spends of an expired id fresh, want exactly 1", got)
	}
}

func testChallengeExpiry(t *testing.T, ss []challengeStore, clk *clocktest.Manual) {
	exp := clk.Now().Add(time.Minute)
	if !spend(t, ss[0], "e", exp) {
		t.Fatal("first spend not fresh")
	}
	clk.Advance(time.Minute - time.Nanosecond)
	if spend(t, ss[1], "e", clk.Now().Add(time.Minute)) {
		t.Fatal("spent 1ns before its expiry: fresh")
	}
	// That refused spend did not move the expiry: at exp it has expired,
	// and may be spent again (with a new expiry) although not yet pruned.
	clk.Advance(time.Nanosecond)
	exp2 := clk.Now().Add(time.Minute)
	if !spend(t, ss[1], "e", exp2) {
		t.Fatal("spend at its expiry: not fresh")
	}
	if spend(t, ss[0], "e", exp2) {
		t.Fatal("second spend after re-spending: fresh")
	}
	clk.Advance(time.Minute - time.Nanosecond)
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

func testChallengePrune(t *testing.T, ss []challengeStore, clk *clocktest.Manual) {
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

func testChallengeErrors(t *testing.T, ss []challengeStore, clk *clocktest.Manual) {
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
