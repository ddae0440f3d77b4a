// Package btcdtest runs a real, throwaway btcd node in regtest mode for
// tests: its own temporary directory, RPC and P2P on free 127.0.0.1
// ports, a random RPC user and password, and the test's mining address.
// Start gives a test a node of its own, stopped (SIGTERM, then SIGKILL
// after a bound) and removed at the test's cleanup, pass or fail. Stop or
// Kill, then Start, restart the same node on the same directory and ports,
// for outage and crash tests.
//
// btcd deletes a regtest block database at every start (btcd.go,
// removeRegressionDB), so a restarted btcd would come back at height 0.
// The harness keeps the chain itself instead: Stop and Kill first save
// the main chain's raw blocks over RPC, and Start submits them again
// (submitblock), so the node comes back with the same blocks, hashes and
// transaction index. Not kept: the mempool (btcd never persists it; Core
// does, in mempool.dat) and blocks off the main chain.
//
// The binary is FAUCET_BTCD (the Makefile sets it) or else bin/btcd at
// the root of this repository. Without it the test fails, asking to run
// `make btcd`, unless FAUCET_SKIP_BTCD=1 is set: then it is skipped.
//
// The node's policy is set to what a faucet meets on signet or mainnet
// rather than regtest's laxer defaults; see args.
package btcdtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/launch"
)

const (
	// BinEnv names the btcd binary to run.
	BinEnv = "FAUCET_BTCD"
	// SkipEnv, set to 1, skips btcd tests where the binary is missing.
	SkipEnv = "FAUCET_SKIP_BTCD"

	// readyWithin bounds start-up: a regtest btcd answers RPC within a
	// second or two; the rest is room for a loaded machine.
	readyWithin = 60 * time.Second
	// stopWithin bounds a graceful stop (btcd flushes its UTXO cache)
	// before SIGKILL.
	stopWithin = 30 * time.Second
)

// Option configures a node.
type Option func(*Node)

// WithArgs adds btcd flags, e.g. "--addrindex" for searchrawtransactions.
func WithArgs(args ...string) Option {
	return func(n *Node) { n.extra = append(n.extra, args...) }
}

// Node is one btcd, running or stopped.
type Node struct {
	t          testing.TB
	bin        string
	dir        string // temporary root: home/, data/, logs/, btcd.conf, btcd.out
	rpcPort    int
	p2pPort    int
	user, pass string
	miningAddr string
	extra      []string
	clock      clock.WithTicker // times stops; a test-support default, the real clock

	mu    sync.Mutex
	proc  *launch.Process // nil when stopped
	saved []string        // main-chain blocks (hex) from height 1, to submit at Start
	lost  error           // why the chain could not be saved at the last stop
}

// Start starts a regtest btcd paying mined blocks to miningAddr (a regtest
// address, e.g. bcrt1q...), stopped and removed at t's cleanup.
func Start(t testing.TB, miningAddr string, opts ...Option) *Node {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		if os.Getenv(SkipEnv) == "1" {
			t.Skipf("btcdtest: %v (skipped: %s=1)", err, SkipEnv)
		}
		t.Fatalf("btcdtest: %v: run `make btcd` to build it (or set %s=1 to skip these tests)", err, SkipEnv)
	}
	if miningAddr == "" {
		t.Fatal("btcdtest: a mining address is required (btcd's generate pays --miningaddr)")
	}
	n := &Node{t: t, bin: bin, miningAddr: miningAddr, user: "faucet-" + randomHex(t, 4), pass: randomHex(t, 16),
		clock: clock.RealClock{}}
	for _, o := range opts {
		o(n)
	}
	n.dir = t.TempDir() // removed after the cleanup below has stopped the node
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if err := n.stopLocked(syscall.SIGTERM, false); err != nil {
			t.Errorf("btcdtest: stopping btcd: %v", err)
		}
		if t.Failed() {
			t.Logf("btcdtest: btcd output (tail):\n%s", n.LogTail())
		}
	})
	for _, sub := range []string{"home", "data", "logs"} {
		if err := os.Mkdir(filepath.Join(n.dir, sub), 0o700); err != nil {
			t.Fatalf("btcdtest: %v", err)
		}
	}
	// An empty config file of its own: btcd reads ~/.btcd/btcd.conf
	// otherwise (and creates one with a random password outside regtest).
	if err := os.WriteFile(filepath.Join(n.dir, "btcd.conf"), nil, 0o600); err != nil {
		t.Fatalf("btcdtest: %v", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		t.Fatalf("btcdtest: %v", err)
	}
	n.rpcPort, n.p2pPort = ports[0], ports[1]
	if err := n.Start(); err != nil {
		t.Fatalf("btcdtest: %v", err)
	}
	return n
}

// findBinary returns FAUCET_BTCD, or bin/btcd at the repository root.
func findBinary() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		if !isExec(p) {
			return "", fmt.Errorf("%s=%s is not an executable file", BinEnv, p)
		}
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("btcd not found (%s unset): %w", BinEnv, err)
	}
	p := filepath.Join(root, "bin", "btcd")
	if !isExec(p) {
		return "", fmt.Errorf("btcd not found at %s (%s unset)", p, BinEnv)
	}
	return p, nil
}

// repoRoot walks up from the working directory (a test's package
// directory) to the directory holding this module's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			line, _ := bufio.NewReader(f).ReadString('\n')
			f.Close()
			if strings.TrimSpace(line) == "module github.com/stxfaucet/faucet-operator" {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no github.com/stxfaucet/faucet-operator go.mod above the working directory")
		}
		dir = parent
	}
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// args are btcd's flags. Besides the plumbing (regtest, the temporary
// directory, loopback ports, credentials):
//
//   - --txindex: getrawtransaction of confirmed transactions, which a
//     faucet uses to follow its broadcasts (Core needs -txindex alike);
//   - --rejectnonstd: regtest relays non-standard transactions, signet and
//     mainnet nodes do not; a faucet's transactions must be standard;
//   - --norelaypriority --limitfreerelay=0: btcd still relays free or
//     under-fee transactions with high "priority" (old coins, as mature
//     coinbases are) or within a free-relay allowance; Bitcoin Core dropped
//     both in 0.15, so without these a fee bug would pass here and fail
//     against Core;
//   - --nocfilters: no BIP 157 filters to build per block, which the faucet
//     does not use: less work on a shared test machine;
//   - --utxocachemaxsize=16: btcd allocates its whole UTXO cache up front
//     (250 MiB by default); a regtest chain has a few hundred coins, and
//     several test nodes may run at once.
//
// Not set: --addrindex (searchrawtransactions is btcd-only; the faucet
// follows blocks instead; WithArgs adds it for a test that wants it) and
// the minimum relay fee (btcd's default, 1000 sat/kB, is Core's).
func (n *Node) args() []string {
	a := []string{
		"--regtest",
		"--configfile=" + filepath.Join(n.dir, "btcd.conf"),
		"--datadir=" + filepath.Join(n.dir, "data"),
		"--logdir=" + filepath.Join(n.dir, "logs"),
		"--listen=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.p2pPort)),
		"--rpclisten=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.rpcPort)),
		"--notls", // allowed only on loopback, which is all it listens on
		"--rpcuser=" + n.user,
		"--rpcpass=" + n.pass,
		"--miningaddr=" + n.miningAddr,
		"--txindex",
		"--rejectnonstd",
		"--norelaypriority",
		"--limitfreerelay=0",
		"--nocfilters",
		"--utxocachemaxsize=16",
	}
	return append(a, n.extra...)
}

// Start (re)starts the node on its directory and ports, waits until its
// RPC answers and submits the chain saved when it stopped. The package's
// Start has done this once already; call it again after Stop or Kill.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return errors.New("btcd is already running")
	}
	// Not tied to any context: the node outlives every call, and Stop ends it.
	cmd := exec.CommandContext(context.Background(), n.bin, n.args()...)
	cmd.Dir = n.dir
	// HOME of its own: btcd creates ~/.btcd even when every path is given.
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(n.dir, "home"))
	// The node dies with the test binary, even when that is killed.
	proc, err := launch.Start(cmd, launch.Config{Log: n.logPath(), Clock: n.clock})
	if err != nil {
		return err
	}
	n.proc = proc
	if err := n.waitReady(); err != nil {
		_ = n.stopLocked(syscall.SIGKILL, false) // the readiness failure is the error to report
		return err
	}
	if err := n.restoreChain(); err != nil {
		_ = n.stopLocked(syscall.SIGKILL, false)
		return err
	}
	return nil
}

// waitReady polls getblockcount until it answers or btcd exits.
func (n *Node) waitReady() error {
	c := n.newClient(rpcclient.WithTimeout(2 * time.Second))
	var last error
	exited := false
	err := eventually.WaitEvery(n.t, readyWithin, 20*time.Millisecond, func() bool {
		select {
		case <-n.proc.Exited():
			exited = true
			return true
		default:
		}
		_, last = c.BlockCount(context.Background())
		return last == nil
	})
	switch {
	case exited:
		return fmt.Errorf("btcd exited during start-up:\n%s", n.LogTail())
	case err != nil:
		return fmt.Errorf("btcd RPC not ready (%w): last error: %w\n%s", err, last, n.LogTail())
	}
	return nil
}

// Stop saves the chain and shuts the node down gracefully (SIGTERM),
// SIGKILLing it if it has not exited within a bound. Start brings it back.
func (n *Node) Stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stopLocked(syscall.SIGTERM, true)
}

// Kill saves the chain and ends the node with SIGKILL, as a crash would:
// what btcd had in memory (its mempool) is gone. Start brings it back.
func (n *Node) Kill() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stopLocked(syscall.SIGKILL, true)
}

// StopEmpty shuts the node down and forgets its chain: Start then brings
// up an empty regtest chain, as a regtest node restarted without its data
// does (btcd wipes regtest at start).
func (n *Node) StopEmpty() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.stopLocked(syscall.SIGTERM, false)
	n.saved, n.lost = nil, nil
	return err
}

func (n *Node) stopLocked(sig syscall.Signal, keepChain bool) error {
	if n.proc == nil {
		return nil
	}
	defer func() { n.proc = nil }()
	if keepChain {
		n.saved, n.lost = n.saveChain()
	}
	return n.proc.Stop(launch.Step{Signal: sig, Grace: stopWithin})
}

// saveChain reads the main chain's blocks, raw, from height 1 to the tip.
func (n *Node) saveChain() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	c := n.newClient()
	tip, err := c.BlockCount(ctx)
	if err != nil {
		return nil, err
	}
	blocks := make([]string, 0, tip)
	for h := int64(1); h <= tip; h++ {
		hash, err := c.BlockHash(ctx, h)
		if err != nil {
			return nil, err
		}
		raw, err := c.BlockRaw(ctx, hash)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, hex.EncodeToString(raw))
	}
	return blocks, nil
}

// restoreChain submits the saved blocks to the freshly started node.
func (n *Node) restoreChain() error {
	if n.lost != nil {
		return fmt.Errorf("btcd restarted empty: its chain could not be saved when it stopped: %w", n.lost)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	c := n.newClient()
	for i, b := range n.saved {
		// null on success, else the reason ("rejected: ...")
		var reason *string
		if err := c.Call(ctx, "submitblock", []any{b}, &reason); err != nil {
			return fmt.Errorf("restoring block %d: %w", i+1, err)
		}
		if reason != nil {
			return fmt.Errorf("restoring block %d: submitblock: %s", i+1, *reason)
		}
	}
	h, err := c.BlockCount(ctx)
	if err != nil {
		return fmt.Errorf("restoring the chain: %w", err)
	}
	if h != int64(len(n.saved)) {
		return fmt.Errorf("restored the chain to height %d, want %d", h, len(n.saved))
	}
	return nil
}

// Client returns a client for the node, with the credentials.
func (n *Node) Client(opts ...rpcclient.Option) *btcnode.Client {
	return n.newClient(opts...)
}

func (n *Node) newClient(opts ...rpcclient.Option) *btcnode.Client {
	c, err := btcnode.New(n.URL(), opts...)
	if err != nil {
		n.t.Fatalf("btcdtest: %v", err)
	}
	return c
}

// URL is the RPC URL with the credentials, as a faucet is configured.
func (n *Node) URL() string {
	u := url.URL{Scheme: "http", User: url.UserPassword(n.user, n.pass), Host: n.RPCAddr()}
	return u.String()
}

// RPCAddr is the RPC listener, 127.0.0.1:port.
func (n *Node) RPCAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.rpcPort)) }

// P2PAddr is the peer-to-peer listener, 127.0.0.1:port, for a second node
// to connect to (--connect).
func (n *Node) P2PAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.p2pPort)) }

// User and Password are the RPC credentials.
func (n *Node) User() string     { return n.user }
func (n *Node) Password() string { return n.pass }

// MiningAddr is the address generate pays.
func (n *Node) MiningAddr() string { return n.miningAddr }

// Dir is the node's temporary root; its data directory is Dir()/data.
func (n *Node) Dir() string { return n.dir }

// LogTail is the end of btcd's output, for failure messages.
func (n *Node) LogTail() string { return launch.Tail(n.logPath(), 6000) }

// logPath is where btcd's output goes.
func (n *Node) logPath() string { return filepath.Join(n.dir, "btcd.out") }

// String describes the node for test logs.
func (n *Node) String() string { return "btcd regtest on " + n.RPCAddr() + " (" + n.dir + ")" }

// freePorts asks the kernel for k distinct free TCP ports on 127.0.0.1,
// holding each until all are found so none is handed out twice.
func freePorts(k int) ([]int, error) {
	var lc net.ListenConfig
	ports := make([]int, 0, k)
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range k {
		l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("btcdtest: %v", err)
	}
	return hex.EncodeToString(b)
}

// Outputs lists, by output script (hex), the value of every output in c's
// main chain above height from: what each address was paid there.
func Outputs(t testing.TB, c *btcnode.Client, from int64) map[string][]int64 {
	t.Helper()
	ctx := context.Background()
	tip, err := c.BlockCount(ctx)
	if err != nil {
		t.Fatalf("btcdtest: %v", err)
	}
	out := map[string][]int64{}
	for h := from + 1; h <= tip; h++ {
		hash, err := c.BlockHash(ctx, h)
		if err != nil {
			t.Fatalf("btcdtest: %v", err)
		}
		b, err := c.Block(ctx, hash)
		if err != nil {
			t.Fatalf("btcdtest: %v", err)
		}
		for _, tx := range b.Txs {
			for _, o := range tx.Vout {
				out[o.ScriptPubKey] = append(out[o.ScriptPubKey], o.Value)
			}
		}
	}
	return out
}
