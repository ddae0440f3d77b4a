package identity

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Login starts the page's sign-in (GET PathLogin[?return=/path]): a
// redirect to the provider with a fresh state, nonce and PKCE challenge,
// which a sealed cookie carries to the callback. A provider that cannot be
// reached answers 503: drips without sign-in are unaffected.
func (s *Service) Login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	conf, _, err := s.oauth(r.Context(), r)
	if err == nil {
		// Discovered once, the provider may have gone since.
		err = s.verify.reachable(r.Context())
	}
	if err != nil {
		s.log.Warn("sign-in: the provider cannot be reached", "issuer", s.cfg.Issuer, "err", err)
		w.Header().Set("Retry-After", "30")
		s.fail(w, r, http.StatusServiceUnavailable, ReasonSignInUnavailable,
			"Sign-in is unavailable: the faucet cannot reach its sign-in provider. Drips without sign-in still work; try signing in again shortly.")
		return
	}
	st := loginState{State: randomToken(24), Nonce: randomToken(24), Verifier: oauth2.GenerateVerifier(),
		Return: localPath(r.URL.Query().Get("return")), Expires: s.cfg.Clock.Now().Add(loginTTL)}
	v, err := s.seal.seal(cookieLogin, st)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "internal", "Sign-in failed; try again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieLogin, Value: v, Path: "/faucet/v1/auth/", MaxAge: int(loginTTL.Seconds()),
		HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, conf.AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier)), http.StatusFound)
}

// Callback ends the sign-in (GET PathCallback?code=…&state=…): it checks
// the state, exchanges the code with its PKCE verifier, verifies the ID
// token (audience, nonce) and sets the session cookie.
func (s *Service) Callback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	var st loginState
	c, err := r.Cookie(cookieLogin)
	if err != nil || !s.seal.open(cookieLogin, c.Value, &st) || !s.cfg.Clock.Now().Before(st.Expires) {
		s.fail(w, r, http.StatusBadRequest, "sign_in_expired", "This sign-in expired or was started in another browser; sign in again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieLogin, Path: "/faucet/v1/auth/", MaxAge: -1, HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	if q.Get("state") != st.State {
		s.fail(w, r, http.StatusBadRequest, "sign_in_state", "The sign-in's state does not match; sign in again.")
		return
	}
	if e := q.Get("error"); e != "" {
		// The person cancelled, or the provider refused: back to the page,
		// which says so.
		http.Redirect(w, r, withParam(st.Return, "sign_in_error", e), http.StatusSeeOther)
		return
	}
	p, status, reason, msg := s.exchange(r, q.Get("code"), st)
	if p == nil {
		s.fail(w, r, status, reason, msg)
		return
	}
	sess := session{Issuer: p.Issuer, Subject: p.Subject, Email: p.Email, EmailVerified: p.EmailVerified, Name: p.Name,
		Expires: s.cfg.Clock.Now().Add(s.cfg.SessionTTL)}
	for _, g := range p.Groups {
		if s.cfg.KeepGroup == nil || s.cfg.KeepGroup(g) {
			sess.Groups = append(sess.Groups, g)
		}
	}
	v, err := s.seal.seal(cookieSession, sess)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "internal", "Sign-in failed; try again.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieSession, Value: v, Path: "/", MaxAge: int(s.cfg.SessionTTL.Seconds()),
		HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteLaxMode})
	s.log.Info("signed in", "issuer", p.Issuer, "person", p.Key())
	http.Redirect(w, r, st.Return, http.StatusSeeOther)
}

// exchange trades the code for tokens and verifies the ID token; on
// failure it returns the status, reason and message to answer with.
func (s *Service) exchange(r *http.Request, code string, st loginState) (*Person, int, string, string) {
	ctx := context.WithValue(r.Context(), oauth2.HTTPClient, s.cfg.HTTPClient)
	conf, p, err := s.oauth(ctx, r)
	if err != nil {
		return nil, http.StatusServiceUnavailable, ReasonSignInUnavailable, "Sign-in is unavailable: the faucet cannot reach its sign-in provider; try again shortly."
	}
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(st.Verifier))
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re):
		s.log.Warn("sign-in: the provider refused the code", "error_code", re.ErrorCode, "status", re.Response.StatusCode)
		return nil, http.StatusBadRequest, "sign_in_refused", "The sign-in provider refused the sign-in (" + safeCode(re.ErrorCode) + "); sign in again."
	case err != nil:
		s.log.Warn("sign-in: the code exchange failed", "err", err)
		return nil, http.StatusServiceUnavailable, ReasonSignInUnavailable, "The sign-in provider did not answer; try again shortly."
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, http.StatusBadGateway, "sign_in_no_id_token", "The sign-in provider sent no ID token; is the openid scope allowed for this client?"
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: s.cfg.ClientID, Now: s.cfg.Clock.Now}).Verify(oidc.ClientContext(ctx, s.cfg.HTTPClient), raw)
	if err != nil || idt.Nonce != st.Nonce {
		s.log.Warn("sign-in: the ID token does not verify", "err", err, "nonce_ok", err == nil)
		return nil, http.StatusBadGateway, ReasonTokenInvalid, "The sign-in provider's ID token does not verify; sign in again."
	}
	var c claims
	if err := idt.Claims(&c); err != nil || c.Subject == "" {
		return nil, http.StatusBadGateway, ReasonTokenNoSubject, "The sign-in provider's ID token names no subject."
	}
	return c.person(), 0, "", ""
}

// Logout ends the page's session (POST PathLogout): 204, or a redirect to
// the page for a form.
func (s *Service) Logout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, &http.Cookie{Name: cookieSession, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure(r), SameSite: http.SameSiteLaxMode})
	if wantsHTML(r) {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// fail answers a sign-in failure: a short page for a browser, JSON for
// anything else.
func (s *Service) fail(w http.ResponseWriter, r *http.Request, status int, reason, msg string) {
	if wantsHTML(r) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<!doctype html><meta charset=utf-8><title>Sign-in</title><p id=error>" + html.EscapeString(msg) +
			"</p><p><a href=\"/\">Back to the faucet</a></p>\n"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"success": false, "error": msg, "reason": reason})
}

func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// localPath keeps a return address on this site: a path, never a scheme,
// host or protocol-relative "//".
func localPath(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return "/"
	}
	return p
}

func withParam(p, k, v string) string {
	u, err := url.Parse(p)
	if err != nil {
		return "/"
	}
	q := u.Query()
	q.Set(k, safeCode(v))
	u.RawQuery = q.Encode()
	return u.String()
}

// safeCode bounds an error code from the provider to what OAuth allows.
func safeCode(c string) string {
	c = strings.Map(func(r rune) rune {
		if r >= 0x20 && r < 0x7f && !slices.Contains([]rune{'"', '\\', '<', '>'}, r) {
			return r
		}
		return -1
	}, c)
	if len(c) > 64 {
		c = c[:64]
	}
	return c
}
