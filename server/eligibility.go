package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
)

// pathEligibility answers whether a drip would be admitted now.
const pathEligibility = "/faucet/v1/eligibility"

// eligibilityBody answers GET /faucet/v1/eligibility: what the same drip
// request would meet now (switches, abuse checks, rate limits), without
// reserving anything. A drip may still fail after it (the node, funds);
// it is never refused for a reason this answer did not give, but for a
// request racing it for the last slot.
type eligibilityBody struct {
	Asset    string `json:"asset"`
	Address  string `json:"address"`
	Eligible bool   `json:"eligible"`
	// Tier is the tier the request is served in ("anonymous", or a
	// sign-in tier's name); absent without tiers. SignedIn says whether a
	// person was recognised in a sign-in tier.
	Tier     string `json:"tier,omitempty"`
	SignedIn bool   `json:"signed_in"`
	// Reason and Message are the refusal a drip would get now: the drip
	// endpoints' reason codes (disabled, not_configured, rate_limited,
	// ip_denied, token_invalid, …).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Detail adds to Message what a person can act on (which budget share
	// is spent, where to sign in).
	Detail string `json:"detail,omitempty"`
	// Amount is what a drip pays, in the asset's base units, as a decimal
	// string.
	Amount            string `json:"amount,omitempty"`
	RetryAfterSeconds int64  `json:"retry_after_seconds,omitempty"`
	NextAllowedAt     string `json:"next_allowed_at,omitempty"`
	// ProofOfWork is the difficulty an anonymous drip must solve (0: none)
	// and where to fetch its challenge.
	ProofOfWork *eligibilityPoW `json:"proof_of_work,omitempty"`
	// Limits are the limits a drip counts against, with their use now.
	Limits []eligibilityLimit `json:"limits"`
}

type eligibilityPoW struct {
	Difficulty   int    `json:"difficulty"`
	ChallengeURL string `json:"challenge_url"`
}

type eligibilityLimit struct {
	Policy        string `json:"policy"`
	Requests      int    `json:"requests"`
	WindowSeconds int64  `json:"window_seconds"`
	Remaining     int    `json:"remaining"`
	ResetSeconds  int64  `json:"reset_seconds"`
}

// handleEligibility serves GET /faucet/v1/eligibility?asset=…&address=…
// [&stacking=true|&size=large]. It takes the same headers as a drip
// (Authorization, the client's address).
func (s *server) handleEligibility(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, errorBody{Error: "invalid query string", Reason: "invalid_query"})
		return
	}
	if len(q["asset"]) > 1 {
		writeError(w, http.StatusBadRequest, errorBody{Error: "asset given more than once", Reason: "unknown_asset"})
		return
	}
	asset := faucet.Asset(strings.TrimSpace(q.Get("asset"))).OrSTX()
	body, bad := s.eligibility(r.Context(), r, asset, question{address: q["address"], stacking: q["stacking"], size: q["size"]})
	if bad != nil {
		writeError(w, bad.status, bad.body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// eligibility answers whether the drip in would be admitted now for the
// client of r; a malformed question gets the refusal a drip would (400,
// or 404 for an unknown asset).
func (s *server) eligibility(ctx context.Context, r *http.Request, name faucet.Asset, in question) (eligibilityBody, *refusal) {
	if !s.knownAsset(name) {
		return eligibilityBody{}, &refusal{status: http.StatusNotFound, body: errorBody{
			Error:  "this faucet does not drip " + shortName(string(name)) + "; it drips " + strings.Join(s.assetNames(), ", "),
			Reason: "unknown_asset",
		}}
	}
	out := eligibilityBody{Asset: string(name), Limits: []eligibilityLimit{}}
	if len(in.address) > 0 {
		out.Address = strings.TrimSpace(in.address[0])
	}
	refuse := func(reason, msg string) (eligibilityBody, *refusal) {
		out.Reason, out.Message = reason, msg
		return out, nil
	}
	a, on := s.lookup(name)
	if !on || s.turnedOff(name) {
		f := s.assetOff(name)
		return refuse(f.reason, f.message)
	}
	k, bad := a.judge(in)
	if bad != nil {
		return out, bad
	}
	out.Address = k.text
	adm := k.admission()
	base, err := a.quote(ctx, k.opts)
	baseKnown := err == nil // the stacking amount without the node is not
	if ri := infoFrom(r.Context()); ri != nil {
		adm.ClientIP = ri.clientIP
	}
	asset := a.name
	// The drip's own order: the switch, who asks, the checks, the amount,
	// the limits and budget.
	if s.suspended(asset) {
		return refuse(string(faucet.ReasonDisabled), s.suspendedMessage(asset))
	}
	who, fail := s.identify(r)
	if fail != nil {
		return refuse(fail.reason, fail.message)
	}
	tier := who.tier
	adm.Person = who.limited()
	if tier != nil {
		out.Tier = tier.Name
	}
	out.SignedIn = who.signedIn()
	if baseKnown {
		out.Amount = strconv.FormatUint(guard.PercentOf(base, tier.Amount()), 10)
	}
	if s.cfg.Guard != nil {
		g, err := s.cfg.Guard.Preview(ctx, guard.Request{
			ClientIP: adm.ClientIP, Recipient: adm.Recipient, Asset: adm.Asset, Stacking: adm.Stacking,
			Authorization: who.apiAuthorization(r), SignedIn: who.skipsProofOfWork(),
		})
		var rej *guard.Rejection
		switch {
		case errors.As(err, &rej):
			if rej.RetryAfter > 0 {
				out.setRetry(s.cfg.Clock.Now(), rej.RetryAfter)
			}
			return refuse(rej.Reason, rej.Message)
		case err != nil:
			s.log.Warn("eligibility: abuse checks failed", "err", err)
			return refuse(string(faucet.ReasonStoreUnavailable), dripErrorText[faucet.ReasonStoreUnavailable])
		}
		adm.Grant = g
		if g.ProofOfWork > 0 {
			out.ProofOfWork = &eligibilityPoW{Difficulty: g.ProofOfWork, ChallengeURL: pathChallenge}
		}
	}
	if s.quoted(asset, tier) && baseKnown && !s.plan(ctx, &adm, asset, base, tier) {
		f := s.reserveFailure(asset)
		out.Amount = ""
		return refuse(f.reason, f.message)
	}
	return s.eligibilityLimits(ctx, out, adm, asset, tier)
}

// eligibilityLimits reads the limits and the budget as the drip's
// reservation would meet them.
func (s *server) eligibilityLimits(ctx context.Context, out eligibilityBody, adm guard.Admission, asset faucet.Asset, tier *identity.Tier) (eligibilityBody, *refusal) {
	pv, err := s.cfg.Limits.Peek(ctx, adm)
	if err != nil {
		s.log.Warn("eligibility: rate limits unavailable", "err", err)
		out.Reason, out.Message = string(faucet.ReasonStoreUnavailable), dripErrorText[faucet.ReasonStoreUnavailable]
		return out, nil
	}
	for _, u := range pv.Use {
		out.Limits = append(out.Limits, eligibilityLimit{
			Policy: u.Policy, Requests: u.Limit.Requests, WindowSeconds: int64(u.Limit.Window / time.Second),
			Remaining: max(u.Limit.Requests-u.Used, 0), ResetSeconds: ceilSeconds(u.Reset),
		})
	}
	switch {
	case pv.Wait > 0:
		out.setRetry(s.cfg.Clock.Now(), pv.Wait)
		out.Reason, out.Message = reasonRateLimited, "Too many requests"
	case adm.Want > 0 && pv.Amount == 0:
		// The same refusal, in the same words, as the next drip's.
		f := s.budgetFailure(asset, &guard.Exhausted{RetryAfter: pv.BudgetWait, Pool: pv.BudgetPool}, tier)
		out.setRetry(s.cfg.Clock.Now(), pv.BudgetWait)
		out.Amount, out.Detail, out.Reason, out.Message = "", f.detail, f.reason, f.message
	default:
		if adm.Want > 0 {
			out.Amount = strconv.FormatUint(pv.Amount, 10)
		}
		out.Eligible = true
	}
	return out, nil
}

func (b *eligibilityBody) setRetry(now time.Time, d time.Duration) {
	b.RetryAfterSeconds = retryAfterSeconds(d)
	b.NextAllowedAt = now.Add(time.Duration(b.RetryAfterSeconds) * time.Second).UTC().Format(time.RFC3339)
}
