package main

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/node"
	"github.com/stxfaucet/faucet-operator/server/stacks"
)

// syncWriter collects a command's stdout while it runs.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

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
	out := &syncWriter{}
	done := make(chan error, 1)
	go func() {
		done <- runDevnet(ctx, []string{"--listen", "127.0.0.1:0", "--block-time", "1h", "--log-format", "text",
			"--fund", key.TestnetAddress().String() + "=1000000000"}, out)
	}()
	t.Cleanup(func() { cancel(); <-done })
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		if time.Now().After(deadline) {
			t.Fatalf("devnet did not start: %q", out.String())
		}
		if _, rest, ok := strings.Cut(out.String(), "RPC at "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
		time.Sleep(10 * time.Millisecond)
	}
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
