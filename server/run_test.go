package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
)

// TestGracefulShutdown: cancelling Serve's context while a drip is being
// broadcast lets that drip finish and answer 200, then refuses new
// connections.
func TestGracefulShutdown(t *testing.T) {
	h := newHarness(t, options{})
	h.dn.SetLatency(100 * time.Millisecond) // each node RPC of the drip is slow

	entered := make(chan struct{})
	var once sync.Once
	var finished atomic.Bool
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			once.Do(func() { close(entered) })
		}
		h.h.ServeHTTP(w, r)
		if r.Method == http.MethodPost {
			finished.Store(true)
		}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, wrapped, h.log) }()

	type result struct {
		code int
		body string
		err  error
	}
	to := newRecipient(t)
	got := make(chan result, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/extended/v1/faucets/stx?address="+to, "", nil)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- result{code: resp.StatusCode, body: string(b)}
	}()

	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("request never reached the handler")
	}
	cancel() // shutdown starts with the drip in flight

	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if !finished.Load() {
		t.Error("Serve returned before the in-flight drip finished")
	}
	r := <-got
	if r.err != nil || r.code != http.StatusOK {
		t.Fatalf("in-flight drip: %d %q %v", r.code, r.body, r.err)
	}
	if n := h.dn.MempoolSize(); n != 1 {
		t.Errorf("mempool = %d, want the drip's tx", n)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("listener still accepting after shutdown")
	}
}

func TestRun(t *testing.T) {
	if err := Run(context.Background(), "127.0.0.1:-1", http.NotFoundHandler(), nil); err == nil {
		t.Error("Run on an invalid address: want an error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	listening := make(chan string, 1)
	logger := slog.New(&listenHook{addr: listening})
	go func() { done <- Run(ctx, "127.0.0.1:0", http.NotFoundHandler(), logger) }()
	// Serve logs its address once it accepts connections: a real request
	// proves it is up before the cancel.
	resp, err := http.Get("http://" + <-listening + "/")
	if err != nil {
		t.Fatalf("GET while running: %v", err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

// TestServeTimeouts pins the production settings' relationships.
func TestServeTimeouts(t *testing.T) {
	if WriteTimeout <= DefaultDripTimeout {
		t.Errorf("WriteTimeout %v must exceed DefaultDripTimeout %v", WriteTimeout, DefaultDripTimeout)
	}
	// A drip in flight at SIGTERM must finish before shutdown gives up, and
	// shutdown must end before Kubernetes' default 30 s grace period kills us.
	if ShutdownTimeout <= DefaultDripTimeout || ShutdownTimeout >= 30*time.Second {
		t.Errorf("want DefaultDripTimeout %v < ShutdownTimeout %v < 30s", DefaultDripTimeout, ShutdownTimeout)
	}
}

// listenHook is a slog handler that reports the address of the
// "http server listening" record.
type listenHook struct{ addr chan<- string }

func (h *listenHook) Enabled(context.Context, slog.Level) bool { return true }
func (h *listenHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *listenHook) WithGroup(string) slog.Handler            { return h }
func (h *listenHook) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "http server listening" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "addr" {
			select {
			case h.addr <- a.Value.String():
			default:
			}
		}
		return true
	})
	return nil
}

// During the lame duck after the context ends, /readyz fails and every
// other route is still served, each answer closing its connection; then
// the listener closes.
func TestServeLameDuck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	h := http.NewServeMux()
	h.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	h.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hi") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	go func() { done <- ServeLameDuck(ctx, clk, ln, h, nil, 2*time.Second) }()

	get := func(path string) (int, string, bool) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Close
	}
	if code, _, closing := get("/readyz"); code != http.StatusOK || closing {
		t.Fatalf("ready before the cancel: %d, closing %v", code, closing)
	}
	cancel()
	eventually.True(t, time.Second, "/readyz fails once the lame duck starts", func() bool {
		code, _, _ := get("/readyz")
		return code == http.StatusServiceUnavailable
	})
	if code, body, closing := get("/readyz"); !strings.Contains(body, "shutting down") || !closing {
		t.Errorf("lame-duck /readyz: %d %s, closing %v", code, body, closing)
	}
	if code, body, closing := get("/hello"); code != http.StatusOK || body != "hi" || !closing {
		t.Errorf("lame-duck /hello: %d %q, closing %v", code, body, closing)
	}
	select {
	case err := <-done:
		t.Fatalf("ServeLameDuck returned before its lame duck ended: %v", err)
	default:
	}
	eventually.True(t, time.Second, "the lame duck's timer is set", clk.HasWaiters)
	clk.Step(2 * time.Second) // the lame duck ends
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeLameDuck: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeLameDuck did not return after its lame duck")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("listener still accepting after the lame duck")
	}
}
