package options

import (
	"fmt"
	"slices"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// Limits are STX's rate limits and how the client's address is found.
type Limits struct {
	Address, Stacking, IP guard.Limit
	// TrustedProxyHops is how many X-Forwarded-For hops trusted proxies
	// append.
	TrustedProxyHops int
}

func defaultLimits() Limits {
	d := guard.DefaultLimits()
	return Limits{Address: d.PerAddress, Stacking: d.StackingPerAddress, IP: d.PerIP}
}

// BindFlags binds --limit-address, --limit-stacking, --limit-ip and
// --trusted-proxy-hops.
func (o *Limits) BindFlags(fs *Flags) {
	fs.Var(limitValue{&o.Address}, "limit-address", "default drips per address, N/window (0 disables)")
	fs.Var(limitValue{&o.Stacking}, "limit-stacking", "stacking drips per address, N/window (0 disables)")
	fs.Var(limitValue{&o.IP}, "limit-ip", "STX drips per client IP (IPv6 by /64), N/window (0 disables)")
	fs.Int(&o.TrustedProxyHops, "trusted-proxy-hops", "X-Forwarded-For hops appended by trusted proxies (0 = use the peer address)")
}

// Abuse are the checks that keep scripts from draining a public faucet
// (package guard), and the switch that suspends every drip.
type Abuse struct {
	PoWDifficulty    int
	PoWRaiseAbove    guard.Limit
	PoWMaxDifficulty int
	PoWTTL           time.Duration
	TokensFile       string
	IPAllow, IPDeny  PrefixList
	BalanceCap       uint64
	Suspend          bool
	// SuspendAssets are suspended alone: stx, a token's name, btc.
	SuspendAssets NameList
	// DisableAssets are turned off: stx, sbtc or another token's name, btc.
	DisableAssets NameList
	// SwitchesFile, when set, holds the three switches above as JSON and
	// is followed while the faucet runs (the operator's ConfigMap).
	SwitchesFile string
}

func defaultAbuse() Abuse {
	return Abuse{PoWDifficulty: guard.DefaultDifficulty, PoWMaxDifficulty: guard.DefaultMaxDifficulty, PoWTTL: guard.DefaultChallengeTTL}
}

// BindFlags binds the proof-of-work, API token, IP list, balance cap and
// suspension flags.
func (o *Abuse) BindFlags(fs *Flags) {
	fs.Int(&o.PoWDifficulty, "pow-difficulty", "proof of work asked of anonymous drips, in leading zero bits of SHA-256 (0 = off; 18 costs a browser about a second); API tokens and --ip-allow skip it")
	fs.Var(limitValue{&o.PoWRaiseAbove}, "pow-raise-above", "raise the proof of work while more than N anonymous drips pass per window, N/window (0 = never)")
	fs.Int(&o.PoWMaxDifficulty, "pow-max-difficulty", "ceiling of the raised proof of work, in bits")
	fs.Duration(&o.PoWTTL, "pow-ttl", "how long a proof-of-work challenge stays valid")
	fs.String(&o.TokensFile, "api-tokens-file", "file of API tokens for CI and teams, one per line: NAME TOKEN|sha256:HEX QUOTA [PER_ADDRESS]; re-read when it changes")
	fs.Var(&o.IPAllow, "ip-allow", "comma-separated IPs/CIDRs that skip the proof of work and the per-IP limit")
	fs.Var(&o.IPDeny, "ip-deny", "comma-separated IPs/CIDRs whose drips are refused")
	fs.Uint64(&o.BalanceCap, "balance-cap", "refuse drips to an address already holding at least this many µSTX (0 = off)")
	fs.Bool(&o.Suspend, "suspend", "answer drips with 403 while still serving status")
	fs.Var(&o.SuspendAssets, "suspend-asset", "comma-separated assets (stx, a token's name, btc) whose drips are answered with 403 while the others serve; repeatable")
	fs.Var(&o.DisableAssets, "disable-asset", "comma-separated assets (stx, sbtc or another token's name, btc) the faucet does not offer: their routes answer 403 \"… faucet is not available\", as the incumbent's do when TESTNET_<ASSET>_FAUCET_ENABLED is false; repeatable")
	fs.String(&o.SwitchesFile, "switches-file", `JSON file of the switches {"suspend":bool,"suspendedAssets":[…],"disabledAssets":[…]}, read at start and followed while the faucet runs (it replaces --suspend, --suspend-asset and --disable-asset); the operator projects it from a ConfigMap, so switching an asset needs no restart`)
}

// Switches are the switches the flags set, for server.Config.
func (o *Abuse) Switches() switches.State {
	return switches.State{Suspend: o.Suspend, SuspendedAssets: slices.Clone(o.SuspendAssets), DisabledAssets: slices.Clone(o.DisableAssets)}
}

// GuardConfig is the abuse checks' configuration, their proof-of-work
// secret and the rest of their wiring given.
func (o *Abuse) GuardConfig(secret []byte) guard.Config {
	return guard.Config{
		Allow: o.IPAllow, Deny: o.IPDeny, TokensFile: o.TokensFile, BalanceCap: o.BalanceCap,
		PoW: guard.PoWConfig{Difficulty: o.PoWDifficulty, TTL: o.PoWTTL, RaiseAbove: o.PoWRaiseAbove,
			MaxDifficulty: o.PoWMaxDifficulty, Secret: secret},
	}
}

// validLimit is Limit's rule for a limit flag set by other means than
// its parser (the operator).
func validLimit(name string, l guard.Limit) error {
	if l.Requests > 0 && l.Window <= 0 {
		return fmt.Errorf("%s: the window must be a positive duration", name)
	}
	return nil
}
