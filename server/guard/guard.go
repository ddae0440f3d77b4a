package guard

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Check names (metric label values, stable).
const (
	CheckDenyList    = "ip_deny"
	CheckAPIToken    = "api_token"
	CheckProofOfWork = "proof_of_work"
	CheckBalanceCap  = "balance_cap"
)

// CheckNames lists the checks in chain order (for pre-initialising metrics).
var CheckNames = []string{CheckDenyList, CheckTokenLockout, CheckAPIToken, CheckProofOfWork, CheckBalanceCap}

// Grant.Bypassed values.
const (
	bypassToken   = "api_token"
	bypassIPAllow = "ip_allow"
	bypassSignIn  = "sign_in"
)

// Defaults of the proof of work: the one definition the serve flags, the
// CRD's defaults and New (for zero Config fields) read. The proof of work is
// off by default: v1 and v3 API clients written for the incumbent send no
// solution, and a proof that only the page pays stops no bot (bots call the
// API). Public faucets turn it on for everyone and give CI an API token.
const (
	DefaultDifficulty    = 0
	DefaultChallengeTTL  = 5 * time.Minute
	DefaultMaxDifficulty = 24
)

// Defaults applied by New to zero Config fields.
const (
	defaultTokensReload = 10 * time.Second
	defaultRaiseStep    = 2
	defaultBalanceTTL   = 30 * time.Second
	maxDifficulty       = 32
	minSecretLen        = 16
)

// Request is what the checks see of one drip request.
type Request struct {
	ClientIP      netip.Addr // zero when unknown
	Recipient     stacks.Principal
	Asset         string // "" for STX, or another asset's name
	Stacking      bool
	Authorization string // the raw Authorization header ("" when absent)
	Challenge     string // X-Faucet-Challenge header
	Solution      string // X-Faucet-Solution header
	// SignedIn: a person whose sign-in tier skips the proof of work asks
	// (the caller verified who). Their drips do not raise the difficulty.
	SignedIn bool
}

// Grant is what passing the chain gives the engine.
type Grant struct {
	Token       *TokenQuota // non-nil when a valid API token was presented
	SkipIPLimit bool        // an API token or an allow-listed client IP
	Bypassed    string      // "", "api_token", "ip_allow" or "sign_in": why checks were skipped (for logs)
	// ProofOfWork is set by Preview alone: the drip must carry a solved
	// challenge of this difficulty.
	ProofOfWork int
}

// Rejection is a refused request; Chain.Check returns it (as error) for a
// policy refusal.
type Rejection struct {
	Check   string // one of the Check* names
	Status  int    // HTTP status to answer with
	Reason  string // stable machine code, e.g. "challenge_expired"
	Message string // one human sentence safe to show
	// RetryAfter is how long until the request may succeed (a 429); 0
	// when waiting does not help.
	RetryAfter time.Duration
}

func (r *Rejection) Error() string {
	return fmt.Sprintf("guard: %s refused the request (%d %s): %s", r.Check, r.Status, r.Reason, r.Message)
}

// Config configures a Chain. Zero durations take their defaults.
type Config struct {
	// Allow bypasses the proof of work and the per-IP limit; Deny refuses
	// everyone, API tokens included.
	Allow, Deny []netip.Prefix
	// TokensFile is the API tokens file ("" = no tokens); see the package doc.
	TokensFile string
	// TokensReload is how often TokensFile is re-read (default 10s): a
	// Kubernetes Secret volume is updated in place.
	TokensReload time.Duration
	PoW          PoWConfig
	// BalanceCap (µSTX, 0 = off) refuses a recipient already holding at
	// least this much (balance plus locked, confirmed state).
	BalanceCap uint64
	// BalanceTTL is how long a recipient's balance is cached (default 30s).
	BalanceTTL time.Duration
	// Accounts reads balances; required when BalanceCap > 0.
	Accounts AccountReader
	// Spent remembers used challenges; nil = NewMemorySpent on Clock.
	// Replicas must share one for replays to be caught across them.
	Spent SpentChallenges
	// Failures counts failed API-token attempts per client address (see
	// "Token lock-out" in the package doc); nil = a MemoryLimiter of its
	// own. Replicas must share one, the store's Limiter, for a lock-out
	// to hold on all of them.
	Failures Limiter
	// OnReject is called once per rejection with the check name; may be nil.
	OnReject func(check string)
	Logger   *slog.Logger
	// Clock judges challenges, lock-outs and the adaptive raise, and
	// paces the tokens file's reload; nil is the real clock.
	Clock clock.WithTicker
}

// PoWConfig configures the proof of work.
type PoWConfig struct {
	// Difficulty is the base number of leading zero bits required of
	// anonymous drips; 0 = off unless the adaptive raise kicks in.
	Difficulty int
	// Secret is the HMAC-SHA256 key for challenges, at least 16 bytes when
	// a proof of work can be required. Replicas must share it.
	Secret []byte
	// TTL is a challenge's lifetime (default 5m).
	TTL time.Duration
	// RaiseAbove: when more than Requests anonymous drips passed within
	// Window, newly issued challenges get a higher difficulty. Zero = off.
	RaiseAbove Limit
	// RaiseStep is the bits added per doubling of the rate above the
	// threshold (default 2).
	RaiseStep int
	// MaxDifficulty caps the raise (default 24, or Difficulty if higher).
	MaxDifficulty int
}

// AccountReader reads an account's confirmed state; *node.Client
// implements it.
type AccountReader interface {
	Account(ctx context.Context, principal string) (*node.Account, error)
}

// SpentChallenges remembers used challenges.
type SpentChallenges interface {
	// SpendChallenge marks id used until expires (it can be forgotten
	// after that); fresh is false when it was already spent. Must be atomic
	// across processes for a shared store.
	SpendChallenge(ctx context.Context, id string, expires time.Time) (fresh bool, err error)
}

// Chain runs the checks. It is safe for concurrent use.
type Chain struct {
	allow, deny []netip.Prefix
	pow         PoWConfig
	secret      []byte
	balanceCap  uint64
	accounts    AccountReader
	spent       SpentChallenges
	onReject    func(string)
	log         *slog.Logger
	clock       clock.WithTicker

	tokensFile   string
	tokensReload time.Duration
	tokens       atomic.Pointer[tokenSet]
	reloadMu     sync.Mutex
	tokensSum    [32]byte // content hash of the last file read, to reload only on change
	lastLoadErr  string   // last reload error, to log each distinct one once

	rate     *rateWindow // nil when the adaptive raise is off
	balances *balanceCache
	lockout  *lockout
}

// New validates cfg, loads the tokens file and returns a Chain.
func New(cfg Config) (*Chain, error) {
	c := &Chain{
		balanceCap:   cfg.BalanceCap,
		accounts:     cfg.Accounts,
		spent:        cfg.Spent,
		onReject:     cfg.OnReject,
		log:          cfg.Logger,
		clock:        cfg.Clock,
		tokensFile:   cfg.TokensFile,
		tokensReload: cfg.TokensReload,
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	var err error
	if c.allow, err = normalisePrefixes(cfg.Allow); err != nil {
		return nil, fmt.Errorf("guard: allow list: %w", err)
	}
	if c.deny, err = normalisePrefixes(cfg.Deny); err != nil {
		return nil, fmt.Errorf("guard: deny list: %w", err)
	}
	if c.tokensReload < 0 {
		return nil, fmt.Errorf("guard: tokens reload interval %v is negative", c.tokensReload)
	}
	if c.tokensReload == 0 {
		c.tokensReload = defaultTokensReload
	}
	if err := c.setupPoW(cfg.PoW); err != nil {
		return nil, err
	}
	if cfg.BalanceTTL < 0 {
		return nil, fmt.Errorf("guard: balance TTL %v is negative", cfg.BalanceTTL)
	}
	if cfg.BalanceCap > 0 {
		if cfg.Accounts == nil {
			return nil, errors.New("guard: a balance cap needs an account reader")
		}
		ttl := cfg.BalanceTTL
		if ttl == 0 {
			ttl = defaultBalanceTTL
		}
		c.balances = newBalanceCache(ttl, maxBalanceEntries)
	}
	if c.spent == nil {
		c.spent = NewMemorySpent(c.clock)
	}
	c.lockout = newLockout(cfg.Failures, c.log)
	c.tokens.Store(&tokenSet{})
	if c.tokensFile != "" {
		set, sum, err := loadTokensFile(c.tokensFile)
		if err != nil {
			return nil, fmt.Errorf("guard: %w", err)
		}
		c.tokens.Store(set)
		c.tokensSum = sum
	}
	return c, nil
}

// setupPoW validates the proof-of-work settings and applies defaults.
func (c *Chain) setupPoW(p PoWConfig) error {
	if p.Difficulty < 0 || p.Difficulty > maxDifficulty {
		return fmt.Errorf("guard: proof-of-work difficulty %d is outside 0..%d", p.Difficulty, maxDifficulty)
	}
	if p.TTL < 0 {
		return fmt.Errorf("guard: challenge TTL %v is negative", p.TTL)
	}
	if p.TTL == 0 {
		p.TTL = DefaultChallengeTTL
	}
	if p.TTL < time.Second {
		return fmt.Errorf("guard: challenge TTL %v is under one second", p.TTL)
	}
	raise := p.RaiseAbove.Requests > 0
	if raise && p.RaiseAbove.Window <= 0 {
		return fmt.Errorf("guard: proof-of-work raise window %v must be positive", p.RaiseAbove.Window)
	}
	if p.RaiseStep < 0 {
		return fmt.Errorf("guard: proof-of-work raise step %d is negative", p.RaiseStep)
	}
	if p.RaiseStep == 0 {
		p.RaiseStep = defaultRaiseStep
	}
	if p.MaxDifficulty == 0 {
		p.MaxDifficulty = max(DefaultMaxDifficulty, p.Difficulty)
	}
	if p.MaxDifficulty < p.Difficulty || p.MaxDifficulty > maxDifficulty {
		return fmt.Errorf("guard: proof-of-work maximum difficulty %d is outside %d..%d", p.MaxDifficulty, p.Difficulty, maxDifficulty)
	}
	// The secret is copied so a caller reusing its slice cannot change it.
	c.secret = append([]byte(nil), p.Secret...)
	if p.Difficulty > 0 || raise {
		if len(c.secret) < minSecretLen {
			return fmt.Errorf("guard: proof-of-work secret is %d bytes, want at least %d", len(c.secret), minSecretLen)
		}
	} else if len(c.secret) == 0 {
		// Challenges are still issued (at difficulty 0) but never required:
		// a process-local key keeps them well-formed.
		c.secret = make([]byte, 32)
		rand.Read(c.secret)
	}
	p.Secret = nil
	c.pow = p
	if raise {
		c.rate = newRateWindow(p.RaiseAbove.Window)
	}
	return nil
}

// normalisePrefixes masks prefixes and turns IPv4-mapped IPv6 prefixes into
// IPv4 ones, since client addresses are unmapped before matching.
func normalisePrefixes(in []netip.Prefix) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(in))
	for i, p := range in {
		if !p.IsValid() {
			return nil, fmt.Errorf("entry %d is not a valid prefix", i+1)
		}
		if a := p.Addr(); a.Is4In6() {
			if p.Bits() < 96 {
				return nil, fmt.Errorf("prefix %s: an IPv4-mapped prefix needs at least 96 bits", p)
			}
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func inPrefixes(ip netip.Addr, list []netip.Prefix) bool {
	for _, p := range list {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Check runs the chain. It returns a Grant, a *Rejection, or another error
// (a store failure, wrapped; the caller answers 500/503).
func (c *Chain) Check(ctx context.Context, r Request) (Grant, error) {
	return c.check(ctx, r, false)
}

// Preview runs the checks as Check would for a drip that brings a valid
// proof of work, without asking for one: Grant.ProofOfWork says what the
// drip must bring instead. It spends nothing; an API token it judges
// counts toward the lock-out as in Check, so it is no free oracle for
// guessing tokens.
func (c *Chain) Preview(ctx context.Context, r Request) (Grant, error) {
	return c.check(ctx, r, true)
}

func (c *Chain) check(ctx context.Context, r Request, preview bool) (Grant, error) {
	ip := r.ClientIP.Unmap()
	if ip.IsValid() && inPrefixes(ip, c.deny) {
		return c.reject(CheckDenyList, http.StatusForbidden, "ip_denied",
			"Requests from this client address are not accepted by this faucet.")
	}

	var g Grant
	// Only a Bearer credential is ours to judge, and only when tokens are
	// configured: an ingress doing basic auth forwards its own header.
	if c.tokensFile != "" && isBearer(r.Authorization) {
		q, ok := c.lookupAuthorization(r.Authorization)
		// An unknown client address cannot be locked out: it would lock
		// out every other unknown one with it.
		if ip.IsValid() {
			wait, err := c.lockout.judge(ctx, c.clock.Now(), ip, ok)
			if err != nil {
				return Grant{}, fmt.Errorf("guard: %w", err)
			}
			if wait > 0 {
				return c.rejectWith(lockedOut(wait))
			}
		}
		if !ok {
			return c.reject(CheckAPIToken, http.StatusUnauthorized, "token_invalid",
				"The API token is not valid: send \"Authorization: Bearer <token>\" with a token issued for this faucet, or no Authorization header.")
		}
		// A right token outside its window is no guess: the lock-out
		// counted it as right, and the answer says when it works.
		if now := c.clock.Now(); !q.activeAt(now) {
			return c.reject(CheckAPIToken, http.StatusForbidden, ReasonTokenNotActive, tokenWindowText(q, now))
		}
		g = Grant{Token: q, SkipIPLimit: true, Bypassed: bypassToken}
	} else if wait := c.lockedOut(ip); wait > 0 {
		// A locked-out guesser gets nothing else either.
		return c.rejectWith(lockedOut(wait))
	} else if ip.IsValid() && inPrefixes(ip, c.allow) {
		g = Grant{SkipIPLimit: true, Bypassed: bypassIPAllow}
	} else if r.SignedIn {
		g = Grant{Bypassed: bypassSignIn}
	}
	anonymous := g.Bypassed == ""

	var solved *verifiedChallenge
	if anonymous && c.Required() && preview {
		g.ProofOfWork = c.Difficulty()
	} else if anonymous && c.Required() {
		v, rej := c.verifyPoW(r.Challenge, r.Solution)
		if rej != nil {
			return c.rejectWith(rej)
		}
		solved = &v
	}

	// Spent before the balance read, so one solved challenge cannot be
	// replayed to make the node read account after account.
	if solved != nil {
		fresh, err := c.spent.SpendChallenge(ctx, solved.id, solved.expires)
		if err != nil {
			return Grant{}, fmt.Errorf("guard: record spent challenge: %w", err)
		}
		if !fresh {
			return c.reject(CheckProofOfWork, http.StatusForbidden, "challenge_replayed",
				"This challenge was already used: fetch a new one from POST /faucet/v1/challenge for each drip.")
		}
	}
	// The cap is on STX held: a rich STX account may still need a token.
	if r.Asset == "" || r.Asset == "stx" {
		if rej := c.checkBalance(ctx, r.Recipient); rej != nil {
			return c.rejectWith(rej)
		}
	}
	return g, nil
}

// Dispensed tells the chain that a drip it let through was sent. Only
// anonymous drips that were really paid drive the adaptive difficulty:
// drips the engine refused (rate limits) must not make honest users pay.
func (c *Chain) Dispensed(g Grant) {
	if g.Bypassed == "" && c.rate != nil {
		c.rate.add(c.clock.Now())
	}
}

// lockedOut returns how long ip stays locked out after failed API-token
// attempts, as this process has seen them; 0 when it is not.
func (c *Chain) lockedOut(ip netip.Addr) time.Duration {
	if !ip.IsValid() {
		return 0
	}
	return c.lockout.seenLocked(ip, c.clock.Now())
}

// isBearer reports whether an Authorization header uses the Bearer scheme.
func isBearer(h string) bool {
	scheme, _, _ := strings.Cut(strings.TrimSpace(h), " ")
	return strings.EqualFold(scheme, "Bearer")
}

func (c *Chain) reject(check string, status int, reason, msg string) (Grant, error) {
	return c.rejectWith(&Rejection{Check: check, Status: status, Reason: reason, Message: msg})
}

func (c *Chain) rejectWith(r *Rejection) (Grant, error) {
	if c.onReject != nil {
		c.onReject(r.Check)
	}
	return Grant{}, r
}

// Difficulty is the difficulty a challenge issued now gets (base or raised).
func (c *Chain) Difficulty() int {
	base := c.pow.Difficulty
	if c.rate == nil {
		return base
	}
	return raisedDifficulty(base, c.rate.count(c.clock.Now()), c.pow.RaiseAbove.Requests, c.pow.RaiseStep, c.pow.MaxDifficulty)
}

// Required reports whether anonymous drips must carry a solution now.
func (c *Chain) Required() bool { return c.Difficulty() > 0 }

// TokensConfigured reports whether API tokens are configured (a tokens
// file, even if it holds none now): a Bearer credential is then the
// chain's to judge.
func (c *Chain) TokensConfigured() bool { return c.tokensFile != "" }

// TokenCount reports how many API tokens are loaded.
func (c *Chain) TokenCount() int { return len(c.tokens.Load().entries) }

// Run re-reads the tokens file until ctx ends. A file that is gone or no
// longer parses revokes every token (fail closed: an edit that removes a
// leaked token must never leave it valid because of a typo elsewhere), and
// the error is logged. Without a tokens file it just waits for ctx.
func (c *Chain) Run(ctx context.Context) {
	if c.tokensFile == "" {
		<-ctx.Done()
		return
	}
	t := c.clock.NewTicker(c.tokensReload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.reloadTokens()
		}
	}
}

// reloadTokens re-reads the tokens file and swaps the set in when its
// content changed and parses. Errors are logged once per distinct error.
func (c *Chain) reloadTokens() {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	data, err := readTokensFile(c.tokensFile)
	if err != nil {
		c.tokensSum = [32]byte{}
		c.revokeAll(err)
		return
	}
	sum := contentSum(data)
	if sum == c.tokensSum {
		c.lastLoadErr = ""
		return
	}
	// Remembered even when the content is bad, so it is reported once
	// rather than at every tick.
	c.tokensSum = sum
	set, err := parseTokens(c.tokensFile, data)
	if err != nil {
		c.revokeAll(err)
		return
	}
	c.lastLoadErr = ""
	old := c.tokens.Swap(set)
	c.log.Info("guard: API tokens reloaded", "file", c.tokensFile, "tokens", len(set.entries), "previous", len(old.entries))
}

// revokeAll empties the token set after a failed reload; the error is
// logged once per distinct error.
func (c *Chain) revokeAll(err error) {
	old := c.tokens.Swap(&tokenSet{})
	if msg := err.Error(); msg != c.lastLoadErr {
		c.lastLoadErr = msg
		c.log.Error("guard: tokens file reload failed; every API token is refused until it is fixed", "err", err, "revoked", len(old.entries))
	}
}
