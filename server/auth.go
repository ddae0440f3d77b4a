package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
)

// SignIn is the sign-in service (an *identity.Service): the page's OpenID
// Connect login and the verification of bearer tokens.
type SignIn interface {
	// Person is the person r names, by a bearer token in Authorization or
	// the page's session cookie; nil without either. A token that does not
	// verify is an *identity.TokenError.
	Person(r *http.Request) (*identity.Person, error)
	// Login, Callback and Logout serve the page's sign-in endpoints.
	Login(w http.ResponseWriter, r *http.Request)
	Callback(w http.ResponseWriter, r *http.Request)
	Logout(w http.ResponseWriter, r *http.Request)
	// Ready says whether the provider can be reached.
	Ready(ctx context.Context) error
	Issuer() string
}

var _ SignIn = (*identity.Service)(nil)

// reasonSignInRequired: anonymous drips are off and no person was named.
const reasonSignInRequired = "sign_in_required"

// people knows who asks: the person a request names (sign-in) and the
// tier they are served in. The server embeds it.
type people struct {
	signIn SignIn          // nil: no sign-in
	tiers  *identity.Tiers // nil: one anonymous tier
	log    *slog.Logger
	// apiTokens: bearer tokens that are not JWTs are the guard's API
	// tokens.
	apiTokens bool
}

// bearerScheme reports whether an Authorization header is a Bearer one.
func bearerScheme(h string) bool {
	scheme, _, _ := strings.Cut(strings.TrimSpace(h), " ")
	return strings.EqualFold(scheme, "Bearer")
}

// requester is who asks for a drip: a person (nil: nobody signed in) and
// the tier they are served in.
type requester struct {
	person *identity.Person
	tier   *identity.Tier
	// bearer: the person came from a bearer token in Authorization, which
	// is therefore not an API token.
	bearer bool
}

// signedIn reports whether the requester is served in a sign-in tier (a
// person matching no tier is served as anonymous).
func (q requester) signedIn() bool {
	return q.person != nil && q.tier != nil && q.tier.Name != identity.AnonymousName
}

// limited is the person as the limits count them: their tier's limit,
// keyed by them; nil when served as anonymous.
func (q requester) limited() *guard.Person {
	if !q.signedIn() {
		return nil
	}
	return &guard.Person{Key: q.person.Key(), Tier: q.tier.Name, Limit: q.tier.Limit}
}

func (q requester) skipsProofOfWork() bool { return q.signedIn() && q.tier.SkipProofOfWork }

// apiAuthorization is the Authorization header for the API-token check:
// none when it carried the person's token.
func (q requester) apiAuthorization(r *http.Request) string {
	if q.bearer {
		return ""
	}
	return r.Header.Get("Authorization")
}

// tierFor is the tier of a request from person (nil: anonymous); nil when
// no tiers are configured.
func (pp *people) tierFor(p *identity.Person) *identity.Tier {
	if pp.tiers == nil {
		return nil
	}
	return pp.tiers.Of(p)
}

// identify finds who r comes from. A bearer token that does not verify is
// a 401 whose reason and message say why (expired, another issuer, another
// audience, a bad signature), never "anonymous"; a provider that cannot be
// reached to check one is a temporary failure. Without anonymous drips,
// nobody signed in is a 401 that says where to sign in.
func (pp *people) identify(r *http.Request) (requester, *dripFailure) {
	var q requester
	if pp.signIn != nil {
		p, err := pp.signIn.Person(r)
		var te *identity.TokenError
		switch {
		case errors.As(err, &te) && te.Unavailable:
			pp.log.Warn("sign-in provider unreachable for a bearer token", "err", err)
			return q, &dripFailure{status: http.StatusInternalServerError, reason: te.Reason, message: te.Message, retryAfter: 30,
				v3Status: http.StatusServiceUnavailable, v3Message: te.Message}
		case errors.As(err, &te):
			return q, &dripFailure{status: http.StatusUnauthorized, reason: te.Reason, message: te.Message, v3Message: te.Message,
				authenticate: `Bearer error="invalid_token", error_description=` + strconv.Quote(te.Message)}
		case err != nil:
			pp.log.Error("sign-in: reading the requester failed", "err", err)
			return q, &dripFailure{status: http.StatusInternalServerError, reason: reasonInternal, message: "Internal error", v3Message: v3Failed}
		}
		q.person = p
		_, q.bearer = identity.BearerJWT(r.Header.Get("Authorization"))
		if p == nil && !pp.apiTokens && bearerScheme(r.Header.Get("Authorization")) {
			// An opaque access token (Google's, say) cannot be checked
			// against the issuer's keys; served as anonymous, its sender
			// would never learn why they get no tier.
			msg := "The bearer token is not a JWT this faucet can check: send the ID token (or a JWT access token) from " + pp.signInIssuer()
			return q, &dripFailure{status: http.StatusUnauthorized, reason: identity.ReasonTokenInvalid, message: msg, v3Message: msg,
				authenticate: `Bearer error="invalid_token", error_description=` + strconv.Quote(msg)}
		}
	}
	q.tier = pp.tierFor(q.person)
	if pp.tiers != nil && pp.tiers.AnonymousOff && !q.signedIn() {
		if q.person == nil && pp.apiTokens && bearerScheme(r.Header.Get("Authorization")) {
			// An API token: the operator handed it out, its quota bounds it,
			// and the token check after this one refuses a wrong one. A
			// sign-in-only faucet still serves its CI pipelines.
			return q, nil
		}
		if q.person == nil {
			msg := "This faucet drips to signed-in developers only: sign in on its page, or send \"Authorization: Bearer <ID or access token>\" from " + pp.signInIssuer()
			return q, &dripFailure{status: http.StatusUnauthorized, reason: reasonSignInRequired, message: msg, v3Message: msg,
				authenticate: `Bearer realm="faucet"`}
		}
		msg := "Your account matches none of this faucet's sign-in tiers, and it drips to them only"
		return q, &dripFailure{status: http.StatusForbidden, reason: "not_eligible", message: msg, v3Message: msg}
	}
	return q, nil
}

func (pp *people) signInIssuer() string {
	if pp.signIn == nil {
		return "its sign-in provider"
	}
	return pp.signIn.Issuer()
}

// infoSignIn is sign-in in the info document: whether people can sign
// in, where, and what each tier gets.
type infoSignIn struct {
	Enabled   bool       `json:"enabled"`
	Issuer    string     `json:"issuer,omitempty"`
	Login     string     `json:"login,omitempty"`
	Logout    string     `json:"logout,omitempty"`
	Session   string     `json:"session,omitempty"`
	Anonymous bool       `json:"anonymous_drips"`
	Tiers     []infoTier `json:"tiers"`
}

// infoTier is a tier as clients see it.
type infoTier struct {
	Name               string     `json:"name"`
	AmountPercent      int        `json:"amount_percent"`
	Limit              *infoLimit `json:"limit"`
	SkipProofOfWork    bool       `json:"skip_proof_of_work"`
	BudgetSharePercent int        `json:"budget_share_percent"`
	// Match says in words who is in a sign-in tier.
	Match string `json:"match,omitempty"`
}

func tierInfo(t *identity.Tier) infoTier {
	out := infoTier{Name: t.Name, AmountPercent: t.Amount(), Limit: limitInfo(t.Limit), SkipProofOfWork: t.SkipProofOfWork,
		BudgetSharePercent: t.Share()}
	if t.Name != identity.AnonymousName {
		out.Match = t.Match.String()
	}
	return out
}

func (pp *people) signInInfo() *infoSignIn {
	out := &infoSignIn{Enabled: pp.signIn != nil, Anonymous: true, Tiers: []infoTier{}}
	if pp.signIn != nil {
		out.Issuer, out.Login, out.Logout, out.Session = pp.signIn.Issuer(), identity.PathLogin, identity.PathLogout, identity.PathSession
	}
	if t := pp.tiers; t != nil {
		out.Anonymous = !t.AnonymousOff
		for _, tier := range t.All() {
			out.Tiers = append(out.Tiers, tierInfo(tier))
		}
	}
	return out
}

// sessionBody answers GET /faucet/v1/auth/session: who the page (or a
// bearer token) is, and the tier they are served in.
type sessionBody struct {
	SignedIn bool     `json:"signed_in"`
	Name     string   `json:"name,omitempty"`
	Email    string   `json:"email,omitempty"`
	Tier     infoTier `json:"tier"`
	Login    string   `json:"login"`
	Logout   string   `json:"logout"`
}

// handleSession serves GET /faucet/v1/auth/session.
func (s *server) handleSession(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	q, fail := s.identify(r)
	if fail != nil && fail.status == http.StatusUnauthorized && fail.reason != reasonSignInRequired {
		fail.writeV1(w, s.cfg.Clock.Now())
		return
	}
	body := sessionBody{Login: identity.PathLogin, Logout: identity.PathLogout}
	if q.person != nil {
		body.SignedIn, body.Name, body.Email = true, q.person.Display(), q.person.Email
	}
	if q.tier != nil {
		body.Tier = tierInfo(q.tier)
	}
	writeJSON(w, http.StatusOK, body)
}
