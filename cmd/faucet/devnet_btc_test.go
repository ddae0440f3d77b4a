package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// `faucet devnet --btc-listen` is the whole chain of a faucet in another
// process, as the in-cluster devnet sample runs it in a pod of its own:
// the Stacks node funds the faucet's keys with STX and sBTC, btcd mines to
// the faucet's Bitcoin key and takes the credentials file the faucet
// reads. A `faucet serve` given the same three files drips STX, sBTC and
// BTC, each confirmed; stopping the devnet stops btcd and closes its port.
func TestDevnetServesAFaucetAllThreeAssets(t *testing.T) {
	t.Parallel() // waits on blocks more than it computes
	requireBtcd(t)
	stx, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	btcKey, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile, btcKeyFile, creds := writeKeys(t, stx), filepath.Join(dir, "btc-key"), filepath.Join(dir, "credentials")
	writeFile(t, btcKeyFile, btcKey.WIF()+" "+btcKey.Address().String()+"\n")
	writeFile(t, creds, "devnet:"+randomToken()+"\n")

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runDevnet(ctx, clock.RealClock{}, []string{"--listen", "127.0.0.1:0", "--block-time", "1s", "--fund-key-file", keyFile,
			"--btc-listen", "127.0.0.1:0", "--btc-rpc-credentials-file", creds, "--btc-fund-key-file", btcKeyFile, "--btc-block-time", "1s",
			"--log-format", "text", "--log-level", "error"}, pw)
		pw.Close()
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("devnet: %v", err)
		}
	}
	t.Cleanup(stop)
	out := bufio.NewReader(pr)
	stacksURL := urlAfter(t, out, "Stacks node RPC at ")
	btcURL := urlAfter(t, out, "Bitcoin regtest RPC at ")
	go func() { _, _ = io.Copy(io.Discard, out) }()

	// btcd answers with the file's credentials only, and its first coins
	// are the faucet key's.
	u, _ := url.Parse(btcURL)
	wrong, err := btcnode.New("http://devnet:wrong@" + u.Host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.BlockCount(ctx); err == nil {
		t.Error("btcd answered a client with the wrong password")
	}
	line, _ := os.ReadFile(creds)
	node, err := btcnode.New("http://" + strings.TrimSpace(string(line)) + "@" + u.Host)
	if err != nil {
		t.Fatal(err)
	}
	paid := btcdtest.Outputs(t, node, 0)[hex.EncodeToString(btcKey.Address().PkScript())]
	if len(paid) < devnetBTCBlocks {
		t.Fatalf("the faucet's address got %d coinbases, want at least %d", len(paid), devnetBTCBlocks)
	}

	base, _ := serveInProcess(t, io.Discard, "--node-url", stacksURL, "--key-file", keyFile,
		"--sbtc-asset", settings.SBTCTestnet, "--sbtc-amount", "1000",
		"--btc-rpc-url", btcURL, "--btc-rpc-credentials-file", creds, "--btc-key-file", btcKeyFile, "--btc-network", "regtest",
		"--ip-allow", "127.0.0.1", "--log-level", "error")
	eventually.True(t, 60*time.Second, "the BTC faucet is ready", func() bool {
		return strings.Contains(metricsOf(base), "\nfaucet_btc_ready 1\n")
	})
	txids := map[string]string{}
	for _, asset := range []string{"stx", "sbtc"} {
		code, body := post(t, base+"/extended/v1/faucets/"+asset+"?address="+newAddress(t), "", "")
		var v1 struct {
			TxID string `json:"txId"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &v1) != nil || v1.TxID == "" {
			t.Fatalf("%s drip: %d %s", asset, code, body)
		}
		txids[asset] = v1.TxID
	}
	code, txid := dripBTCTo(base, newBTCRecipient(t).Address().String())
	if code != http.StatusOK || txid == "" {
		t.Fatalf("BTC drip: %d", code)
	}
	txids["btc"] = txid
	for asset, id := range txids {
		eventually.True(t, 60*time.Second, asset+" drip "+id+" confirmed", func() bool {
			var d struct {
				State string `json:"state"`
				Asset string `json:"asset"`
			}
			resp, err := http.Get(base + "/faucet/v1/drips/" + id)
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			return json.NewDecoder(resp.Body).Decode(&d) == nil && d.State == "confirmed" && d.Asset == asset
		})
	}

	stop()
	if _, err := node.BlockCount(context.Background()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("btcd's port after the devnet stopped: %v, want connection refused", err)
	}
}

// Bad Bitcoin flags are refused before anything starts, and no error
// quotes the credentials.
func TestDevnetBitcoinFlagErrors(t *testing.T) {
	dir := t.TempDir()
	btcKey, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	other, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, content)
		return p
	}
	creds := file("creds", "devnet:s3cret\n")
	keyFile := file("key", btcKey.WIF()+"\n")
	base := []string{"--listen", "127.0.0.1:0", "--fund", "ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXQ=1"}
	withBTC := func(args ...string) []string {
		return append(append(append([]string{}, base...), "--btc-listen", "127.0.0.1:0"), args...)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"credentials without a node", append(append([]string{}, base...), "--btc-rpc-credentials-file", creds), "need --btc-listen"},
		{"no credentials", withBTC("--btc-fund-key-file", keyFile), "needs --btc-rpc-credentials-file"},
		{"nowhere to mine", withBTC("--btc-rpc-credentials-file", creds), "one of --btc-fund-key-file and --btc-fund-address"},
		{"two places to mine", withBTC("--btc-rpc-credentials-file", creds, "--btc-fund-key-file", keyFile, "--btc-fund-address", btcKey.Address().String()), "one of"},
		{"no block time", withBTC("--btc-rpc-credentials-file", creds, "--btc-fund-key-file", keyFile, "--btc-block-time", "0s"), "--btc-block-time must be positive"},
		{"credentials without a colon", withBTC("--btc-rpc-credentials-file", file("nocolon", "s3cret\n"), "--btc-fund-key-file", keyFile), `want "user:password"`},
		{"a password with a space", withBTC("--btc-rpc-credentials-file", file("space", "devnet:s3cret and more\n"), "--btc-fund-key-file", keyFile), "without spaces"},
		{"a missing credentials file", withBTC("--btc-rpc-credentials-file", filepath.Join(dir, "none"), "--btc-fund-key-file", keyFile), "--btc-rpc-credentials-file"},
		{"a mainnet address", withBTC("--btc-rpc-credentials-file", creds, "--btc-fund-address", "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"), "--btc-fund-address"},
		{"a key file whose address is another key's", withBTC("--btc-rpc-credentials-file", creds, "--btc-fund-key-file", file("mismatch", btcKey.WIF()+" "+other.Address().String()+"\n")), "the address after the key"},
		{"an empty key file", withBTC("--btc-rpc-credentials-file", creds, "--btc-fund-key-file", file("empty", "# nothing\n")), "no key in it"},
	} {
		err := runDevnet(context.Background(), clock.RealClock{}, c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), btcKey.WIF()) {
			t.Errorf("%s: the error quotes a secret: %v", c.name, err)
		}
	}
}

// requireBtcd fails the test without a btcd binary, unless told to skip.
func requireBtcd(t *testing.T) {
	t.Helper()
	if _, err := findBtcd(); err != nil {
		if os.Getenv(btcdtest.SkipEnv) == "1" {
			t.Skipf("%v (skipped: %s=1)", err, btcdtest.SkipEnv)
		}
		t.Fatalf("%v: run `make btcd` or set %s (or %s=1 to skip)", err, btcdEnv, btcdtest.SkipEnv)
	}
}

// urlAfter reads out's next line and returns the URL after prefix in it.
func urlAfter(t *testing.T, out *bufio.Reader, prefix string) string {
	t.Helper()
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("devnet did not start: %v", err)
	}
	_, rest, ok := strings.Cut(line, prefix)
	if !ok {
		t.Fatalf("devnet printed %q, want %q…", line, prefix)
	}
	u, _, _ := strings.Cut(rest, " ")
	return u
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
