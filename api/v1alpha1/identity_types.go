package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IdentitySpec turns on sign-in through an OpenID Connect provider and
// sets the tiers of requesters. People sign in on the faucet's page (a
// session cookie) or send an ID or access token as a bearer token (curl,
// CI, MCP clients); their claims choose their tier, tried in order, and a
// person who matches none, like every drip without sign-in, gets the
// anonymous tier. It becomes the faucet's --oidc-*, --public-url,
// --session-*, --tier and --anonymous-* flags.
//
// The key that seals the sign-in cookies must be the same on every pod
// and across restarts: it comes from sessionKeySecretRef, else it is
// derived from the client secret. A public client (no clientSecretRef)
// therefore needs sessionKeySecretRef.
// +kubebuilder:validation:XValidation:rule="!has(self.oidc) || has(self.oidc.clientSecretRef) || has(self.sessionKeySecretRef)",message="identity.sessionKeySecretRef is required without identity.oidc.clientSecretRef (a public client): the key sealing the sign-in cookies is otherwise derived from the client secret, and without either each pod would make up its own, signing everyone out at every restart and between replicas"
type IdentitySpec struct {
	// oidc is the OpenID Connect provider people sign in with.
	// +required
	OIDC OIDCSpec `json:"oidc"`

	// publicURL is the faucet's origin as browsers reach it, e.g.
	// https://faucet.example.com, without a path: the provider sends
	// people back to <publicURL>/faucet/v1/auth/callback, which must be a
	// redirect URI of the client at the provider. Unset, the faucet
	// derives it from each request's Host (and, behind
	// spec.rateLimits.trustedProxyHops proxies, X-Forwarded-Proto).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="identity.publicURL must be the faucet's origin as browsers reach it, an http:// or https:// URL with a host, e.g. https://faucet.example.com"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || (url(self).getEscapedPath() in ['', '/'] && !self.contains('?') && !self.contains('#'))",message="identity.publicURL must be an origin only, without a path, query or fragment, e.g. https://faucet.example.com: the faucet adds /faucet/v1/auth/callback itself"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]*://[^/?#]*@')",message="identity.publicURL must not carry a user or password"
	PublicURL string `json:"publicURL,omitempty"`

	// sessionKeySecretRef selects the Secret data key holding the key
	// that seals the sign-in cookies: 16 bytes or more (e.g. `openssl
	// rand -base64 32`), shared by the replicas. The Secret is mounted
	// read-only into the pod as a file; its content never appears in the
	// Deployment, the status or events. Editing it restarts the pods and
	// signs everyone out. Unset, the key is derived from the client
	// secret, which must then be 16 bytes or more.
	// +optional
	SessionKeySecretRef *SessionKeySecretReference `json:"sessionKeySecretRef,omitempty"`

	// sessionTTL is how long the page stays signed in, as a duration
	// ("12h"), at least 1m. Defaults to 12h.
	// +optional
	// +kubebuilder:default="12h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="identity.sessionTTL must be at least 1m"
	SessionTTL *metav1.Duration `json:"sessionTTL,omitempty"`

	// anonymous is the tier of drips without sign-in (and of people who
	// match no tier).
	// +optional
	Anonymous *AnonymousSpec `json:"anonymous,omitempty"`

	// tiers are the sign-in tiers, tried in order: a signed-in person gets
	// the first whose match holds, else the anonymous tier. Unset, the
	// faucet's default tier applies: "signed-in", anyone with a verified
	// email, twice the drip, 20 drips per 24h of each asset, no proof of
	// work, the whole budget. Names are unique.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.exists_one(u, u.name == t.name))",message="identity.tiers: two tiers share a name; each needs one of its own (it names its budget pool and its metrics)"
	Tiers []TierSpec `json:"tiers,omitempty"`
}

// OIDCSpec is the OpenID Connect provider and the faucet's client there.
type OIDCSpec struct {
	// issuerURL is the provider's issuer, exactly as its discovery
	// document (<issuerURL>/.well-known/openid-configuration) states it,
	// e.g. https://accounts.google.com or
	// https://keycloak.example.com/realms/faucet: an http:// or https://
	// URL without a query, fragment, user or password.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="identity.oidc.issuerURL must be an http:// or https:// URL with a host, exactly as the provider's discovery document states it, e.g. https://accounts.google.com"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#')",message="identity.oidc.issuerURL must not have a query or a fragment"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]*://[^/?#]*@')",message="identity.oidc.issuerURL must not carry a user or password"
	IssuerURL string `json:"issuerURL"`

	// clientID is the faucet's client ID at the provider. Bearer tokens
	// must name it (or one of audiences) in their aud claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self == self.trim()",message="identity.oidc.clientID must not start or end with whitespace"
	ClientID string `json:"clientID"`

	// clientSecretRef selects the Secret data key holding the client
	// secret. The Secret is mounted read-only into the pod as a file; its
	// content never appears in the Deployment, the status or events.
	// Editing it restarts the pods. Unset, the faucet is a public client
	// (PKCE alone), and sessionKeySecretRef is required.
	// +optional
	ClientSecretRef *OIDCClientSecretReference `json:"clientSecretRef,omitempty"`

	// scopes asked for at sign-in. Unset, the faucet's default applies:
	// openid, email and profile. Set, they must include openid; add
	// groups (or your provider's scope for it) for tiers that match
	// groups.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.exists(s, s == 'openid')",message="identity.oidc.scopes must include openid (leave scopes out for the default: openid, email, profile)"
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.matches('^[!#-+--~]+$'))",message="identity.oidc.scopes must each be one scope: printable ASCII without spaces, commas or quotes, e.g. groups"
	Scopes []string `json:"scopes,omitempty"`

	// audiences are further aud values accepted in bearer tokens besides
	// clientID, e.g. the audience of access tokens your provider issues
	// for an API.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.all(a, a.matches('^[!#-+--~]+$'))",message="identity.oidc.audiences must each be one audience: printable ASCII without spaces, commas or quotes, e.g. api://faucet"
	Audiences []string `json:"audiences,omitempty"`
}

// OIDCClientSecretReference selects the OpenID Connect client secret
// inside a Secret.
type OIDCClientSecretReference struct {
	// name of the Secret, in the FaucetServer's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key holding the client secret. Defaults to
	// "client-secret".
	// +optional
	// +kubebuilder:default=client-secret
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="identity.oidc.clientSecretRef.key must be a file name, not . or .."
	Key string `json:"key,omitempty"`
}

// SessionKeySecretReference selects the sign-in session key inside a
// Secret.
type SessionKeySecretReference struct {
	// name of the Secret, in the FaucetServer's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key holding the session key. Defaults to
	// "session-key".
	// +optional
	// +kubebuilder:default=session-key
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="identity.sessionKeySecretRef.key must be a file name, not . or .."
	Key string `json:"key,omitempty"`
}

// AnonymousSpec is the tier of drips without sign-in.
type AnonymousSpec struct {
	// enabled serves drips without sign-in. false answers them 401, so
	// only signed-in people drip. Defaults to true.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// budgetSharePercent is the share of each asset's budget drips
	// without sign-in may take, 1 to 100: a farm of anonymous clients
	// empties this share and no more, and the rest stays for the people
	// signed in. Defaults to 50.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="identity.anonymous.budgetSharePercent must be a percent of each budget, 1 to 100"
	BudgetSharePercent *int32 `json:"budgetSharePercent,omitempty"`

	// amountPercent scales each asset's drip without sign-in: 100 is the
	// configured amount, 50 half of it. 1 to 10000. Defaults to 100.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10000",message="identity.anonymous.amountPercent must be a percent of the drip, 1 to 10000"
	AmountPercent *int32 `json:"amountPercent,omitempty"`
}

// TierSpec is one sign-in tier: who is in it and what they get.
type TierSpec struct {
	// name names the tier in answers, metrics and its budget pool: 1 to
	// 32 lower-case letters, digits and '-', starting and ending with a
	// letter or digit. anonymous is the tier without sign-in's.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$')",message="identity.tiers[].name must be 1 to 32 lower-case letters, digits and '-', starting and ending with a letter or digit, e.g. staff or verified"
	// +kubebuilder:validation:XValidation:rule="self != 'anonymous'",message="identity.tiers[].name must not be anonymous: that is the tier of drips without sign-in, set by identity.anonymous"
	Name string `json:"name"`

	// match says who is in the tier; every condition given must hold.
	// Unset or empty: everyone signed in.
	// +optional
	Match *TierMatch `json:"match,omitempty"`

	// amountPercent scales each asset's drip for the tier: 100 is the
	// configured amount, 200 twice it. 1 to 10000. Defaults to 100.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 10000",message="identity.tiers[].amountPercent must be a percent of the drip, 1 to 10000"
	AmountPercent *int32 `json:"amountPercent,omitempty"`

	// limit is the drips each person of the tier may get per asset,
	// across every address and IP they use. Defaults to 20 per 24h.
	// +optional
	// +kubebuilder:default={requests: 20, window: "24h"}
	Limit *RateLimit `json:"limit,omitempty"`

	// skipProofOfWork spares the tier the proof of work
	// (spec.abuse.proofOfWork).
	// +optional
	SkipProofOfWork bool `json:"skipProofOfWork,omitempty"`

	// budgetSharePercent is the tier's share of each asset's budget, 1
	// to 100: its drips stop when they have taken it, whatever is left of
	// the rest. 100 draws from the whole budget. Defaults to 100.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 100",message="identity.tiers[].budgetSharePercent must be a percent of each budget, 1 to 100"
	BudgetSharePercent *int32 `json:"budgetSharePercent,omitempty"`
}

// TierMatch selects signed-in people by the claims of their provider's
// token; every condition given must hold.
type TierMatch struct {
	// emailVerified requires the email_verified claim to be true.
	// +optional
	EmailVerified bool `json:"emailVerified,omitempty"`

	// groups: one of these in the groups claim (ask for it in
	// identity.oidc.scopes, e.g. groups). Names must not contain ',', '|'
	// or ';', nor start or end with whitespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.all(g, !g.contains(',') && !g.contains('|') && !g.contains(';') && g == g.trim())",message="identity.tiers[].match.groups must each be a group name without ',', '|' or ';' and without whitespace at either end"
	Groups []string `json:"groups,omitempty"`

	// emailDomains: the person's email is at one of these domains, e.g.
	// example.com (without @), and verified.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.all(d, d.matches('^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?([.][a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*$'))",message="identity.tiers[].match.emailDomains must each be a domain name, e.g. example.com (without @)"
	EmailDomains []string `json:"emailDomains,omitempty"`
}
