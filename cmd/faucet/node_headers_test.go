package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// keyedNode fronts a node the way Hiro's API does: 401 unless x-api-key
// is key. It counts the requests it let through and those it refused.
type keyedNode struct {
	url             string
	passed, refused atomic.Int64
}

// serveKeyedNode serves a keyedNode in front of nodeURL until the test ends.
func serveKeyedNode(t *testing.T, nodeURL, key string) *keyedNode {
	t.Helper()
	k := &keyedNode{}
	k.url = serveGate(t, nodeURL, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("x-api-key") != key {
			k.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"unauthorized"}`)
			return false
		}
		k.passed.Add(1)
		return true
	})
	return k
}

// serveGate serves, until the test ends, a front of nodeURL as a gateway
// is: pass answers a request itself and returns false, or lets it through
// to the node. It returns the front's URL.
func serveGate(t *testing.T, nodeURL string, pass func(http.ResponseWriter, *http.Request) bool) string {
	t.Helper()
	target, err := url.Parse(nodeURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pass(w, r) {
			proxy.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// `serve --node-headers-file` sends the file's x-api-key with every node
// request: behind a node that refuses requests without it, the faucet is
// ready and drips; without the file it never gets ready and drips fail.
func TestServeNodeHeadersFile(t *testing.T) {
	const apiKey = "hiro-test-key-7d1f"
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{key.TestnetAddress(): 10_000_000_000}})
	keyFile := writeKeys(t, key)
	headersFile := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(headersFile, []byte("# Hiro's API\nx-api-key: "+apiKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("with the file", func(t *testing.T) {
		kn := serveKeyedNode(t, serveTestNode(t, dn), apiKey)
		base, stop := serveInProcess(t, io.Discard, "--node-url", kn.url, "--key-file", keyFile, "--node-headers-file", headersFile, "--log-level", "error")
		dripConfirmed(t, base, dn) // read and broadcast through the keyed node
		stop()
		if kn.passed.Load() == 0 || kn.refused.Load() != 0 {
			t.Errorf("the keyed node let %d requests through and refused %d; want all through", kn.passed.Load(), kn.refused.Load())
		}
	})

	t.Run("without the file", func(t *testing.T) {
		kn := serveKeyedNode(t, serveTestNode(t, dn), apiKey)
		base, _ := startInProcess(t, io.Discard, "--node-url", kn.url, "--key-file", keyFile, "--log-level", "error")
		// Up (it listens and has asked the node) but refused by the node...
		deadline := time.Now().Add(20 * time.Second)
		for kn.refused.Load() == 0 || !listening(base) {
			if time.Now().After(deadline) {
				t.Fatalf("the faucet did not come up and ask the node (%d refused)", kn.refused.Load())
			}
			time.Sleep(20 * time.Millisecond)
		}
		// ...so it stays unready and its drips fail.
		for range 20 {
			if ready(base) {
				t.Fatal("the faucet is ready although the node refuses it")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code, body := post(t, base+"/extended/v1/faucets/stx?address="+newAddress(t), "", ""); code == http.StatusOK {
			t.Errorf("drip without the key: %d %s, want a failure", code, body)
		}
		if kn.passed.Load() != 0 {
			t.Errorf("the keyed node let %d requests through without the key", kn.passed.Load())
		}
	})
}

// listening reports whether the faucet at base answers HTTP at all.
func listening(base string) bool {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// A bad --node-headers-file stops serve before it starts, naming the flag
// and the line and quoting no value.
func TestServeNodeHeadersFileErrors(t *testing.T) {
	const secret = "s3cret-value-91"
	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := writeKeys(t, key)
	dir := t.TempDir()
	for name, c := range map[string]struct{ text, want string }{
		"no colon":        {"x-api-key " + secret, "line 1: want \"Name: value\""},
		"a reserved name": {"x-api-key: " + secret + "\nuser-agent: " + secret, "line 2: User-Agent is set by the faucet itself"},
		"an empty value":  {"\nx-api-key:", "line 2: the header has no value"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"serve", "--listen", "127.0.0.1:0", "--store", "memory", "--log-level", "error",
			"--node-url", "http://127.0.0.1:1", "--key-file", keyFile, "--node-headers-file", path}
		err := run(context.Background(), clock.RealClock{}, args, io.Discard, io.Discard)
		switch {
		case err == nil:
			t.Errorf("%s: serve started", name)
		case !strings.Contains(err.Error(), "--node-headers-file") || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: err = %v, want one naming --node-headers-file and %q", name, err, c.want)
		case strings.Contains(err.Error(), secret):
			t.Errorf("%s: the error quotes the value: %v", name, err)
		}
	}
}
