package faucet

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// benchModes compares plain transfers with send-many batches of 200.
var benchModes = []struct {
	name string
	cfg  Config
}{
	{"single", Config{}},
	{"batch200", Config{Batching: Batching{Max: MaxBatch, Window: 250 * time.Millisecond}}},
	{"adaptive200", Config{Batching: Batching{Max: MaxBatch}}},
}

// BenchmarkBatchCapacity offers 6,000 concurrent default drips to ONE key
// while no block is mined, and reports how many the key pays before the
// next block (drips/block/key) and how fast they are answered (drips/s).
// Plain transfers stop at the node's chaining limit (25); batches at 25
// send-many calls of 200.
func BenchmarkBatchCapacity(b *testing.B) {
	const offered = 6000
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			var paid int
			var elapsed time.Duration
			for range b.N {
				b.StopTimer()
				e := newEnv(b, 1, 10_000_000*DefaultAmount, devnode.Config{SendManyContract: sendManyID}, m.cfg)
				to := recipients(b, offered)
				b.StartTimer()
				start := time.Now()
				outs := dripAll(e.f, to)
				elapsed += time.Since(start)
				for _, o := range outs {
					if o.err == nil {
						paid++
					}
				}
			}
			b.ReportMetric(float64(paid)/float64(b.N), "drips/block/key")
			b.ReportMetric(float64(paid)/elapsed.Seconds(), "drips/s")
		})
	}
}

// BenchmarkBatchLatency measures what the window adds to a drip's answer:
// 20 drips spread over one second (a load one key pays without batching),
// reporting the p50 and p99 time to an answer.
func BenchmarkBatchLatency(b *testing.B) {
	const drips = 20
	const spacing = 50 * time.Millisecond
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			var lat []time.Duration
			for range b.N {
				b.StopTimer()
				e := newEnv(b, 1, 10_000_000*DefaultAmount, devnode.Config{SendManyContract: sendManyID}, m.cfg)
				to := recipients(b, drips)
				b.StartTimer()
				var mu sync.Mutex
				var wg sync.WaitGroup
				for i, r := range to {
					time.Sleep(spacing * time.Duration(min(i, 1)))
					wg.Go(func() {
						start := time.Now()
						_, err := e.f.Drip(context.Background(), Request{Recipient: r})
						d := time.Since(start)
						if err != nil {
							b.Error(err)
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			slices.Sort(lat)
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[(len(lat)*99)/100]), "p99-ms")
		})
	}
}

const sendManyID = stacks.SendManyMemoTestnet

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
