package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunMain(m)) }

// BenchmarkDripLoad drives POST /extended/v1/faucets/stx over HTTP against
// a devnode mining every 50 ms with injected RPC latency, closed loop at
// each concurrency, for the default configuration (adaptive send-many
// batching) and with batching off. Beside drips/s it reports the limit of
// the run and the ratio to it: the chain pays at most keys × 25
// transactions per block (× the batch cap when batching), and conc clients
// each waiting one round trip (rtt-ms, a lone drip's median, measured
// first) ask at most conc / RTT. Then p50/p99, drips per transaction and
// cpu, the share of the cores the whole process (client and devnode
// included) used: near 1, the machine bounds the run. A latency run after
// the 0 ms one of its mode and concurrency also reports of-0ms, its
// drips/s over that run's.
func BenchmarkDripLoad(b *testing.B) {
	for _, latency := range []time.Duration{0, 20 * time.Millisecond} {
		for _, mode := range []string{"default", "batching-off"} {
			for _, conc := range []int{1, 16, 64, 256} {
				name := fmt.Sprintf("latency=%s/%s/conc=%d", latency, mode, conc)
				b.Run(name, func(b *testing.B) { runDripLoad(b, latency, mode, conc) })
			}
		}
	}
}

// BenchmarkDripBurst offers 5,000 drips at once (a class, a CI matrix)
// and reports how fast all are answered, against the same limits.
// Drips the faucet answers busy (no slot within --busy-wait) count as
// failed, not as paid.
func BenchmarkDripBurst(b *testing.B) {
	for _, latency := range []time.Duration{0, 20 * time.Millisecond} {
		for _, mode := range []string{"default", "batching-off"} {
			b.Run(fmt.Sprintf("latency=%s/%s/burst=%d", latency, mode, burstSize), func(b *testing.B) {
				runDripLoad(b, latency, mode, burstSize)
			})
		}
	}
}

const burstSize = 5000

// BenchmarkDripLoadIncumbent is the incumbent's design for comparison:
// one drip at a time behind a global lock, with three node round trips per
// drip (chain check, account nonce, broadcast).
func BenchmarkDripLoadIncumbent(b *testing.B) {
	for _, latency := range []time.Duration{0, 20 * time.Millisecond} {
		for _, conc := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("latency=%s/serialised/conc=%d", latency, conc), func(b *testing.B) {
				runDripLoad(b, latency, "serialised", conc)
			})
		}
	}
}

// benchBlockTime is how often the benchmarks' devnode mines.
const benchBlockTime = 50 * time.Millisecond

const benchKeys = 4

// BenchmarkDripLoadStore is the drip load at 20 ms node latency with the
// engine's state in memory, in an SQLite file and in Postgres, so the cost of
// durability shows as drips/s next to memory. Every drip goes to a fresh
// recipient under the default per-address limit, so each one reserves a real
// rate-limit slot, records its tx twice and writes a history row.
func BenchmarkDripLoadStore(b *testing.B) {
	for _, conc := range []int{16, 64} {
		for _, kind := range []string{"memory", "sqlite", "postgres"} {
			b.Run(fmt.Sprintf("latency=20ms/store=%s/conc=%d", kind, conc), func(b *testing.B) {
				runDripLoad(b, 20*time.Millisecond, "store:"+kind, conc)
			})
		}
	}
}

// benchState returns the engine state for a store benchmark.
func benchState(b *testing.B, kind string) (journal.Store, guard.Limiter, faucet.History) {
	var st store.Store
	var err error
	switch kind {
	case "memory":
		return journal.NewMemoryStore(), guard.NewMemoryLimiter(), nil
	case "sqlite":
		st, err = store.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), store.Options{})
	case "postgres":
		st, err = store.Open(context.Background(), pgtest.Shared(b).CreateDB(b), store.Options{})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st, st, st
}

func runDripLoad(b *testing.B, latency time.Duration, mode string, conc int) {
	keys := make([]*stacks.PrivateKey, benchKeys)
	genesis := map[stacks.Address]uint64{}
	for i := range keys {
		keys[i] = newKey(b)
		genesis[keys[i].TestnetAddress()] = 1 << 62
	}
	dn := devnode.New(devnode.Config{Genesis: genesis, Seed: 1, SendManyContract: stacks.SendManyMemoTestnet})
	nodeSrv := httptest.NewServer(dn.Handler())
	defer nodeSrv.Close()
	client, err := node.New(nodeSrv.URL) // the default client, as serve has it
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var h http.Handler
	unique := strings.HasPrefix(mode, "store:")
	batchMax := 1
	switch {
	case mode == "default" || mode == "batching-off" || unique:
		// serve's defaults: busy wait, adaptive batching up to 200 per call.
		cfg := faucet.Config{Keys: keys, Node: client, Timing: faucet.Timing{BusyWait: faucet.DefaultBusyWait}}
		if mode == "default" {
			cfg.Batching.Max = faucet.DefaultBatchMax
			batchMax = faucet.DefaultBatchMax
		}
		var limits *guard.RateLimits
		if unique {
			var limiter guard.Limiter
			cfg.State.Journal, limiter, cfg.State.History = benchState(b, strings.TrimPrefix(mode, "store:"))
			l := guard.DefaultLimits()
			l.PerIP = guard.Limit{} // every bench client is 127.0.0.1
			limits = guard.NewRateLimits(l, limiter, nil)
		}
		f, err := faucet.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		go func() { _ = f.Run(ctx) }()
		h = New(Config{Faucet: f, Node: client, Limits: limits, Metrics: NewMetrics(prometheus.NewRegistry())})
	case mode == "serialised":
		h = &serialisedFaucet{node: client, keys: keys, next: map[stacks.Address]uint64{}}
	}
	// Latency applies from here on, to the measured load only.
	dn.SetLatency(latency)
	go mineEvery(ctx, dn, benchBlockTime)
	srv := httptest.NewServer(h)
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	n := 16
	if unique {
		n = b.N + rttSamples
	}
	recipients := make([]string, n)
	for i := range recipients {
		recipients[i] = newRecipient(b)
	}
	var used atomic.Int64 // recipients taken, for the unique modes
	drip := func() (time.Duration, error) {
		i := int(used.Add(1)-1) % len(recipients)
		t0 := time.Now()
		resp, err := hc.Post(srv.URL+"/extended/v1/faucets/stx?address="+recipients[i], "", nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		return time.Since(t0), err
	}

	// RTT: a lone drip's round trip at this latency, the median of a few
	// one after another (each alone in its block's mempool).
	rtts := make([]time.Duration, rttSamples)
	for i := range rtts {
		var err error
		if rtts[i], err = drip(); err != nil {
			b.Fatalf("calibration drip: %v", err)
		}
	}
	slices.Sort(rtts)
	rtt := rtts[len(rtts)/2]
	// Transactions sent: the keys' nonces, once the mempool has drained.
	nonces := func() (sum uint64) {
		for dn.MempoolSize() > 0 {
			time.Sleep(benchBlockTime)
		}
		for _, k := range keys {
			_, nonce := dn.Account(k.TestnetAddress())
			sum += nonce
		}
		return sum
	}
	txsBefore := nonces()

	total := b.N
	if conc == burstSize {
		total = burstSize // one burst, whatever b.N
	}
	lat := make([]time.Duration, total)
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	cpuStart, cpuKnown := processCPU()
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				var err error
				if lat[i], err = drip(); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpuEnd, _ := processCPU()
	b.StopTimer()
	if n := failed.Load(); n > 0 && conc != burstSize {
		b.Fatalf("%d of %d drips failed, the first: %v", n, total, firstErr.Load())
	}
	txs := nonces() - txsBefore
	slices.Sort(lat)
	rate := float64(total-int(failed.Load())) / elapsed.Seconds()
	// The chain pays keys × 25 transactions a block, each up to batchMax
	// drips; conc clients ask at most conc per RTT.
	chain := float64(benchKeys*faucet.DefaultMaxInFlight*batchMax) / benchBlockTime.Seconds()
	limit := min(chain, float64(conc)/rtt.Seconds())
	b.ReportMetric(rate, "drips/s")
	b.ReportMetric(limit, "limit-drips/s")
	b.ReportMetric(rate/limit, "of-limit")
	ceiling := fmt.Sprintf("%s/%d", mode, conc)
	if latency == 0 {
		zeroLatencyRate.Store(ceiling, rate)
	} else if r, ok := zeroLatencyRate.Load(ceiling); ok {
		b.ReportMetric(rate/r.(float64), "of-0ms")
	}
	b.ReportMetric(float64(rtt.Microseconds())/1000, "rtt-ms")
	if cpuKnown {
		// The machine's share: near 1, the cores (which the client and
		// the devnode share with the faucet) bound the run, not the
		// faucet's waiting.
		b.ReportMetric(float64(cpuEnd-cpuStart)/float64(elapsed)/float64(runtime.GOMAXPROCS(0)), "cpu")
	}
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	if txs > 0 {
		b.ReportMetric(float64(total-int(failed.Load()))/float64(txs), "drips/tx")
	}
	if conc == burstSize {
		b.ReportMetric(float64(failed.Load()), "busy")
	}
	b.ReportMetric(0, "ns/op") // per-op time is meaningless for a concurrent load
}

// mineEvery mines a block of dn every d until ctx ends.
func mineEvery(ctx context.Context, dn *devnode.Node, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			dn.Mine()
		}
	}
}

// zeroLatencyRate holds the drips/s of each mode and concurrency run with
// no node latency (the last such run): what the machine does when only its
// cores bound the load. A latency run reports its share of it, of-0ms.
var zeroLatencyRate sync.Map

// rttSamples is how many lone drips measure a run's RTT.
const rttSamples = 15

// serialisedFaucet is the incumbent's approach, built from our own parts for
// a fair comparison: a global lock around every drip and three node round
// trips (chain check, account nonce, broadcast), rotating keys. It remembers
// the last nonce per key because the node's account nonce ignores the
// mempool, and when the chaining limit is hit it waits for the next block, as
// a one-at-a-time queue would.
type serialisedFaucet struct {
	node *node.Client
	keys []*stacks.PrivateKey

	mu   sync.Mutex
	turn int
	next map[stacks.Address]uint64
}

func (s *serialisedFaucet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	to, err := stacks.ParseTestnetPrincipal(r.URL.Query().Get("address"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := r.Context()
	memo, _ := stacks.NewMemo("faucet")
	for attempt := 0; attempt < 1000; attempt++ {
		key := s.keys[s.turn%len(s.keys)]
		s.turn++
		addr := key.TestnetAddress()
		info, err := s.node.Info(ctx)
		if err != nil || info.NetworkID == stacks.ChainIDMainnet {
			http.Error(w, "node", http.StatusInternalServerError)
			return
		}
		acct, err := s.node.Account(ctx, addr.String())
		if err != nil {
			http.Error(w, "node", http.StatusInternalServerError)
			return
		}
		nonce := max(acct.Nonce, s.next[addr])
		tx, err := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: to, Amount: faucet.DefaultAmount, Nonce: nonce, Fee: 180, Memo: memo, ChainID: info.NetworkID}, key)
		if err != nil {
			http.Error(w, "sign", http.StatusInternalServerError)
			return
		}
		_, err = s.node.Broadcast(ctx, tx.Serialize())
		var rej *node.RejectionError
		if errors.As(err, &rej) && rej.Reason == node.ReasonTooMuchChaining {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			http.Error(w, "broadcast", http.StatusInternalServerError)
			return
		}
		s.next[addr] = nonce + 1
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"success":true,"txId":%q}`, tx.TxID().Hex0x())
		return
	}
	http.Error(w, "busy", http.StatusInternalServerError)
}

// processCPU is the CPU time, user and system, this process has used so
// far; ok is false when the OS does not say.
func processCPU() (_ time.Duration, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
