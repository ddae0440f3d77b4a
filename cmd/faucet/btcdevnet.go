package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/launch"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

// The devnet's Bitcoin node: btcd in regtest mode, on a loopback port with
// random credentials and a throwaway directory, mining to the faucet's
// generated key until its first coinbase is spendable, then a block every
// --btc-block-time. It stops with the command (and dies with it if the
// command is killed).

// btcdEnv names the btcd binary, as for the tests.
const btcdEnv = "FAUCET_BTCD"

// devnetBTCBlocks is mined at start: coinbase outputs need 100
// confirmations, so 110 blocks leave 10 spendable 50-BTC coinbases.
const devnetBTCBlocks = btcfaucet.CoinbaseMaturity + 10

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

// devnetBtcd is a running devnet btcd.
type devnetBtcd struct {
	url    string // with credentials: for the faucet's own client only
	public string // without them, for banners and logs
	key    *bitcoin.PrivateKey
	client *btcnode.Client
	clock  clock.WithTicker // paces start-up polls and mining
	// Stop ends btcd (SIGTERM, SIGKILL after 15 s) and removes its
	// directory; the command defers it, so it runs before the process
	// exits. Safe to call more than once.
	Stop func()
}

// startDevnetBtcd starts btcd, mines the faucet key's first coins and keeps
// mining every blockTime until ctx ends, when btcd is stopped and its
// directory removed.
func startDevnetBtcd(ctx context.Context, bin string, blockTime time.Duration, logger *slog.Logger) (*devnetBtcd, error) {
	key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "faucet-devnet-btcd-")
	if err != nil {
		return nil, fmt.Errorf("btcd: %w", err)
	}
	ports, err := loopbackPorts(ctx, 2)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("btcd: %w", err)
	}
	user, pass := "faucet", randomToken()
	rpcAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	for _, sub := range []string{"home", "data", "logs"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("btcd: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "btcd.conf"), nil, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("btcd: %w", err)
	}
	args := []string{
		"--regtest", "--notls",
		"--configfile=" + filepath.Join(dir, "btcd.conf"),
		"--datadir=" + filepath.Join(dir, "data"), "--logdir=" + filepath.Join(dir, "logs"),
		"--listen=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])), "--rpclisten=" + rpcAddr,
		"--rpcuser=" + user, "--rpcpass=" + pass,
		"--miningaddr=" + key.Address().String(),
		// txindex for the drip status page, addrindex for the balance endpoint.
		"--txindex", "--addrindex", "--nocfilters", "--utxocachemaxsize=16",
	}
	// The command is the composition root of the devnet: the real clock.
	clk := clock.RealClock{}
	cmd := exec.CommandContext(context.WithoutCancel(ctx), bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(dir, "home"))
	proc, err := launch.Start(cmd, launch.Config{Log: filepath.Join(dir, "btcd.out"), Clock: clk})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	exited := proc.Exited()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = proc.Stop(launch.Step{Signal: syscall.SIGTERM, Grace: 15 * time.Second})
			_ = os.RemoveAll(dir)
		})
	}
	d := &devnetBtcd{
		url:    "http://" + user + ":" + pass + "@" + rpcAddr,
		public: "http://" + rpcAddr,
		key:    key,
		clock:  clk,
		Stop:   stop,
	}
	if d.client, err = btcnode.New(d.url, rpcclient.WithTimeout(30*time.Second), rpcclient.WithClock(clk)); err != nil {
		stop()
		return nil, err
	}
	if err := d.waitAndMine(ctx, exited); err != nil {
		stop()
		return nil, fmt.Errorf("btcd (log in %s): %w", filepath.Join(dir, "btcd.out"), err)
	}
	go d.mineEvery(ctx, blockTime, exited, logger)
	return d, nil
}

// mineEvery mines a block every blockTime until ctx ends or btcd exits.
func (d *devnetBtcd) mineEvery(ctx context.Context, blockTime time.Duration, exited <-chan struct{}, logger *slog.Logger) {
	t := d.clock.NewTicker(blockTime)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-exited:
			logger.Error("devnet btcd exited")
			return
		case <-t.C():
			if _, err := d.client.Generate(ctx, 1); err != nil && ctx.Err() == nil {
				logger.Warn("devnet btcd: mining a block failed", "err", err)
			}
		}
	}
}

// waitAndMine waits for btcd's RPC, then mines devnetBTCBlocks.
func (d *devnetBtcd) waitAndMine(ctx context.Context, exited <-chan struct{}) error {
	const readyWithin = 60 * time.Second
	deadline := d.clock.NewTimer(readyWithin)
	defer deadline.Stop()
	poll := d.clock.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		_, err := d.client.BlockCount(ctx)
		if err == nil {
			break
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
	// btcd mines at most a few hundred blocks per generate call comfortably.
	if _, err := d.client.Generate(ctx, devnetBTCBlocks); err != nil {
		return fmt.Errorf("mine the first %d blocks: %w", devnetBTCBlocks, err)
	}
	return nil
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
