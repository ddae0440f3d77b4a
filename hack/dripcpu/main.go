// Command dripcpu measures what one drip costs the faucet in CPU: it sends
// -n v3 STX drips to fresh addresses, -c at a time, each on a new
// connection (as a crowd of clients does), and reads the faucet process's
// CPU time from /proc before and after.
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
	n := flag.Int("n", 2000, "drips to send")
	c := flag.Int("c", 16, "drips in flight at once")
	pid := flag.Int("pid", 0, "the faucet's process id (its CPU time is read from /proc)")
	floor := flag.String("floor", "", "GET this path instead of dripping: the cost of a request that does nothing, on a new connection")
	flag.Parse()
	if *pid == 0 {
		fmt.Fprintln(os.Stderr, "dripcpu: -pid is required")
		os.Exit(2)
	}
	if err := run(*url, *floor, *n, *c, *pid); err != nil {
		fmt.Fprintln(os.Stderr, "dripcpu:", err)
		os.Exit(1)
	}
}

func run(url, floor string, n, c, pid int) error {
	// A new connection per request: no keep-alive.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	addrs := make([]string, n)
	for i := range addrs {
		a := stacks.Address{Version: stacks.AddressVersionTestnetSingleSig}
		_, _ = rand.Read(a.Hash160[:])
		addrs[i] = a.String()
	}
	before, err := cpuTicks(pid)
	if err != nil {
		return err
	}
	var next, ok, failed atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	clk := clock.RealClock{} // the tool's one clock
	start := clk.Now()
	for range c {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/extended/v3/faucets/stx",
					strings.NewReader(`{"address":"`+addrs[i]+`"}`))
				if floor != "" {
					req, err = http.NewRequestWithContext(context.Background(), http.MethodGet, url+floor, nil)
				}
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					firstErr.Do(func() { fmt.Fprintln(os.Stderr, "first failure:", err) })
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstErr.Do(func() { fmt.Fprintf(os.Stderr, "first failure: %d %s\n", resp.StatusCode, b) })
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := clk.Since(start)
	after, err := cpuTicks(pid)
	if err != nil {
		return err
	}
	cpu := time.Duration(after-before) * time.Second / 100 // USER_HZ is 100 on Linux
	fmt.Printf("drips: %d ok, %d failed in %v (%.0f/s)\n", ok.Load(), failed.Load(), elapsed.Round(time.Millisecond), float64(ok.Load())/elapsed.Seconds())
	if ok.Load() > 0 {
		fmt.Printf("faucet CPU: %v, %v per drip\n", cpu, (cpu / time.Duration(ok.Load())).Round(time.Microsecond))
	}
	return nil
}

// cpuTicks is the process's user + system time in clock ticks
// (/proc/PID/stat fields 14 and 15).
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the faucet's CPU time: %w", err)
	}
	// The command name (field 2) may hold spaces: count from after its ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return utime + stime, nil
}
