package server

import (
	"net/http"
	"time"
)

// challengeBody is a proof-of-work challenge for the client to solve.
type challengeBody struct {
	Challenge  string `json:"challenge"`
	Difficulty int    `json:"difficulty"`
	Algorithm  string `json:"algorithm"`
	ExpiresAt  string `json:"expires_at"`
	// ExpiresInSeconds lets a client with a wrong clock time the challenge
	// from when it received it.
	ExpiresInSeconds int64 `json:"expires_in_seconds"`
}

// handleChallenge serves POST /faucet/v1/challenge: a fresh signed
// challenge at the current difficulty. POST, because every answer differs
// and must never be cached.
func (s *server) handleChallenge(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.cfg.Guard == nil {
		writeError(w, http.StatusNotFound, errorBody{Error: "this faucet asks for no proof of work", Reason: "challenge_disabled"})
		return
	}
	c := s.cfg.Guard.Challenge()
	writeJSON(w, http.StatusOK, challengeBody{
		Challenge: c.Token, Difficulty: c.Difficulty, Algorithm: c.Algorithm,
		ExpiresAt:        c.ExpiresAt.UTC().Format(time.RFC3339),
		ExpiresInSeconds: max(int64(c.ExpiresAt.Sub(s.cfg.Clock.Now())/time.Second), 0),
	})
}
