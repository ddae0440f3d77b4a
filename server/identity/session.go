package identity

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Cookies are sealed with AES-256-GCM under a key every replica shares:
// their content is neither readable nor forgeable by the browser, and the
// cookie's name is bound in as additional data so that one cookie cannot
// stand in for another. A session cookie carries the claims tiers match
// on, so a signed-in page keeps working while the provider is down.

// sealer seals and opens cookie values.
type sealer struct{ aead cipher.AEAD }

// newSealer derives the cookie key from secret (at least 16 bytes) with
// HKDF-SHA256: a client secret can serve, and the key is never the secret
// itself.
func newSealer(secret []byte) (*sealer, error) {
	if len(secret) < 16 {
		return nil, errors.New("the session key must be at least 16 bytes")
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "faucet-operator session cookies v1", 32)
	if err != nil {
		return nil, fmt.Errorf("derive the session key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("session cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("session cipher: %w", err)
	}
	return &sealer{aead: aead}, nil
}

// seal encrypts v's JSON for the cookie name.
func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("seal %s: %w", name, err)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal %s: %w", name, err)
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

// open decrypts a value sealed for name into v; false when it was not.
func (s *sealer) open(name, value string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) < s.aead.NonceSize() {
		return false
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(name))
	return err == nil && json.Unmarshal(plain, v) == nil
}

// session is the signed-in page's cookie.
type session struct {
	Issuer        string    `json:"iss"`
	Subject       string    `json:"sub"`
	Email         string    `json:"email,omitempty"`
	EmailVerified bool      `json:"ev,omitempty"`
	Name          string    `json:"name,omitempty"`
	Groups        []string  `json:"groups,omitempty"`
	Expires       time.Time `json:"exp"`
}

func (s session) person() *Person {
	return &Person{Issuer: s.Issuer, Subject: s.Subject, Email: s.Email, EmailVerified: s.EmailVerified, Name: s.Name, Groups: s.Groups}
}

// loginState is the cookie that carries a sign-in from the login redirect
// to the callback: the state and nonce the provider must send back and
// the PKCE verifier.
type loginState struct {
	State    string    `json:"state"`
	Nonce    string    `json:"nonce"`
	Verifier string    `json:"verifier"`
	Return   string    `json:"return"`
	Expires  time.Time `json:"exp"`
}

// randomToken is n random bytes in base64url.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}
