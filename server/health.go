package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

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
}

// handleReadyz is readiness: 200 when the engine can serve a drip (node
// reachable and testnet, a key funded), else 503 with a user-safe reason.
// The engine logs when its readiness changes, probed or not.
func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.cfg.Faucet.Ready(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, readyBody{Reason: readyReason(err)})
		return
	}
	writeJSON(w, http.StatusOK, readyBody{Ready: true})
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
