// Package identity knows who asks for a drip: a person signed in through
// an OpenID Connect provider (the page's session cookie, or an ID or
// access token as a bearer token from curl, CI and MCP clients), or nobody
// in particular. A person's claims choose their tier, and a tier sets what
// they get: the amount, their own limit across every address and IP they
// use, whether they skip the proof of work, and their share of each
// asset's budget. Tiers are data, from the configuration.
package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
)

// Person is a signed-in requester, as their provider's token describes
// them. Only the claims tiers match on are kept.
type Person struct {
	Issuer        string
	Subject       string
	Email         string
	EmailVerified bool
	Name          string
	Groups        []string
}

// Key identifies the person in the limits without naming them: a hash of
// issuer and subject (a subject is unique only within its issuer).
func (p *Person) Key() string {
	sum := sha256.Sum256([]byte(p.Issuer + "\x00" + p.Subject))
	return hex.EncodeToString(sum[:16])
}

// Display is how the page names the person: the email, else the name,
// else the subject.
func (p *Person) Display() string {
	switch {
	case p.Email != "":
		return p.Email
	case p.Name != "":
		return p.Name
	}
	return p.Subject
}

// Tier is what one kind of requester gets.
type Tier struct {
	// Name names the tier in answers, metrics and its budget pool.
	Name string
	// Match says who is in it (signed-in tiers only).
	Match Match
	// AmountPercent scales every asset's drip: 100 is the configured
	// drip, 200 twice it (0 means 100).
	AmountPercent int
	// Limit is the drips per person and asset (signed-in tiers); zero
	// Requests leaves the person unlimited but for the budget.
	Limit guard.Limit
	// SkipProofOfWork spares the tier the proof of work.
	SkipProofOfWork bool
	// BudgetSharePercent is the tier's share of each asset's budget: its
	// drips stop when they have taken it, whatever is left of the rest.
	// 100 (or 0) draws from the whole budget.
	BudgetSharePercent int
}

// Amount is the percent of a drip the tier gets.
func (t *Tier) Amount() int {
	if t == nil || t.AmountPercent <= 0 {
		return 100
	}
	return t.AmountPercent
}

// Share is the tier's budget share in percent (100: the whole budget).
func (t *Tier) Share() int {
	if t == nil || t.BudgetSharePercent <= 0 {
		return 100
	}
	return min(t.BudgetSharePercent, 100)
}

// Match selects signed-in people by their claims; every condition given
// must hold, and an empty Match holds for everyone signed in.
type Match struct {
	// EmailVerified requires the email_verified claim to be true.
	EmailVerified bool
	// Groups: one of these in the groups claim.
	Groups []string
	// EmailDomains: the email's domain is one of these (the email must
	// be verified for this to count).
	EmailDomains []string
}

// Holds reports whether p matches m.
func (m Match) Holds(p *Person) bool {
	if p == nil {
		return false
	}
	if m.EmailVerified && !p.EmailVerified {
		return false
	}
	if len(m.Groups) > 0 && !slices.ContainsFunc(m.Groups, func(g string) bool { return slices.Contains(p.Groups, g) }) {
		return false
	}
	if len(m.EmailDomains) > 0 {
		_, domain, ok := strings.Cut(p.Email, "@")
		if !ok || !p.EmailVerified || !slices.ContainsFunc(m.EmailDomains, func(d string) bool { return strings.EqualFold(d, domain) }) {
			return false
		}
	}
	return true
}

// Tiers are the configured tiers: Anonymous for requests without a
// person, then the signed-in tiers in order.
type Tiers struct {
	Anonymous Tier
	// AnonymousOff refuses drips without sign-in (401).
	AnonymousOff bool
	// SignedIn are tried in order; a person matching none is served as
	// anonymous.
	SignedIn []Tier
}

// AnonymousName is the anonymous tier's name.
const AnonymousName = "anonymous"

// DefaultSignedIn is the tier of a configuration with sign-in but no
// tiers: everyone signed in with a verified email gets twice the drip,
// 20 drips a day of each asset, no proof of work, and the budget beyond
// the anonymous share.
func DefaultSignedIn() Tier {
	return Tier{Name: "signed-in", Match: Match{EmailVerified: true}, AmountPercent: 200,
		Limit: guard.Limit{Requests: 20, Window: 24 * time.Hour}, SkipProofOfWork: true, BudgetSharePercent: 100}
}

// Of is p's tier: the first signed-in tier p matches, else anonymous.
func (t *Tiers) Of(p *Person) *Tier {
	if p != nil {
		for i := range t.SignedIn {
			if t.SignedIn[i].Match.Holds(p) {
				return &t.SignedIn[i]
			}
		}
	}
	return &t.Anonymous
}

// Find is the tier named name.
func (t *Tiers) Find(name string) (*Tier, bool) {
	if name == t.Anonymous.Name {
		return &t.Anonymous, true
	}
	for i := range t.SignedIn {
		if t.SignedIn[i].Name == name {
			return &t.SignedIn[i], true
		}
	}
	return nil, false
}

// All lists every tier, anonymous first.
func (t *Tiers) All() []*Tier {
	out := []*Tier{&t.Anonymous}
	for i := range t.SignedIn {
		out = append(out, &t.SignedIn[i])
	}
	return out
}

var tierName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// Validate checks the tiers; errors name the tier and field.
func (t *Tiers) Validate() error {
	seen := map[string]bool{}
	var errs []error
	for i, tier := range t.All() {
		name := tier.Name
		field := fmt.Sprintf("tier %q", name)
		if i == 0 {
			field = "the anonymous tier"
		}
		switch {
		case !tierName.MatchString(name):
			errs = append(errs, fmt.Errorf("%s: the name must be 1 to 32 lowercase letters, digits and '-'", field))
		case seen[name]:
			errs = append(errs, fmt.Errorf("%s: two tiers share the name", field))
		}
		seen[name] = true
		if tier.AmountPercent < 0 || tier.AmountPercent > 10000 {
			errs = append(errs, fmt.Errorf("%s: the amount percent must be 1 to 10000", field))
		}
		if tier.BudgetSharePercent < 0 || tier.BudgetSharePercent > 100 {
			errs = append(errs, fmt.Errorf("%s: the budget share must be a percent, 0 to 100", field))
		}
		if tier.Limit.Requests > 0 && tier.Limit.Window <= 0 {
			errs = append(errs, fmt.Errorf("%s: the limit's window must be a positive duration", field))
		}
	}
	if t.AnonymousOff && len(t.SignedIn) == 0 {
		errs = append(errs, errors.New("anonymous drips are off but no sign-in tier is configured: nobody could drip"))
	}
	return errors.Join(errs...)
}

// String says in words who m holds for ("" for everyone signed in).
func (m Match) String() string {
	var parts []string
	if m.EmailVerified {
		parts = append(parts, "a verified email")
	}
	if len(m.Groups) > 0 {
		parts = append(parts, "a group among "+strings.Join(m.Groups, ", "))
	}
	if len(m.EmailDomains) > 0 {
		parts = append(parts, "a verified email at "+strings.Join(m.EmailDomains, ", "))
	}
	if len(parts) == 0 {
		return "anyone signed in"
	}
	return "signed in with " + strings.Join(parts, " and ")
}
