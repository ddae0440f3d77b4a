package store_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// The engine's per-drip store work is one Reserve, two journal Puts (the
// record before the broadcast, the commit after it) and one Record (and, for a drip with a proof of work, one SpendChallenge). These
// benchmarks run each, and the whole drip, from 16 goroutines (the
// engine's concurrency) against both drivers.

const benchConcurrency = 16

func benchStores(b *testing.B, run func(b *testing.B, s store.Store)) {
	b.Run("sqlite", func(b *testing.B) { run(b, openSQLite(b)) })
	b.Run("postgres", func(b *testing.B) {
		run(b, openPostgresURI(b, pgtest.Shared(b).CreateDB(b), store.Options{}))
	})
}

func parallel(b *testing.B, body func(seq uint64) error) {
	b.SetParallelism(max(1, benchConcurrency/runtime.GOMAXPROCS(0)))
	var seq atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := body(seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// dripBuckets are a drip's buckets: its recipient, and one of 1024 client
// IPs.
func dripBuckets(seq uint64) []guard.Bucket {
	return []guard.Bucket{
		bucket(fmt.Sprintf("addr:%d", seq), 5, 5*time.Minute),
		bucket(fmt.Sprintf("ip:10.0.%d.%d", seq%1024/256, seq%256), 1000, 5*time.Minute),
	}
}

// benchTx is a drip's journal entry as the Stacks engine records it: one
// of four keys, a unique txid, a transfer's bytes and its Meta.
func benchTx(seq uint64) journal.Entry {
	return journal.Entry{
		Key: stxKey(byte(seq % 4)), TxID: fmt.Sprintf("%064x", seq), Seq: seq, Raw: make([]byte, 180),
		SentAt: time.Now(), State: journal.Broadcasting,
		Meta: stxEntryMeta(testAddr(byte(seq)).String(), "stx", 500_000_000, 180, 0, 0),
	}
}

func benchRecord(seq uint64) faucet.DripRecord {
	return faucet.DripRecord{At: time.Now(), Recipient: testAddr(byte(seq)).String(), Amount: 500_000_000, Fee: 180,
		TxID: testTxID(byte(seq)).String(), Sender: testAddr(byte(seq % 4)).String(), Nonce: seq,
		Outcome: faucet.OutcomeSent, ClientBucket: "10.0.0.1"}
}

func BenchmarkStoreReserve(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		parallel(b, func(seq uint64) error {
			_, _, ok, err := s.Reserve(b.Context(), time.Now(), dripBuckets(seq))
			if err == nil && !ok {
				err = fmt.Errorf("reservation %d refused", seq)
			}
			return err
		})
	})
}

// BenchmarkStorePeek reads the buckets a drip counts against, as the
// RateLimit fields of every drip answer and the eligibility endpoint do.
func BenchmarkStorePeek(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		parallel(b, func(seq uint64) error {
			_, err := s.Peek(b.Context(), time.Now(), dripBuckets(seq))
			return err
		})
	})
}

func BenchmarkStorePut(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		parallel(b, func(seq uint64) error { return s.Put(b.Context(), benchTx(seq)) })
	})
}

func BenchmarkStoreRecord(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		parallel(b, func(seq uint64) error { return s.Record(b.Context(), benchRecord(seq)) })
	})
}

// BenchmarkStoreDrip is one drip's store work: ops/s is the drip rate the
// store alone could sustain.
func BenchmarkStoreDrip(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		parallel(b, func(seq uint64) error {
			ctx := b.Context()
			if _, _, _, err := s.Reserve(ctx, time.Now(), dripBuckets(seq)); err != nil {
				return err
			}
			tx := benchTx(seq)
			if err := s.Put(ctx, tx); err != nil {
				return err
			}
			tx.State = journal.Pending
			if err := s.Put(ctx, tx); err != nil {
				return err
			}
			return s.Record(ctx, benchRecord(seq))
		})
	})
}

// BenchmarkSpendChallenge spends a new challenge id (random-looking, as
// HMAC-derived ids are) per operation.
func BenchmarkSpendChallenge(b *testing.B) {
	benchStores(b, func(b *testing.B, s store.Store) {
		expires := time.Now().Add(time.Hour)
		parallel(b, func(seq uint64) error {
			fresh, err := s.SpendChallenge(b.Context(), fmt.Sprintf("%016x%016x", seq*0x9e3779b97f4a7c15, seq), expires)
			if err == nil && !fresh {
				err = fmt.Errorf("challenge %d not fresh", seq)
			}
			return err
		})
	})
}
