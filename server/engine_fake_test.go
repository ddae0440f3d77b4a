package server

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// fakeEngine answers as the engine would, from fields a test sets: the
// handler's side of every engine answer, without a node.
type fakeEngine struct {
	mu       sync.Mutex
	dripRes  *faucet.Result
	dripErr  error
	readyErr error
	funding  faucet.Funding
	requests []faucet.Request
	records  []faucet.DripRecord
	// tokens are the tokens the fake reports (none when empty).
	tokens []faucet.TokenInfo
}

func (e *fakeEngine) Drip(_ context.Context, req faucet.Request) (*faucet.Result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests = append(e.requests, req)
	if e.dripErr != nil {
		return nil, e.dripErr
	}
	res := *e.dripRes
	res.Stacking = req.Stacking
	return &res, nil
}

func (e *fakeEngine) Record(_ context.Context, d faucet.DripRecord) {
	e.mu.Lock()
	e.records = append(e.records, d)
	e.mu.Unlock()
}
func (e *fakeEngine) Keys() []faucet.KeyStatus                { return nil }
func (e *fakeEngine) Treasury() (faucet.TreasuryStatus, bool) { return faucet.TreasuryStatus{}, false }
func (e *fakeEngine) Funding() faucet.Funding                 { return e.funding }
func (e *fakeEngine) BatchStats() faucet.BatchStats           { return faucet.BatchStats{} }
func (e *fakeEngine) NodeUp() bool                            { return e.readyErr == nil }
func (e *fakeEngine) ChainID() (uint32, bool)                 { return stacks.ChainIDTestnet, true }
func (e *fakeEngine) TipAge() (time.Duration, bool)           { return 0, false }
func (e *fakeEngine) Ready(context.Context) error             { return e.readyErr }
func (e *fakeEngine) DefaultAmount() uint64                   { return faucet.DefaultAmount }
func (e *fakeEngine) Tokens() []faucet.TokenInfo              { return e.tokens }
func (e *fakeEngine) TokenFunding(name faucet.Asset) (faucet.Funding, bool) {
	return faucet.Funding{}, slices.ContainsFunc(e.tokens, func(t faucet.TokenInfo) bool { return t.Name == name })
}
func (e *fakeEngine) StackingAmount(context.Context) (uint64, error) {
	return 0, errors.New("no PoX information")
}
func (e *fakeEngine) LookupDrip(context.Context, string) (faucet.DripRecord, bool, error) {
	return faucet.DripRecord{}, false, nil
}
func (e *fakeEngine) PendingByTxID(string) (faucet.PendingTx, bool) { return faucet.PendingTx{}, false }
func (e *fakeEngine) PendingAt(string, uint64) (faucet.PendingTx, bool) {
	return faucet.PendingTx{}, false
}
func (e *fakeEngine) ReplacementOf(string) (string, bool) { return "", false }
func (e *fakeEngine) Dropped(string) bool                 { return false }

// downNode is a status node that cannot be reached.
type downNode struct{}

func (downNode) Info(context.Context) (*node.Info, error) {
	return nil, &node.TransportError{Call: node.CallInfo, Err: errors.New("connection refused")}
}
func (downNode) PoX(context.Context) (*node.PoXInfo, error) {
	return nil, &node.TransportError{Call: node.CallPoX, Err: errors.New("connection refused")}
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

func newFakeServer(t *testing.T, e *fakeEngine, opts ...func(*Config)) http.Handler {
	t.Helper()
	cfg := Config{Faucet: e, Node: downNode{},
		Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))}
	for _, o := range opts {
		o(&cfg)
	}
	return New(cfg)
}

func serveFake(h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.RemoteAddr = "192.0.2.10:40000"
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// wire is a drip's answers on v1 and v3, byte for byte.
type wire struct {
	v1Status     int
	v1Body       string
	v1RetryAfter string
	v3Status     int
	v3Body       string
}

// checkWire posts a drip for to on v1, then on v3, and compares the
// answers with want.
func checkWire(t *testing.T, h http.Handler, to string, want wire) {
	t.Helper()
	w := serveFake(h, http.MethodPost, "/extended/v1/faucets/stx?address="+to, "")
	if w.Code != want.v1Status || w.Body.String() != want.v1Body {
		t.Errorf("v1: %d %s\nwant %d %s", w.Code, w.Body, want.v1Status, want.v1Body)
	}
	if got := w.Header().Get("Retry-After"); got != want.v1RetryAfter {
		t.Errorf("v1 Retry-After %q, want %q", got, want.v1RetryAfter)
	}
	w = serveFake(h, http.MethodPost, "/extended/v3/faucets/stx", `{"address":"`+to+`"}`)
	if w.Code != want.v3Status || w.Body.String() != want.v3Body {
		t.Errorf("v3: %d %s\nwant %d %s", w.Code, w.Body, want.v3Status, want.v3Body)
	}
}

// Every answer the engine can give reaches the client in the incumbent's
// shape, on v1 and v3, byte for byte.
func TestEngineAnswersOnTheWire(t *testing.T) {
	key := newKey(t)
	to := newRecipient(t)
	tx, err := stacks.NewTokenTransfer(stacks.TransferParams{
		Recipient: stacks.Principal{Address: key.TestnetAddress()}, Amount: faucet.DefaultAmount, Fee: 180, ChainID: stacks.ChainIDTestnet,
	}, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	sent := &faucet.Result{TxID: tx.TxID(), TxRaw: tx.Serialize(), Amount: faucet.DefaultAmount, Fee: 180, Sender: key.TestnetAddress()}
	inDoubt := *sent
	inDoubt.InDoubt = true
	fail := func(r faucet.Reason, msg string) error {
		return &faucet.Error{Reason: r, Message: msg, Err: errors.New("internal detail 10.0.0.7")}
	}

	cases := []struct {
		name string
		res  *faucet.Result
		err  error
		wire
	}{
		{
			name: "store unavailable", err: fail(faucet.ReasonStoreUnavailable, "x"),
			wire: wire{
				v1Status:     503,
				v1Body:       `{"success":false,"error":"The faucet's state store is unavailable; try again shortly","reason":"store_unavailable","retry_after_seconds":5,"next_allowed_at":"2026-11-24T12:00:05Z"}`,
				v1RetryAfter: "5",
				v3Status:     503,
				v3Body:       `{"error":"Faucet is temporarily unavailable, please try again later"}`,
			},
		},
		{
			name: "busy", err: fail(faucet.ReasonBusy, "x"),
			wire: wire{
				v1Status:     500,
				v1Body:       `{"success":false,"error":"The faucet is busy; try again in a minute","reason":"busy","retry_after_seconds":5,"next_allowed_at":"2026-11-24T12:00:05Z"}`,
				v1RetryAfter: "5",
				v3Status:     503,
				v3Body:       `{"error":"Faucet is temporarily unavailable, please try again later"}`,
			},
		},
		{
			name: "out of funds", err: fail(faucet.ReasonExhausted, "x"),
			wire: wire{
				v1Status: 500,
				v1Body:   `{"success":false,"error":"The faucet is temporarily out of funds; try again later","reason":"exhausted"}`,
				v3Status: 503,
				v3Body:   `{"error":"The faucet is temporarily out of funds, please try again later"}`,
			},
		},
		{
			name: "node down", err: fail(faucet.ReasonNodeUnavailable, "x"),
			wire: wire{
				v1Status:     500,
				v1Body:       `{"success":false,"error":"The Stacks node is unavailable; try again shortly","reason":"node_unavailable","retry_after_seconds":5,"next_allowed_at":"2026-11-24T12:00:05Z"}`,
				v1RetryAfter: "5",
				v3Status:     503,
				v3Body:       `{"error":"Faucet is temporarily unavailable, please try again later"}`,
			},
		},
		{
			name: "refused by the node", err: fail(faucet.ReasonRejected, "x"),
			wire: wire{
				v1Status: 500,
				v1Body:   `{"success":false,"error":"The Stacks node refused the faucet transaction","reason":"rejected"}`,
				v3Status: 500,
				v3Body:   `{"error":"Faucet request failed, please try again later"}`,
			},
		},
		{
			name: "chain not allowed", err: fail(faucet.ReasonDisabled, "the node is on mainnet"),
			wire: wire{
				v1Status: 403,
				v1Body:   `{"success":false,"error":"Faucet is not available","reason":"disabled","detail":"the node is on mainnet"}`,
				v3Status: 403,
				v3Body:   `{"error":"STX faucet is not available"}`,
			},
		},
		{
			name: "not an engine error", err: errors.New("boom"),
			wire: wire{
				v1Status: 500,
				v1Body:   `{"success":false,"error":"Internal error","reason":"internal"}`,
				v3Status: 500,
				v3Body:   `{"error":"Faucet request failed, please try again later"}`,
			},
		},
		{
			name: "sent", res: sent,
			wire: wire{
				v1Status: 200,
				v1Body:   `{"success":true,"txId":"` + tx.TxID().Hex0x() + `","txRaw":"` + hexOf(tx.Serialize()) + `"}`,
				v3Status: 200,
				v3Body:   `{"transaction":{"tx_id":"` + tx.TxID().Hex0x() + `","chain":"stacks"},"amount":{"stx":"500000000"}}`,
			},
		},
		{
			// A lost node answer is success in doubt: the txid is the
			// client's, never an error inviting a second payment.
			name: "in doubt", res: &inDoubt,
			wire: wire{
				v1Status: 200,
				v1Body:   `{"success":true,"txId":"` + tx.TxID().Hex0x() + `","txRaw":"` + hexOf(tx.Serialize()) + `"}`,
				v3Status: 200,
				v3Body:   `{"transaction":{"tx_id":"` + tx.TxID().Hex0x() + `","chain":"stacks"},"amount":{"stx":"500000000"}}`,
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &fakeEngine{dripRes: c.res, dripErr: c.err}
			checkWire(t, newFakeServer(t, e), to, c.wire)
			if len(e.requests) != 2 || e.requests[0].Recipient.String() != to || e.requests[1].Recipient.String() != to {
				t.Errorf("engine saw %+v, want two requests for %s", e.requests, to)
			}
			// Each answered drip is in the history, with the client's
			// rate-limit group and the engine's outcome.
			for _, r := range e.records {
				if r.Recipient != to || r.ClientBucket != "192.0.2.10" || (r.Outcome == faucet.OutcomeSent) != (c.res != nil) {
					t.Errorf("history record %+v", r)
				}
			}
			if len(e.records) != 2 {
				t.Errorf("%d history records, want 2", len(e.records))
			}
		})
	}
}

// What admission itself answers, before or instead of the engine: a
// suspended faucet, a full rate limit, a store the limits cannot reach.
func TestAdmissionAnswersOnTheWire(t *testing.T) {
	tight := guard.Limits{PerAddress: guard.Limit{Requests: 1, Window: 90 * time.Second}}
	cases := []struct {
		name  string
		opt   func(*Config)
		first bool // the first request passes to the engine
		wire
	}{
		{
			name: "suspended", opt: func(c *Config) { c.Switches = switches.New(switches.State{Suspend: true}) },
			wire: wire{
				v1Status: 403,
				v1Body:   `{"success":false,"error":"Faucet is not available","reason":"disabled","detail":"the faucet is suspended"}`,
				v3Status: 403,
				v3Body:   `{"error":"STX faucet is not available"}`,
			},
		},
		{
			name: "rate limited", first: true, opt: func(c *Config) { c.Limits = guard.NewRateLimits(tight, nil, c.Clock) },
			wire: wire{
				v1Status:     429,
				v1Body:       `{"success":false,"error":"Too many requests","reason":"rate_limited","retry_after_seconds":90,"next_allowed_at":"2026-11-24T12:01:30Z"}`,
				v3Status:     429,
				v3Body:       `{"error":"Too many requests"}`,
				v1RetryAfter: "90",
			},
		},
		{
			name: "limits store unavailable", opt: func(c *Config) { c.Limits = guard.NewRateLimits(tight, failingLimiter{}, c.Clock) },
			wire: wire{
				v1Status:     503,
				v1Body:       `{"success":false,"error":"The faucet's state store is unavailable; try again shortly","reason":"store_unavailable","retry_after_seconds":5,"next_allowed_at":"2026-11-24T12:00:05Z"}`,
				v1RetryAfter: "5",
				v3Status:     503,
				v3Body:       `{"error":"Faucet is temporarily unavailable, please try again later"}`,
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &fakeEngine{dripRes: sentResult(t)}
			h := newFakeServer(t, e, c.opt)
			to := newRecipient(t)
			if c.first {
				if w := serveFake(h, http.MethodPost, "/extended/v1/faucets/stx?address="+to, ""); w.Code != http.StatusOK {
					t.Fatalf("first drip: %d %s", w.Code, w.Body)
				}
			}
			checkWire(t, h, to, c.wire)
			want := 0
			if c.first {
				want = 1
			}
			if len(e.requests) != want || len(e.records) != want {
				t.Errorf("engine saw %d drips and %d records, want %d: refused requests never reach it", len(e.requests), len(e.records), want)
			}
		})
	}
}

// sentResult is an engine's answer for a drip it paid.
func sentResult(t *testing.T) *faucet.Result {
	t.Helper()
	tx, err := stacks.NewTokenTransfer(stacks.TransferParams{
		Recipient: stacks.Principal{Address: newKey(t).TestnetAddress()}, Amount: faucet.DefaultAmount, Fee: 180, ChainID: stacks.ChainIDTestnet,
	}, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return &faucet.Result{TxID: tx.TxID(), TxRaw: tx.Serialize(), Amount: faucet.DefaultAmount, Fee: 180}
}

// failingLimiter is a rate-limit store that cannot be reached.
type failingLimiter struct{}

func (failingLimiter) Reserve(context.Context, time.Time, []guard.Bucket) (guard.Reservation, time.Duration, bool, error) {
	return guard.Reservation{}, 0, false, errors.New("dial tcp 10.0.0.9:5432: connection refused")
}

func (failingLimiter) Peek(context.Context, time.Time, []guard.Bucket) ([]guard.BucketUse, error) {
	return nil, errors.New("dial tcp 10.0.0.9:5432: connection refused")
}

func (failingLimiter) Release(context.Context, guard.Reservation) error {
	return errors.New("dial tcp 10.0.0.9:5432: connection refused")
}

// Readiness follows the engine's Ready, and the page's state its funding.
func TestReadinessAndStateFollowTheEngine(t *testing.T) {
	e := &fakeEngine{readyErr: &faucet.Error{Reason: faucet.ReasonExhausted, Message: "no faucet key is funded for a drip"}}
	h := newFakeServer(t, e)
	w := serveFake(h, http.MethodGet, "/readyz", "")
	if w.Code != http.StatusServiceUnavailable || w.Body.String() != `{"ready":false,"reason":"no faucet key is funded for a drip","checks":{"stacks":"no faucet key is funded for a drip"}}` {
		t.Errorf("readyz: %d %s", w.Code, w.Body)
	}
	e.readyErr = nil
	w = serveFake(h, http.MethodGet, "/readyz", "")
	if w.Code != http.StatusOK || w.Body.String() != `{"ready":true,"checks":{"stacks":"ok"}}` {
		t.Errorf("readyz: %d %s", w.Code, w.Body)
	}
	// Excluding the failing check passes; the check is still reported.
	e.readyErr = &faucet.Error{Reason: faucet.ReasonExhausted, Message: "no faucet key is funded for a drip"}
	w = serveFake(h, http.MethodGet, "/readyz?exclude=btc,stacks", "")
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"stacks":"no faucet key is funded for a drip"`) {
		t.Errorf("readyz?exclude=btc,stacks: %d %s", w.Code, w.Body)
	}
}
