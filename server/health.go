package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// readyTimeout bounds the node read a readiness probe may trigger; kubelet
// probes time out after a few seconds anyway.
const readyTimeout = 3 * time.Second

// handleHealthz is liveness: the process serves HTTP. It checks nothing
// else, so a down node never gets the pod restarted.
func handleHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

type readyBody struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	// Checks are each enabled chain's readiness, "ok" or why not: stacks
	// always, btc when the BTC faucet is on.
	Checks map[string]string `json:"checks"`
}

// Names of the readiness checks.
const (
	checkStacks = "stacks"
	checkBTC    = "btc"
	checkOK     = "ok"
)

// handleReadyz is readiness: 200 when every enabled chain can serve a
// drip (Stacks: a node reachable and testnet, a key funded; BTC: a node
// answering, its chain not behind the faucet's view, coins for a drip), else
// 503 with a user-safe reason. ?exclude=btc (repeatable, or
// comma-separated, as Kubernetes' own /readyz takes it) still reports a
// check but lets the answer pass without it: the operator's readiness
// probe excludes btc, so that a Bitcoin node's outage, which fails the BTC
// drips alone, does not take the pod's STX and token drips out of its
// Service. The engines log when their readiness changes, probed or not.
// A stalled chain (no block for StallAfter) does not fail it either: it
// is no fault of this pod, every replica sees it at once, and taking them
// all out of the Service would turn slow drips into no faucet; info's
// state and the tip-age metric report it instead.
func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	body := readyBody{Checks: map[string]string{checkStacks: checkOK}}
	if err := s.cfg.Faucet.Ready(ctx); err != nil {
		body.Checks[checkStacks] = readyReason(err)
	}
	if s.cfg.BTC != nil {
		body.Checks[checkBTC] = btcReadiness(s.cfg.BTC.Status(), s.cfg.BTC.Amounts())
	}
	excluded := map[string]bool{}
	for _, v := range r.URL.Query()["exclude"] {
		for name := range strings.SplitSeq(v, ",") {
			excluded[strings.TrimSpace(name)] = true
		}
	}
	body.Ready = true
	for _, name := range []string{checkStacks, checkBTC} {
		if why, ok := body.Checks[name]; ok && why != checkOK && !excluded[name] && body.Ready {
			body.Ready, body.Reason = false, why
		}
	}
	if !body.Ready {
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// btcReadiness is the BTC check: "ok", or why a drip would fail now. A
// replica standing by (another one holds the key and pays) passes: its
// BTC answers say to try again, and failing it would change nothing.
func btcReadiness(st btcfaucet.Status, am btcfaucet.Amounts) string {
	switch {
	case st.Standby:
		return checkOK
	case !st.NodeUp:
		return "the Bitcoin node is unreachable"
	case st.Behind:
		return "the Bitcoin node's chain is behind the faucet's view (it restarted or is syncing)"
	case !st.Ready:
		return "the BTC faucet has not read its coins from the node yet"
	case st.Balance < am.Default:
		return "the BTC faucet's key has no spendable coins for a drip"
	}
	return checkOK
}

// readyReason turns Ready's error into text safe for an unauthenticated
// probe: node errors (which carry the node's URL) become a fixed phrase.
func readyReason(err error) string {
	var fe *faucet.Error
	if errors.As(err, &fe) {
		return fe.Message
	}
	var (
		te *node.TransportError
		he *node.HTTPError
		re *node.ResponseError
		de *node.DecodeError
	)
	msg := err.Error()
	if node.IsUnavailable(err) || errors.As(err, &te) || errors.As(err, &he) || errors.As(err, &re) ||
		errors.As(err, &de) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		strings.HasPrefix(msg, "node unreachable") {
		return "the Stacks node is unreachable"
	}
	// What is left is the engine's own text (today: no funded key). Refuse
	// anything that looks like it quotes a URL.
	if strings.Contains(msg, "://") {
		return "the faucet is not ready"
	}
	return msg
}
