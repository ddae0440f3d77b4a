package btcdtest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
)

func miningAddr(t *testing.T) string {
	t.Helper()
	a, err := btcutil.NewAddressWitnessPubKeyHash(make([]byte, 20), &chaincfg.RegressionNetParams)
	if err != nil {
		t.Fatal(err)
	}
	return a.EncodeAddress()
}

func refused(addr string) bool {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
	}
	return err != nil
}

func TestStopStartAndKillKeepTheChain(t *testing.T) {
	n := Start(t, miningAddr(t))
	c := n.Client()
	ctx := t.Context()
	hashes, err := c.Generate(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	rpc, p2p := n.RPCAddr(), n.P2PAddr()

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if !refused(rpc) || !refused(p2p) {
		t.Fatal("btcd still listens after Stop")
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if n.RPCAddr() != rpc || n.P2PAddr() != p2p {
		t.Fatalf("restarted on %s/%s, want %s/%s", n.RPCAddr(), n.P2PAddr(), rpc, p2p)
	}
	if tip, err := c.BestBlockHash(ctx); err != nil || tip != hashes[2] {
		t.Fatalf("tip after Stop/Start: %s, %v; want %s", tip, err, hashes[2])
	}
	// The chain keeps growing on the restored blocks.
	more, err := c.Generate(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if tip, err := c.BestBlockHash(ctx); err != nil || tip != more[0] {
		t.Fatalf("tip after Kill/Start: %s, %v; want %s", tip, err, more[0])
	}
	if err := n.Start(); err == nil {
		t.Fatal("a second Start of a running node succeeded")
	}
}

func TestCleanupStopsTheNode(t *testing.T) {
	var rpc string
	t.Run("inner", func(t *testing.T) {
		n := Start(t, miningAddr(t))
		rpc = n.RPCAddr()
		if refused(rpc) {
			t.Fatal("not listening while the test runs")
		}
	})
	if !refused(rpc) {
		t.Fatal("btcd still listens after its test ended")
	}
}

func TestMissingBinary(t *testing.T) {
	t.Setenv(BinEnv, "/nonexistent/btcd")
	_, err := findBinary()
	if err == nil || !strings.Contains(err.Error(), BinEnv+"=/nonexistent/btcd") {
		t.Fatalf("findBinary with a wrong %s: %v", BinEnv, err)
	}

	var skipped bool
	t.Run("skips with "+SkipEnv, func(t *testing.T) {
		t.Setenv(SkipEnv, "1")
		defer func() { skipped = t.Skipped() }()
		Start(t, "unused")
	})
	if !skipped {
		t.Fatalf("Start did not skip with %s=1 and no binary", SkipEnv)
	}
}

func TestRepoRootFindsThisModule(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "server", "chain", "btcnode", "btcdtest", "btcdtest.go")); err != nil {
		t.Fatalf("repoRoot = %q, which does not hold this package: %v", root, err)
	}
}
