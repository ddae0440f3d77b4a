package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/launch"
)

// The devnet's Bitcoin node: btcd in regtest mode, on loopback ports with
// random credentials and a throwaway directory, mining to the faucet's
// generated key until its first coinbase is spendable, then a block every
// --btc-block-time. It stops with the command (and dies with it if the
// command is killed). `faucet devnet --btc-listen` runs the same node with
// the credentials and mining address it is given, its gate on the address
// it is told, for a faucet in another process or pod.
//
// When btcd exits on its own (a crash, an OOM kill) it is started again,
// with a back-off, on the same directory, ports and credentials. btcd
// wipes a regtest chain when it starts, so the devnet keeps every block
// it mined and submits them again: the faucet finds the chain it knew.
// The faucet reaches btcd through a gate, a relay on a port of its own
// that is closed while btcd is down or getting its chain back, so the
// faucet sees the node unreachable, never a chain part way restored.

// btcdEnv names the btcd binary, as for the tests.
const btcdEnv = "FAUCET_BTCD"

// devnetBTCBlocks is mined at start: coinbase outputs need 100
// confirmations, so 110 blocks leave 10 spendable 50-BTC coinbases.
const devnetBTCBlocks = btcfaucet.CoinbaseMaturity + 10

// devnetBtcdStop is how the devnet stops btcd: politely, then SIGKILL.
var devnetBtcdStop = []launch.Step{{Signal: syscall.SIGTERM, Grace: 15 * time.Second}}

// errNoBtcd: no btcd binary was found; the devnet runs without BTC.
var errNoBtcd = errors.New("no btcd binary found")

// findBtcd looks for btcd: $FAUCET_BTCD, then beside this executable (make
// builds both into bin/), then on PATH.
func findBtcd() (string, error) {
	if p := os.Getenv(btcdEnv); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("%s=%s is not an executable file", btcdEnv, p)
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), "btcd"); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("btcd"); err == nil {
		return p, nil
	}
	return "", errNoBtcd
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// devnetBtcd is a running, supervised devnet btcd.
type devnetBtcd struct {
	url    string              // the gate's, with credentials: for the faucet's own client only
	key    *bitcoin.PrivateKey // the faucet's, when startDevnetBtcd made it
	client *btcnode.Client     // btcd's own RPC port: mining and the chain's upkeep
	clock  clock.WithTicker    // paces start-up polls, mining and restarts
	gate   *rpcGate
	log    *slog.Logger

	// mu makes mining a block and restoring the chain take turns: a block
	// mined on a chain part way restored would fork it.
	mu    sync.Mutex
	chain savedChain
	up    atomic.Bool // btcd runs with its whole chain, the gate open
	// Stop ends btcd (SIGTERM, SIGKILL after 15 s), for good, and removes
	// its directory; the command defers it, so it runs before the process
	// exits. Safe to call more than once.
	Stop func()
}

// startDevnetBtcd starts btcd for `faucet serve --devnet`: a fresh key
// for the faucet, random credentials, the gate on a free loopback port.
func startDevnetBtcd(ctx context.Context, clk clock.WithTicker, bin string, blockTime time.Duration, logger *slog.Logger) (*devnetBtcd, error) {
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		return nil, err
	}
	d, err := runDevnetBtcd(ctx, clk, devnetBtcdConfig{bin: bin, mineTo: key.Address(), blockTime: blockTime, logger: logger})
	if err != nil {
		return nil, err
	}
	d.key = key
	return d, nil
}

// devnetBtcdConfig is how runDevnetBtcd runs btcd.
type devnetBtcdConfig struct {
	bin string
	// mineTo gets every block's coinbase: the faucet's Bitcoin address.
	mineTo    bitcoin.Address
	blockTime time.Duration
	// listen is the gate's address, where clients reach btcd's RPC; ""
	// is a free loopback port.
	listen string
	// user and pass are btcd's RPC credentials; "" are random ones.
	user, pass string
	logger     *slog.Logger
}

// runDevnetBtcd starts btcd, mines cfg.mineTo's first coins and keeps
// mining every cfg.blockTime until ctx ends or Stop, restarting btcd when
// it exits on its own.
func runDevnetBtcd(ctx context.Context, clk clock.WithTicker, cfg devnetBtcdConfig) (*devnetBtcd, error) {
	dir, err := os.MkdirTemp("", "faucet-devnet-btcd-")
	if err != nil {
		return nil, fmt.Errorf("btcd: %w", err)
	}
	if cfg.user == "" || cfg.pass == "" {
		cfg.user, cfg.pass = "faucet", randomToken()
	}
	args, rpcAddr, err := prepareBtcdDir(ctx, dir, cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("btcd: %w", err)
	}
	user, pass, logger := cfg.user, cfg.pass, cfg.logger
	d := &devnetBtcd{clock: clk, gate: &rpcGate{backend: rpcAddr, addr: cfg.listen}, log: logger}
	if d.client, err = btcnode.New("http://"+user+":"+pass+"@"+rpcAddr, rpcclient.WithTimeout(30*time.Second), rpcclient.WithClock(clk)); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logFile := filepath.Join(dir, "btcd.out")
	sup, err := launch.Supervise(launch.SuperviseConfig{
		Name: "btcd",
		Start: func() (*launch.Process, error) {
			cmd := exec.CommandContext(context.WithoutCancel(ctx), cfg.bin, args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"))
			return launch.Start(cmd, launch.Config{Log: logFile, Clock: clk})
		},
		Up: func(sctx context.Context, p *launch.Process) error {
			// Bringing btcd up ends with the command too, not only with Stop.
			uctx, cancel := context.WithCancel(sctx)
			defer cancel()
			defer context.AfterFunc(ctx, cancel)()
			return d.bringUp(uctx, p)
		},
		Down: d.goneDown, Stop: devnetBtcdStop, Clock: clk, Logger: logger,
	})
	if err != nil {
		// The directory goes: the error carries the end of btcd's log.
		tail := launch.Tail(logFile, 2000)
		d.gate.close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("btcd: %w; its output ended with:\n%s", err, tail)
	}
	d.url = "http://" + user + ":" + pass + "@" + d.gate.address()
	mineCtx, stopMining := context.WithCancel(ctx)
	var once sync.Once
	d.Stop = func() {
		once.Do(func() {
			stopMining()
			d.goneDown() // the faucet is refused at once, not left mid-call
			_ = sup.Stop()
			d.goneDown() // in case a restart opened the gate meanwhile
			_ = os.RemoveAll(dir)
		})
	}
	go d.mineEvery(mineCtx, cfg.blockTime)
	return d, nil
}

// prepareBtcdDir makes btcd's directory: its home, data and logs, and a
// config file (0600) with the RPC credentials, which would show on btcd's
// command line to every local user. It reserves btcd's ports and returns
// btcd's arguments and its RPC address.
func prepareBtcdDir(ctx context.Context, dir string, cfg devnetBtcdConfig) (args []string, rpcAddr string, err error) {
	ports, err := loopbackPorts(ctx, 2)
	if err != nil {
		return nil, "", err
	}
	rpcAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	for _, sub := range []string{"home", "data", "logs"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, "", err
		}
	}
	conf := filepath.Join(dir, "btcd.conf")
	if err := os.WriteFile(conf, []byte("rpcuser="+cfg.user+"\nrpcpass="+cfg.pass+"\n"), 0o600); err != nil {
		return nil, "", err
	}
	args = []string{
		"--regtest", "--notls",
		"--configfile=" + conf,
		"--datadir=" + filepath.Join(dir, "data"), "--logdir=" + filepath.Join(dir, "logs"),
		"--listen=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])), "--rpclisten=" + rpcAddr,
		"--miningaddr=" + cfg.mineTo.String(),
		// txindex for the drip status page, addrindex for the balance endpoint.
		"--txindex", "--addrindex", "--nocfilters", "--utxocachemaxsize=16",
	}
	return args, rpcAddr, nil
}

// bringUp runs after each start of btcd (launch.SuperviseConfig.Up): once
// its RPC answers, it mines the first blocks, or gives a restarted btcd
// back the chain it lost, then opens the gate.
func (d *devnetBtcd) bringUp(ctx context.Context, p *launch.Process) error {
	if err := d.waitRPC(ctx, p.Exited()); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.chain.raws) == 0 {
		// btcd mines at most a few hundred blocks per generate call comfortably.
		if _, err := d.client.Generate(ctx, devnetBTCBlocks); err != nil {
			return fmt.Errorf("mine the first %d blocks: %w", devnetBTCBlocks, err)
		}
	} else {
		if err := d.chain.restore(ctx, d.client); err != nil {
			return err
		}
		// A new block: the faucet's next look at the chain sends its
		// unconfirmed payouts again, which btcd lost with its mempool.
		if _, err := d.client.Generate(ctx, 1); err != nil {
			return fmt.Errorf("mine a block on the restored chain: %w", err)
		}
		d.log.Info("devnet btcd has its chain back", "height", len(d.chain.raws)+1)
	}
	if err := d.chain.save(ctx, d.client); err != nil {
		return err
	}
	if err := d.gate.open(ctx); err != nil {
		return err
	}
	d.up.Store(true)
	return nil
}

// goneDown closes the gate as soon as btcd has exited (Down): the faucet
// finds the node unreachable until it is back with its chain.
func (d *devnetBtcd) goneDown() {
	d.up.Store(false)
	d.gate.close()
}

// mineEvery mines a block every blockTime until ctx ends, skipping the
// ticks that find btcd down.
func (d *devnetBtcd) mineEvery(ctx context.Context, blockTime time.Duration) {
	t := d.clock.NewTicker(blockTime)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			d.mineBlock(ctx)
		}
	}
}

// mineBlock mines one block and saves it.
func (d *devnetBtcd) mineBlock(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.up.Load() {
		return // down, or coming back: it mines again once up
	}
	_, err := d.client.Generate(ctx, 1)
	if err == nil {
		err = d.chain.save(ctx, d.client)
	}
	if err != nil && ctx.Err() == nil && d.up.Load() {
		d.log.Warn("devnet btcd: mining a block failed", "err", err)
	}
}

// waitRPC waits for btcd's RPC to answer.
func (d *devnetBtcd) waitRPC(ctx context.Context, exited <-chan struct{}) error {
	const readyWithin = 60 * time.Second
	deadline := d.clock.NewTimer(readyWithin)
	defer deadline.Stop()
	poll := d.clock.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		_, err := d.client.BlockCount(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("btcd exited during start-up")
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C():
			return fmt.Errorf("RPC not ready after %s: %w", readyWithin, err)
		case <-poll.C():
		}
	}
}

// savedChain is the devnet chain's blocks from height 1, raw, as btcd
// served them: btcd wipes a regtest chain when it starts, so a restarted
// btcd gets them back. The devnet is the chain's only miner; a block
// mined but not yet saved when btcd died is mined anew, a one-block
// reorg the faucet follows. Guarded by devnetBtcd.mu.
type savedChain struct {
	hashes []string
	raws   [][]byte
}

// save reads the blocks of the node's main chain past the saved ones,
// first dropping any the node no longer has at their height.
func (c *savedChain) save(ctx context.Context, n *btcnode.Client) error {
	tip, err := n.BlockCount(ctx)
	if err != nil {
		return fmt.Errorf("save the chain: %w", err)
	}
	for k := len(c.hashes); k > 0; k-- {
		if int64(k) <= tip {
			h, err := n.BlockHash(ctx, int64(k))
			if err != nil {
				return fmt.Errorf("save the chain: %w", err)
			}
			if h == c.hashes[k-1] {
				break
			}
		}
		c.hashes, c.raws = c.hashes[:k-1], c.raws[:k-1]
	}
	for h := int64(len(c.hashes)) + 1; h <= tip; h++ {
		hash, err := n.BlockHash(ctx, h)
		if err != nil {
			return fmt.Errorf("save block %d: %w", h, err)
		}
		raw, err := n.BlockRaw(ctx, hash)
		if err != nil {
			return fmt.Errorf("save block %d: %w", h, err)
		}
		c.hashes, c.raws = append(c.hashes, hash), append(c.raws, raw)
	}
	return nil
}

// restore submits the saved blocks, in order, to a freshly started node.
func (c *savedChain) restore(ctx context.Context, n *btcnode.Client) error {
	for i, raw := range c.raws {
		var reason *string // null on success, else why not
		if err := n.Call(ctx, "submitblock", []any{hex.EncodeToString(raw)}, &reason); err != nil {
			return fmt.Errorf("restore block %d: %w", i+1, err)
		}
		if reason != nil {
			return fmt.Errorf("restore block %d: submitblock: %s", i+1, *reason)
		}
	}
	tip, err := n.BlockCount(ctx)
	if err == nil && tip != int64(len(c.raws)) {
		err = fmt.Errorf("height %d, want %d", tip, len(c.raws))
	}
	if err != nil {
		return fmt.Errorf("restore the chain: %w", err)
	}
	return nil
}

// rpcGate is where the faucet reaches btcd: a TCP relay on a loopback port
// of its own to btcd's RPC port, listening only while btcd is up with its
// chain. Closed, it refuses connections (the faucet knows a payout sent
// then was never sent) and ends the relayed ones. Its port stays the same
// across restarts.
type rpcGate struct {
	backend string

	mu    sync.Mutex
	addr  string       // where it listens: set by the first open unless given
	ln    net.Listener // nil while closed
	conns map[net.Conn]struct{}
}

// open listens, at the gate's address once it has one.
func (g *rpcGate) open(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		return nil
	}
	addr := g.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("btcd RPC gate: %w", err)
	}
	g.addr, g.ln = ln.Addr().String(), ln
	if g.conns == nil {
		g.conns = map[net.Conn]struct{}{}
	}
	go g.serve(ln)
	return nil
}

func (g *rpcGate) address() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addr
}

// close stops listening and ends every relayed connection.
func (g *rpcGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ln != nil {
		_ = g.ln.Close()
		g.ln = nil
	}
	for c := range g.conns {
		_ = c.Close()
	}
	clear(g.conns)
}

func (g *rpcGate) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed
		}
		go g.relay(ln, c)
	}
}

// relay copies between c, accepted on ln, and a new connection to btcd
// until either side ends or the gate closes.
func (g *rpcGate) relay(ln net.Listener, c net.Conn) {
	dialer := net.Dialer{Timeout: 5 * time.Second}
	b, err := dialer.DialContext(context.Background(), "tcp", g.backend)
	if err != nil {
		_ = c.Close()
		return
	}
	g.mu.Lock()
	if g.ln != ln { // closed meanwhile
		g.mu.Unlock()
		_ = c.Close()
		_ = b.Close()
		return
	}
	g.conns[c], g.conns[b] = struct{}{}, struct{}{}
	g.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = b.Close()
	<-done
	g.mu.Lock()
	delete(g.conns, c)
	delete(g.conns, b)
	g.mu.Unlock()
}

// loopbackPorts reserves k free loopback ports (released before btcd binds
// them: a race only with another process picking the same port at once).
func loopbackPorts(ctx context.Context, k int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, k)
	for range k {
		l, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
