package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

// The devnet's btcd killed: BTC drips answer again within 15 s without a
// restart of `faucet serve`. The faucet is told the node is unreachable
// while btcd is down (a drip then fails, and /faucet/v1/info says so);
// btcd comes back on the same directory, ports and credentials with the
// chain it had; the devnet's miner goes on; and no payout is paid twice:
// the drip btcd held in its mempool when it died is mined once, and the
// drips refused during the gap never.
func TestDevnetBtcdKilledComesBack(t *testing.T) {
	t.Parallel() // waits on blocks and nodes more than it computes: overlaps the package's other waits
	if _, err := findBtcd(); err != nil {
		if os.Getenv(btcdtest.SkipEnv) == "1" {
			t.Skipf("%v (skipped: %s=1)", err, btcdtest.SkipEnv)
		}
		t.Fatalf("%v: run `make btcd` or set %s (or %s=1 to skip)", err, btcdEnv, btcdtest.SkipEnv)
	}
	base, _ := startServeDevnet(t, "--btc-block-time", "3s", "--btc-limit-ip", "0")
	var amount int64
	eventually.True(t, 60*time.Second, "BTC ready", func() bool {
		st, a, ok := btcInfo(base)
		amount = a
		return ok && st == "ready"
	})
	faucetAddr := btcFaucetAddress(t, base)
	before := findDevnetBtcd(t, faucetAddr)
	node := before.client(t)
	ctx := context.Background()
	start, err := node.BlockCount(ctx)
	if err != nil {
		t.Fatal(err)
	}

	first := newBTCRecipient(t)
	code, txid := dripBTCTo(base, first.Address().String())
	if code != http.StatusOK {
		t.Fatalf("first drip: %d", code)
	}
	mempool, err := node.RawMempool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := strings.Contains(strings.Join(mempool, " "), txid)

	states := watchBTCState(t, base)
	killed := time.Now()
	if err := syscall.Kill(before.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "btcd gone", func() bool { return processGone(before.pid) })

	// Drips until one is paid: the first ones meet btcd down.
	var refused []bitcoin.Address
	var second bitcoin.Address
	if err := eventually.WaitEvery(t, 15*time.Second, 100*time.Millisecond, func() bool {
		to := newBTCRecipient(t)
		if code, _ := dripBTCTo(base, to.Address().String()); code != http.StatusOK {
			refused = append(refused, to.Address())
			return false
		}
		second = to.Address()
		return true
	}); err != nil {
		t.Fatalf("no BTC drip answered 200 within 15s of the kill (%d refused); BTC states %v", len(refused), states.stop())
	}
	back := time.Since(killed)
	t.Logf("BTC drips answer again %s after btcd was SIGKILLed (%d drips refused meanwhile; the first drip was in the mempool: %v)",
		back.Round(time.Millisecond), len(refused), held)
	if len(refused) == 0 {
		t.Error("a drip right after the kill was paid: btcd was never seen down")
	}
	// info catches up with the node on the faucet's next poll.
	eventually.True(t, 10*time.Second, "BTC ready again in info", func() bool {
		st, _, _ := btcInfo(base)
		states.add(st)
		return st == "ready"
	})
	seen := states.stop()
	if len(seen) < 3 || seen[0] != "ready" || seen[len(seen)-1] != "ready" || !strings.HasPrefix(strings.Join(seen[1:len(seen)-1], ","), "node_unreachable") {
		t.Errorf("BTC states in /faucet/v1/info around the kill: %v; want ready, node_unreachable (…), ready", seen)
	}
	t.Logf("BTC states in /faucet/v1/info around the kill: %v", seen)

	after := findDevnetBtcd(t, faucetAddr)
	if after.pid == before.pid || after.args["datadir"] != before.args["datadir"] || after.args["rpclisten"] != before.args["rpclisten"] ||
		after.args["configfile"] != before.args["configfile"] {
		t.Fatalf("restarted btcd %d %v; want another process on %v", after.pid, after.args, before.args)
	}

	// The miner goes on: blocks come without the test mining any, and
	// every payout is mined.
	if err := eventually.WaitEvery(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return strings.Contains(metricsOf(base), `faucet_btc_payouts_in_flight{address="`+faucetAddr+`"} 0`)
	}); err != nil {
		t.Fatalf("payouts still in flight: %v", err)
	}
	paid := receivedByScript(t, node, start)
	for _, a := range []bitcoin.Address{first.Address(), second} {
		if got := paid[hex.EncodeToString(a.PkScript())]; len(got) != 1 || got[0] != amount {
			t.Errorf("%s got %v, want one output of %d sats", a, got, amount)
		}
	}
	for _, a := range refused {
		if got := paid[hex.EncodeToString(a.PkScript())]; len(got) != 0 {
			t.Errorf("%s, refused while btcd was down, got %v", a, got)
		}
	}
}

// btcInfo is BTC's state and drip amount in /faucet/v1/info.
func btcInfo(base string) (state string, amount int64, ok bool) {
	resp, err := http.Get(base + "/faucet/v1/info")
	if err != nil {
		return "", 0, false
	}
	defer resp.Body.Close()
	var info struct {
		Assets []struct {
			Asset  string `json:"asset"`
			State  string `json:"state"`
			Amount int64  `json:"amount"`
		} `json:"assets"`
	}
	if json.NewDecoder(resp.Body).Decode(&info) != nil {
		return "", 0, false
	}
	for _, a := range info.Assets {
		if a.Asset == "btc" {
			return a.State, a.Amount, true
		}
	}
	return "", 0, false
}

// stateLog records BTC's state in /faucet/v1/info as it changes.
type stateLog struct {
	mu     sync.Mutex
	states []string
	done   chan struct{}
	wg     sync.WaitGroup
}

func watchBTCState(t *testing.T, base string) *stateLog {
	l := &stateLog{done: make(chan struct{})}
	l.wg.Go(func() {
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			if st, _, ok := btcInfo(base); ok {
				l.add(st)
			}
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *stateLog) add(st string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.states); st != "" && (n == 0 || l.states[n-1] != st) {
		l.states = append(l.states, st)
	}
}

// stop ends the watch and returns the states seen, in order.
func (l *stateLog) stop() []string {
	l.mu.Lock()
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.states...)
}

// btcFaucetAddress reads the BTC faucet's address from /metrics.
func btcFaucetAddress(t *testing.T, base string) string {
	t.Helper()
	re := regexp.MustCompile(`faucet_btc_balance_sats\{address="([^"]+)"\}`)
	var addr string
	eventually.True(t, 30*time.Second, "the BTC faucet's address in /metrics", func() bool {
		if m := re.FindStringSubmatch(metricsOf(base)); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

func metricsOf(base string) string {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// dripBTCTo asks for a v3 BTC drip to addr: the status code (0 when the
// request failed) and the transaction id.
func dripBTCTo(base, addr string) (int, string) {
	resp, err := http.Post(base+"/extended/v3/faucets/btc", "application/json", strings.NewReader(`{"address":"`+addr+`"}`))
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var body struct {
		Transaction struct {
			TxID string `json:"tx_id"`
		} `json:"transaction"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, strings.TrimPrefix(body.Transaction.TxID, "0x")
}

func newBTCRecipient(t *testing.T) *bitcoin.PrivateKey {
	t.Helper()
	k, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// btcdProc is a devnet btcd this test process runs, found in /proc.
type btcdProc struct {
	pid  int
	args map[string]string // its --name=value arguments
}

// findDevnetBtcd finds the btcd child of this process that mines to
// miningAddr: the devnet's of one `faucet serve` among the package's
// parallel tests.
func findDevnetBtcd(t *testing.T, miningAddr string) btcdProc {
	t.Helper()
	var found btcdProc
	eventually.True(t, 30*time.Second, "a btcd child mining to "+miningAddr, func() bool {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			pid, _ := strconv.Atoi(filepath.Base(d))
			if pid == 0 || parentOf(pid) != os.Getpid() || processGone(pid) {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
			if err != nil {
				continue
			}
			args := map[string]string{}
			for _, a := range strings.Split(string(raw), "\x00") {
				if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
					args[k] = v
				}
			}
			if args["miningaddr"] == miningAddr {
				found = btcdProc{pid: pid, args: args}
				return true
			}
		}
		return false
	})
	return found
}

// client talks to the btcd directly, with the credentials of its config
// file.
func (p btcdProc) client(t *testing.T) *btcnode.Client {
	t.Helper()
	conf, err := os.ReadFile(p.args["configfile"])
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string]string{}
	for _, line := range strings.Split(string(conf), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	c, err := btcnode.New(fmt.Sprintf("http://%s:%s@%s", kv["rpcuser"], kv["rpcpass"], p.args["rpclisten"]))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parentOf is pid's parent process id; 0 when unknown.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// processGone reports whether pid has exited (reaped or not).
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// The gate relays to btcd while open; closed, it refuses connections (a
// payout sent then surely never left) and ends the relayed ones; it opens
// again on the same address.
func TestRPCGate(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("btcd")) }))
	t.Cleanup(backend.Close)
	g := &rpcGate{backend: backend.Listener.Addr().String()}
	t.Cleanup(g.close)
	ctx := context.Background()
	if err := g.open(ctx); err != nil {
		t.Fatal(err)
	}
	addr := g.address()
	get := func() (string, error) {
		resp, err := http.Get("http://" + addr)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := get(); err != nil || body != "btcd" {
		t.Fatalf("through the open gate: %q, %v", body, err)
	}
	live, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	eventually.True(t, 10*time.Second, "the connection is relayed", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.conns) >= 2
	})
	g.close()
	if _, err := get(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("through the closed gate: %v, want connection refused", err)
	}
	_ = live.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := live.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a relayed connection outlived the gate: read %d bytes, %v", n, err)
	}
	if err := g.open(ctx); err != nil || g.address() != addr {
		t.Fatalf("reopened at %s (%v), want %s", g.address(), err, addr)
	}
	if body, err := get(); err != nil || body != "btcd" {
		t.Fatalf("through the reopened gate: %q, %v", body, err)
	}
}
