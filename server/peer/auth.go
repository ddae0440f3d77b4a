// Package peer is the internal path between the replicas of one faucet.
// One replica at a time holds the Bitcoin key and pays BTC drips (the
// journal's ownership protocol); the others forward the BTC drips they
// receive to it, so every replica answers BTC (docs/design.md, "BTC on
// every replica").
//
// Requests between replicas are signed with an HMAC key every replica
// derives from the Bitcoin key: only a process that could spend the coins
// anyway can ask the payer to spend them, and there is no other Secret to
// distribute or rotate. A signature covers the method, path, time, a
// request id and the body; the payer refuses one older than MaxSkew and
// answers a request id it has seen with the answer it gave (a forwarder
// that retries after a lost answer is paid once, and a replayed request
// pays nothing).
package peer

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Headers of a signed request.
const (
	headerTime      = "X-Faucet-Peer-Time" // Unix milliseconds
	headerID        = "X-Faucet-Peer-Id"   // 32 hex digits, unique per request
	headerSignature = "X-Faucet-Peer-Signature"
)

// MaxSkew is how far a request's time may be from the payer's clock.
const MaxSkew = 30 * time.Second

// maxBody bounds what a peer request may carry: an address and an amount.
const maxBody = 4 << 10

// Auth signs and checks requests between replicas.
type Auth struct{ key []byte }

// NewAuth returns the Auth of a 32-byte secret shared by the replicas.
func NewAuth(secret []byte) (*Auth, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("peer: the shared secret has %d bytes, want at least 32", len(secret))
	}
	return &Auth{key: bytes.Clone(secret)}, nil
}

// newID returns a fresh request id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// mac is the signature of one request.
func (a *Auth) mac(method, path, at, id string, body []byte) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, a.key)
	for _, s := range []string{method, path, at, id, hex.EncodeToString(sum[:])} {
		m.Write([]byte(s))
		m.Write([]byte{'\n'})
	}
	return m.Sum(nil)
}

// sign sets the headers that authenticate req, with body its body.
func (a *Auth) sign(req *http.Request, id string, now time.Time, body []byte) {
	at := strconv.FormatInt(now.UnixMilli(), 10)
	req.Header.Set(headerTime, at)
	req.Header.Set(headerID, id)
	req.Header.Set(headerSignature, hex.EncodeToString(a.mac(req.Method, req.URL.Path, at, id, body)))
}

// errUnauthenticated is every refusal of a request's signature: the
// answer does not say which part was wrong.
var errUnauthenticated = errors.New("peer: request not signed by a replica of this faucet")

// verify reads req's body and checks its signature and time; it returns
// the body and the request id.
func (a *Auth) verify(req *http.Request, now time.Time) (body []byte, id string, err error) {
	body, err = io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	if err != nil {
		return nil, "", fmt.Errorf("peer: read body: %w", err)
	}
	if len(body) > maxBody {
		return nil, "", fmt.Errorf("peer: body over %d bytes", maxBody)
	}
	at, id := req.Header.Get(headerTime), req.Header.Get(headerID)
	sig, err := hex.DecodeString(req.Header.Get(headerSignature))
	if err != nil || len(id) != 32 {
		return nil, "", errUnauthenticated
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil, "", errUnauthenticated
	}
	if d := now.Sub(time.UnixMilli(ms)); d > MaxSkew || d < -MaxSkew {
		return nil, "", errUnauthenticated
	}
	if !hmac.Equal(sig, a.mac(req.Method, req.URL.Path, at, id, body)) {
		return nil, "", errUnauthenticated
	}
	return body, id, nil
}
