package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// An unwritable or unreachable store fails `serve` at start with a message
// naming it, and a Postgres password never shows.
func TestServeStoreErrorsAtStart(t *testing.T) {
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(k.Hex()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		store, want, secret string
	}{
		{store: "/nonexistent-dir/sub/faucet.db", want: "/nonexistent-dir/sub/faucet.db"},
		{store: "postgres://faucet:s3cr3t-pw@127.0.0.1:1/faucet?connect_timeout=2", want: "--store", secret: "s3cr3t-pw"},
	} {
		err := run(context.Background(), clock.RealClock{}, []string{"serve", "--node-url", "http://127.0.0.1:1", "--key-file", keyFile,
			"--listen", "127.0.0.1:0", "--store", tc.store, "--log-level", "error"}, io.Discard, io.Discard)
		if err == nil {
			t.Fatalf("--store %s: no error", tc.store)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--store %s: error %q does not name it", tc.store, err)
		}
		if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
			t.Errorf("error shows the password: %q", err)
		}
		t.Logf("%s → %v", tc.store, err)
	}
	if err := run(context.Background(), clock.RealClock{}, []string{"serve", "--node-url", "http://127.0.0.1:1", "--key-file", keyFile,
		"--history-retention", "0s"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "history-retention") {
		t.Errorf("--history-retention 0: %v", err)
	}
}
