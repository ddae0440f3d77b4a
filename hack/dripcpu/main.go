// Command dripcpu measures what one drip costs the faucet in CPU: it sends
// -n v3 STX drips to fresh addresses, -c at a time, each on a new
// connection (as a crowd of clients does), and reads the faucet process's
// CPU time from /proc before and after. -warmup drips go first, unmeasured,
// so that start-up work (the engine's first syncs) is not counted.
//
//	faucet devnet --fund-key-file keys --listen 127.0.0.1:20443 &
//	faucet serve --node-url http://127.0.0.1:20443 --key-file keys --store memory \
//	  --limit-address 0 --limit-ip 0 --budget asset=stx,amount=0 &
//	go run ./hack/dripcpu -url http://127.0.0.1:3999 -pid $!
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:3999", "the faucet's base URL")
	n := flag.Int("n", 2000, "drips to measure")
	c := flag.Int("c", 16, "drips in flight at once")
	pid := flag.Int("pid", 0, "the faucet's process id (its CPU time is read from /proc)")
	floor := flag.String("floor", "", "GET this path instead of dripping: the cost of a request that does nothing, on a new connection")
	warmup := flag.Int("warmup", 200, "requests sent first and not measured")
	flag.Parse()
	if *pid == 0 {
		fmt.Fprintln(os.Stderr, "dripcpu: -pid is required")
		os.Exit(2)
	}
	b := burster{url: *url, floor: *floor, c: *c, clock: clock.RealClock{},
		// A new connection per request: no keep-alive.
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	if err := measure(b, *pid, *warmup, *n); err != nil {
		fmt.Fprintln(os.Stderr, "dripcpu:", err)
		os.Exit(1)
	}
}

// measure sends warmup requests, then n more, and prints what the n cost
// process pid in CPU time.
func measure(b burster, pid, warmup, n int) error {
	if _, _, _, err := b.run(warmup); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	before, err := cpuTime(pid)
	if err != nil {
		return err
	}
	ok, failed, elapsed, err := b.run(n)
	if err != nil {
		return err
	}
	after, err := cpuTime(pid)
	if err != nil {
		return err
	}
	cpu := after - before
	fmt.Printf("drips: %d ok, %d failed in %v (%.0f/s)\n", ok, failed, elapsed.Round(time.Millisecond), float64(ok)/elapsed.Seconds())
	if ok > 0 {
		fmt.Printf("faucet CPU: %v, %v per drip\n", cpu, (cpu / time.Duration(ok)).Round(time.Microsecond))
	}
	return nil
}

// burster sends bursts of requests, c at a time.
type burster struct {
	url, floor string
	c          int
	client     *http.Client
	clock      clock.PassiveClock // the tool's one clock
}

// run sends n requests and counts the answers.
func (b burster) run(n int) (ok, failed int64, elapsed time.Duration, err error) {
	addrs := make([]string, n)
	for i := range addrs {
		a := stacks.Address{Version: stacks.AddressVersionTestnetSingleSig}
		_, _ = rand.Read(a.Hash160[:])
		addrs[i] = a.String()
	}
	var next, good, bad atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	start := b.clock.Now()
	for range b.c {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := b.one(addrs[i]); err != nil {
					bad.Add(1)
					firstErr.Do(func() { fmt.Fprintln(os.Stderr, "first failure:", err) })
					continue
				}
				good.Add(1)
			}
		})
	}
	wg.Wait()
	return good.Load(), bad.Load(), b.clock.Since(start), nil
}

// one sends one request: a v3 drip to addr, or a GET of the floor path.
func (b burster) one(addr string) error {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, b.url+"/extended/v3/faucets/stx",
		strings.NewReader(`{"address":"`+addr+`"}`))
	if b.floor != "" {
		req, err = http.NewRequestWithContext(context.Background(), http.MethodGet, b.url+b.floor, nil)
	}
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	return nil
}

// cpuTime is the time the process's threads spent on a CPU, to the
// nanosecond: the sum of /proc/PID/task/*/schedstat's first field (the
// 10 ms ticks of /proc/PID/stat are too coarse for a few thousand drips).
// The Go runtime keeps its threads, so none is lost between two reads.
func cpuTime(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, fmt.Errorf("read the faucet's threads: %w", err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/%d/task/%s/schedstat: %w", pid, t.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}
