package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// `faucet devnet` deploys send-many-memo at its testnet id, so a send-many
// call is admitted as on testnet; a malformed contract id is refused.
func TestDevnetSendManyContract(t *testing.T) {
	if err := runDevnet(context.Background(), []string{"--fund", "ST3M7N9Q9HDRM7RVP1Q26P0EE69358PZZAZD7KMXQ=1", "--send-many-contract", "not-a-contract"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--send-many-contract") {
		t.Fatalf("bad contract id: %v", err)
	}

	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runDevnet(ctx, []string{"--listen", "127.0.0.1:0", "--block-time", "1h", "--log-format", "text",
			"--fund", key.TestnetAddress().String() + "=1000000000"}, pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("devnet: %v", err)
		}
	})
	// The one line it prints names the RPC URL.
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
