package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// `faucet devnet` deploys send-many-memo at its testnet id, so a send-many
// call is admitted as on testnet; a malformed contract id is refused.
func TestDevnetSendManyContract(t *testing.T) {
	if err := runDevnet(context.Background(), clock.RealClock{}, []string{"--fund", "ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXQ=1", "--send-many-contract", "not-a-contract"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--send-many-contract") {
		t.Fatalf("bad contract id: %v", err)
	}

	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	client := startDevnet(t, "--fund", key.TestnetAddress().String()+"=1000000000")
	to, _ := stacks.GeneratePrivateKey()
	tx, err := stacks.NewSendMany(stacks.SendManyParams{
		Recipients: []stacks.SendManyEntry{{To: stacks.Principal{Address: to.TestnetAddress()}, Amount: 1_000, Memo: []byte("hi")}},
		Fee:        10_000,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Broadcast(context.Background(), tx.Serialize()); err != nil {
		t.Fatalf("send-many refused by the devnet: %v", err)
	}
}

// `faucet devnet` deploys the sBTC token at its testnet id and mints each
// --fund-key-file key its share, so a separate `faucet serve --sbtc-…`
// drips sBTC; a token the node cannot deploy is refused.
func TestDevnetToken(t *testing.T) {
	if err := runDevnet(context.Background(), clock.RealClock{}, []string{"--fund", "ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXQ=1",
		"--token-asset", "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::other-token"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--token-asset") {
		t.Fatalf("a token the node does not define: %v", err)
	}
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := t.TempDir() + "/keys"
	if err := os.WriteFile(keyFile, []byte(key.Hex()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client := startDevnet(t, "--fund-key-file", keyFile, "--fund-token-amount", "12345")
	asset, err := stacks.ParseAssetID(settings.SBTCTestnet)
	if err != nil {
		t.Fatal(err)
	}
	bal, err := client.TokenBalance(context.Background(), asset.Contract, stacks.Principal{Address: key.TestnetAddress()})
	if err != nil || bal != 12345 {
		t.Fatalf("the key's sBTC: %d, %v; want 12345", bal, err)
	}
}

// startDevnet runs `faucet devnet` with args on a free port until the test
// ends, and returns a client of its RPC (the one line it prints names it).
// `faucet devnet --upstream` serves a second front end of a running
// devnode: it answers for the same chain, and a transaction sent through it
// reaches that chain's mempool. A URL without a scheme is a usage error.
func TestDevnetFrontEnd(t *testing.T) {
	if err := runDevnet(context.Background(), clock.RealClock{}, []string{"--upstream", "devnode:20443"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--upstream") {
		t.Fatalf("an upstream without a scheme: %v", err)
	}
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first := startDevnet(t, "--fund", key.TestnetAddress().String()+"=1000000000")
	second := startDevnet(t, "--upstream", first.URL())
	i1, err := first.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i2, err := second.Info(ctx)
	if err != nil || i2.NetworkID != i1.NetworkID || i2.StacksTipHeight != i1.StacksTipHeight {
		t.Fatalf("the front end's /v2/info %+v, %v; want the devnode's %+v", i2, err, i1)
	}
	to, _ := stacks.GeneratePrivateKey()
	tx, err := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: stacks.Principal{Address: to.TestnetAddress()}, Amount: 1_000, Fee: 10_000}, key)
	if err != nil {
		t.Fatal(err)
	}
	txid, err := second.Broadcast(ctx, tx.Serialize())
	if err != nil {
		t.Fatalf("broadcast through the front end: %v", err)
	}
	if held, err := first.MempoolTx(ctx, txid); err != nil || !held {
		t.Fatalf("the devnode's mempool holds %s: %v, %v", txid, held, err)
	}
}

func startDevnet(t *testing.T, args ...string) *node.Client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runDevnet(ctx, clock.RealClock{}, append([]string{"--listen", "127.0.0.1:0", "--block-time", "1h", "--log-format", "text"}, args...), pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("devnet: %v", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("devnet did not start: %v", err)
	}
	_, rest, _ := strings.Cut(line, "RPC at ")
	url, _, _ := strings.Cut(rest, " ")
	client, err := node.New(url)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
