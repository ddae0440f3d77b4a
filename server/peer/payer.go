package peer

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/journal"
)

// The internal routes. Every request is a signed POST with a JSON body.
const (
	pathDrip   = "/internal/v1/btc/drip"
	pathPayout = "/internal/v1/btc/payout"
	pathStatus = "/internal/v1/btc/status"
)

// LocalBTC is this replica's BTC engine.
type LocalBTC = btcfaucet.Service

// dripRequest is a forwarded drip: the HTTP layer of the replica that
// received it has judged it, counted it and drawn its budget.
type dripRequest struct {
	Address string `json:"address"`
	Amount  int64  `json:"amount"`
}

// dripAnswer is a paid drip, or why it was not paid (Reason).
type dripAnswer struct {
	TxID   string `json:"txid,omitempty"`
	Raw    string `json:"raw,omitempty"` // hex
	Amount int64  `json:"amount,omitempty"`
	Batch  int    `json:"batch,omitempty"`
	Fee    int64  `json:"fee,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

type payoutRequest struct {
	TxID string `json:"txid"`
}

type payoutAnswer struct {
	Found  bool                   `json:"found"`
	Payout btcfaucet.PayoutStatus `json:"payout"`
}

// reasons are the payer's refusals on the wire, each the engine error a
// forwarder gives back to its HTTP layer (which answers as for a local
// drip). standby: the payer does not hold the key (any more); nothing
// was sent.
var reasons = []struct {
	name   string
	err    error // what the payer's engine answered; the forwarder's error wraps it
	status int
}{
	{"standby", btcfaucet.ErrStandby, http.StatusServiceUnavailable},
	{"standby", journal.ErrNotOwner, http.StatusServiceUnavailable},
	{"starting", btcfaucet.ErrStarting, http.StatusServiceUnavailable},
	{"not_ready", btcfaucet.ErrNotReady, http.StatusServiceUnavailable},
	{"node_down", btcfaucet.ErrNodeDown, http.StatusServiceUnavailable},
	{"behind", btcfaucet.ErrNodeBehind, http.StatusServiceUnavailable},
	{"no_coins", btcfaucet.ErrNoCoins, http.StatusServiceUnavailable},
	{"busy", btcfaucet.ErrBusy, http.StatusServiceUnavailable},
	{"refused", btcfaucet.ErrRefused, http.StatusBadGateway},
	{"invalid", btcfaucet.ErrInvalidDrip, http.StatusBadRequest},
}

// reasonOf names err on the wire ("internal" when no reason fits).
func reasonOf(err error) (string, int) {
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.name, r.status
		}
	}
	return "internal", http.StatusInternalServerError
}

// errOf is the engine error of a reason (nil for an unknown one).
func errOf(reason string) error {
	if reason == "starting" {
		// ErrStarting comes with ErrNotReady, which the HTTP layer maps.
		return errStarting
	}
	for _, r := range reasons {
		if r.name == reason {
			return r.err
		}
	}
	return nil
}

var errStarting = fmt.Errorf("%w: %w", btcfaucet.ErrNotReady, btcfaucet.ErrStarting)

// HandlerConfig configures the payer's side.
type HandlerConfig struct {
	Auth  *Auth
	BTC   LocalBTC
	Clock clock.PassiveClock // nil: the real clock
	// PayTimeout bounds one forwarded payout, which runs on even if the
	// forwarder hangs up, so that its retry finds the answer (0: 30 s).
	PayTimeout time.Duration
	Logger     *slog.Logger
}

// Handler serves the internal routes of the replica that pays.
func Handler(cfg HandlerConfig) http.Handler {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.PayTimeout <= 0 {
		cfg.PayTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &payerHandler{cfg: cfg, seen: map[string]*answer{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pathDrip, h.drip)
	mux.HandleFunc("POST "+pathPayout, h.payout)
	mux.HandleFunc("POST "+pathStatus, h.status)
	return mux
}

type payerHandler struct {
	cfg    HandlerConfig
	mu     sync.Mutex
	seen   map[string]*answer // request id → its answer, kept answerTTL
	pruned time.Time          // when seen was last swept of old answers
}

// answer is one drip request's outcome; done is closed once it is set.
type answer struct {
	done   chan struct{}
	status int
	body   dripAnswer
	at     time.Time
}

// answerTTL keeps an answer past the time its request may still be
// accepted (MaxSkew either way) and a retry's.
const answerTTL = 3 * MaxSkew

// open reads and checks a request; on failure it has answered.
func (h *payerHandler) open(w http.ResponseWriter, r *http.Request, into any) (id string, ok bool) {
	body, id, err := h.cfg.Auth.verify(r, h.cfg.Clock.Now())
	if err != nil {
		status := http.StatusUnauthorized
		if !errors.Is(err, errUnauthenticated) {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, dripAnswer{Reason: "unauthenticated", Error: err.Error()})
		return "", false
	}
	if err := json.Unmarshal(body, into); err != nil {
		writeJSON(w, http.StatusBadRequest, dripAnswer{Reason: "invalid", Error: "peer: bad request body: " + err.Error()})
		return "", false
	}
	return id, true
}

// drip pays a forwarded drip once per request id.
func (h *payerHandler) drip(w http.ResponseWriter, r *http.Request) {
	var req dripRequest
	id, ok := h.open(w, r, &req)
	if !ok {
		return
	}
	a, first := h.claim(id)
	if first {
		a.status, a.body = h.pay(r.Context(), req)
		close(a.done)
		if a.body.Reason == "standby" || a.body.Reason == "starting" {
			// Nothing was paid: a retry once this replica holds the key
			// (again) must pay, not hear the old refusal.
			h.forget(id)
		}
	}
	select {
	case <-a.done:
		writeJSON(w, a.status, a.body)
	case <-r.Context().Done():
	}
}

// claim returns id's answer, and whether this request is the first with
// it (and so the one that pays).
func (h *payerHandler) claim(id string) (*answer, bool) {
	now := h.cfg.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.seen[id]; ok {
		return a, false
	}
	if now.Sub(h.pruned) > answerTTL/3 {
		// A sweep now and then, not one per request: a burst brings
		// thousands of ids.
		h.pruned = now
		for k, a := range h.seen {
			if now.Sub(a.at) > answerTTL {
				delete(h.seen, k)
			}
		}
	}
	a := &answer{done: make(chan struct{}), at: now}
	h.seen[id] = a
	return a, true
}

func (h *payerHandler) forget(id string) {
	h.mu.Lock()
	delete(h.seen, id)
	h.mu.Unlock()
}

// pay pays req on the local engine, detached from the forwarder's
// connection: its retry finds the outcome.
func (h *payerHandler) pay(ctx context.Context, req dripRequest) (int, dripAnswer) {
	b := h.cfg.BTC
	addr, err := bitcoin.ParseAddress(req.Address, b.Network())
	if err != nil || req.Amount <= 0 {
		return http.StatusBadRequest, dripAnswer{Reason: "invalid", Error: "peer: a drip needs an address of the faucet's network and a positive amount"}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.PayTimeout)
	defer cancel()
	d, err := b.DripAmount(ctx, addr, req.Amount)
	if err != nil {
		reason, status := reasonOf(err)
		if reason == "internal" {
			h.cfg.Logger.Warn("forwarded btc drip failed", "to", addr.String(), "err", err)
		}
		return status, dripAnswer{Reason: reason, Error: err.Error()}
	}
	return http.StatusOK, dripAnswer{TxID: d.TxID, Raw: hex.EncodeToString(d.Raw), Amount: d.Amount, Batch: d.Batch, Fee: d.Fee}
}

func (h *payerHandler) payout(w http.ResponseWriter, r *http.Request) {
	var req payoutRequest
	if _, ok := h.open(w, r, &req); !ok {
		return
	}
	st, found, err := h.cfg.BTC.Payout(r.Context(), req.TxID)
	if err != nil {
		reason, status := reasonOf(err)
		writeJSON(w, status, dripAnswer{Reason: reason, Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, payoutAnswer{Found: found, Payout: st})
}

func (h *payerHandler) status(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if _, ok := h.open(w, r, &req); !ok {
		return
	}
	writeJSON(w, http.StatusOK, h.cfg.BTC.Status())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
