package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/store"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// silentProxy forwards TCP to a server until it falls silent: then it
// swallows what either side sends, as a network cut that drops packets
// does (no reset, no refusal), and new connections get no answer either.
type silentProxy struct {
	ln     net.Listener
	target string
	silent atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
}

func startSilentProxy(t *testing.T, target string) *silentProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *silentProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go p.forward(u, c)
		go p.forward(c, u)
	}
}

// forward copies src to dst, dropping what arrives while silent.
func (p *silentProxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *silentProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// A Postgres cut off by the network answers nothing, and a statement on it
// waits for its context: admission must not wait out the drip's whole
// timeout, past any client's patience. The drip is answered 503 with
// Retry-After on v1 and v3 within the store wait, and nothing reaches the
// engine.
func TestSilentStoreAnswers503WithRetryAfter(t *testing.T) {
	pg := pgtest.Shared(t)
	proxy := startSilentProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(pg.Port())))
	u, err := url.Parse(pg.CreateDB(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy.ln.Addr().String()
	st, err := store.OpenPostgres(context.Background(), u.String(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.close(); _ = st.Close() })

	const dripTimeout = time.Minute
	e := &fakeEngine{dripRes: sentResult(t)}
	limits := guard.Limits{PerAddress: guard.Limit{Requests: 5, Window: time.Minute}}
	h := newFakeServer(t, e, func(c *Config) {
		c.Limits, c.DripTimeout = guard.NewRateLimits(limits, st, c.Clock), dripTimeout
	})
	if w := serveFake(h, http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), ""); w.Code != http.StatusOK {
		t.Fatalf("drip with the store answering: %d %s", w.Code, w.Body)
	}

	proxy.silent.Store(true)
	start := time.Now()
	type answer struct {
		door       string
		code       int
		retryAfter string
		body       string
	}
	answers := make(chan answer, 2)
	to := newRecipient(t)
	for _, door := range []string{"v1", "v3"} {
		go func() {
			target, body := "/extended/v1/faucets/stx?address="+to, ""
			if door == "v3" {
				target, body = "/extended/v3/faucets/stx", `{"address":"`+to+`"}`
			}
			w := serveFake(h, http.MethodPost, target, body)
			b, _ := io.ReadAll(w.Body)
			answers <- answer{door, w.Code, w.Header().Get("Retry-After"), string(b)}
		}()
	}
	for range 2 {
		a := <-answers
		if a.code != http.StatusServiceUnavailable || a.retryAfter != "5" {
			t.Errorf("%s drip with the store silent: %d, Retry-After %q: %s; want 503 with Retry-After 5", a.door, a.code, a.retryAfter, a.body)
		}
		if a.door == "v1" && a.body != `{"success":false,"error":"The faucet's state store is unavailable; try again shortly","reason":"store_unavailable","retry_after_seconds":5,"next_allowed_at":"2026-11-24T12:00:05Z"}` {
			t.Errorf("v1 body %s", a.body)
		}
	}
	// Answered at the store wait (5 s), not at the drip's timeout.
	if took := time.Since(start); took >= dripTimeout/2 {
		t.Errorf("the drips took %s with the store silent: admission waited on it past its bound", took)
	}
	if len(e.requests) != 1 {
		t.Errorf("the engine saw %d drips, want 1: none while the store was silent", len(e.requests))
	}

	// Back: the next drip is paid.
	proxy.silent.Store(false)
	if w := serveFake(h, http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), ""); w.Code != http.StatusOK {
		t.Fatalf("drip with the store back: %d %s", w.Code, w.Body)
	}
}
