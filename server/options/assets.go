package options

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// Token is a SIP-010 token the faucet drips beside STX.
type Token struct {
	// Name is its path segment (/extended/v1/faucets/{name}) and label.
	Name string
	// Asset is ADDR.contract::token; "" (sbtc only) is the sBTC contract
	// the node names in /v2/pox (pox_5_sbtc_contract), else testnet sBTC's
	// (settings.SBTCTestnet), token sbtc-token.
	Asset  string
	Amount uint64 // base units per drip
	Limits guard.AssetLimits
	// RefillBelow and RefillAmount are in base units (0: the engine's
	// defaults); they need a treasury.
	RefillBelow, RefillAmount uint64
	// LowDrips is the threshold of "low" for this token (0: --low-drips).
	LowDrips int
}

// sbtcTokenName is the fungible token the sBTC contract defines.
const sbtcTokenName = "sbtc-token"

// AssetInfo is the token t drips: its identifier parsed; fromPoX is true
// for sBTC without one, whose contract is the one the node names in
// /v2/pox (pox_5_sbtc_contract), else testnet sBTC's (node.PoXInfo.Token's
// rule), token sbtc-token, looked up at each use.
// The faucet and the operator both read a token through this one rule.
func (t Token) AssetInfo() (asset stacks.AssetInfo, fromPoX bool, err error) {
	if t.Asset == "" {
		return stacks.AssetInfo{Name: sbtcTokenName}, true, nil
	}
	a, err := stacks.ParseAssetID(t.Asset)
	if err != nil {
		return stacks.AssetInfo{}, false, err
	}
	return a, false, nil
}

// check says why t cannot be dripped, or nil: the engine's rules, told
// before one is built.
func (t Token) check() error {
	asset, fromPoX, err := t.AssetInfo()
	switch {
	case err != nil:
		return err
	case !settings.ValidAssetName(t.Name):
		return fmt.Errorf("token name %q: want 1 to 32 lower-case letters, digits or '-', starting with a letter", t.Name)
	case t.Name == settings.AssetSTX:
		return fmt.Errorf("token name %q is STX's", t.Name)
	case t.Amount == 0:
		return fmt.Errorf("token %s: the amount per drip must be positive", t.Name)
	case !fromPoX && asset.Contract.Address.IsMainnet():
		return fmt.Errorf("token %s: %s is a mainnet contract; the faucet is testnet only", t.Name, asset)
	}
	return nil
}

// String is t as --token takes it.
func (t Token) String() string {
	parts := []string{"name=" + t.Name}
	if t.Asset != "" {
		parts = append(parts, "asset="+t.Asset)
	}
	parts = append(parts, "amount="+strconv.FormatUint(t.Amount, 10),
		"limit-address="+limitValue{&t.Limits.PerAddress}.String(), "limit-ip="+limitValue{&t.Limits.PerIP}.String())
	for _, kv := range []struct {
		k string
		v uint64
	}{{"refill-below", t.RefillBelow}, {"refill-amount", t.RefillAmount}, {"low-drips", uint64(max(t.LowDrips, 0))}} {
		if kv.v != 0 {
			parts = append(parts, kv.k+"="+strconv.FormatUint(kv.v, 10))
		}
	}
	return strings.Join(parts, ",")
}

// ParseToken reads one --token value: comma-separated key=value pairs.
func ParseToken(s string) (Token, error) {
	t := Token{Limits: guard.DefaultAssetLimits()}
	seen, err := setPairs(s, "name, asset, amount, limit-address, limit-ip, refill-below, refill-amount, low-drips", "", t.set)
	if err != nil {
		return Token{}, err
	}
	if !seen["name"] || !seen["amount"] {
		return Token{}, errors.New("name and amount are required, e.g. name=tusd,asset=ADDR.contract::token,amount=1000000")
	}
	return t, nil
}

func (t *Token) set(k, v string) error {
	var err error
	switch k {
	case "name":
		t.Name = v
	case "asset":
		t.Asset = v
	case "amount":
		t.Amount, err = strconv.ParseUint(v, 10, 64)
	case "limit-address":
		t.Limits.PerAddress, err = ParseLimit(v)
	case "limit-ip":
		t.Limits.PerIP, err = ParseLimit(v)
	case "refill-below":
		t.RefillBelow, err = strconv.ParseUint(v, 10, 64)
	case "refill-amount":
		t.RefillAmount, err = strconv.ParseUint(v, 10, 64)
	case "low-drips":
		var n uint64
		n, err = strconv.ParseUint(v, 10, strconv.IntSize-1) // an int, 0 or more
		t.LowDrips = int(n)
	default:
		return errors.New("unknown key")
	}
	if err != nil && !strings.HasPrefix(k, "limit-") {
		return errors.New("want a whole number, 0 or more")
	}
	return err
}

// TokenList is the repeatable --token flag; one value may also hold
// several tokens separated by ';' (FAUCET_TOKEN).
type TokenList []Token

// ArgName is the placeholder -h shows after the flag's name.
func (*TokenList) ArgName() string { return "name=…,asset=…,amount=…" }

func (l *TokenList) String() string { return joinList(l, ";", Token.String) }

// Set adds the tokens of v.
func (l *TokenList) Set(v string) error { return addEach(l, v, ";", ParseToken) }

// SBTC is the sBTC shorthand: one token named sbtc.
type SBTC struct {
	// Asset is sBTC's identifier; "" is the contract the node names in
	// /v2/pox (pox_5_sbtc_contract).
	Asset  string
	Amount uint64 // satoshis per drip; 0 is off
	Limits guard.AssetLimits
	// RefillBelow and RefillAmount are satoshis; they need a treasury.
	RefillBelow, RefillAmount uint64
}

// Assets are what the faucet drips beside STX and BTC.
type Assets struct {
	Tokens TokenList
	SBTC   SBTC
}

func defaultAssets() Assets { return Assets{SBTC: SBTC{Limits: guard.DefaultAssetLimits()}} }

// BindFlags binds --token and the sBTC shorthand's flags.
func (o *Assets) BindFlags(fs *Flags) {
	fs.Var(&o.Tokens, "token", "drip a SIP-010 token beside STX, as comma-separated key=value pairs: name (its path /extended/v{1,3}/faucets/NAME), asset (ADDR.contract::token; sbtc may leave it out, to use the sBTC contract the node names in /v2/pox, else testnet sBTC), amount (base units per drip), and optionally limit-address and limit-ip (N/window, default 5/5m and 30/5m), refill-below and refill-amount (with a treasury), low-drips; repeat the flag for more tokens")
	fs.String(&o.SBTC.Asset, "sbtc-asset", "the sBTC shorthand for --token name=sbtc: sBTC's asset identifier, ADDR.contract::token (testnet sBTC: "+settings.SBTCTestnet+"); without it, the contract the node names in /v2/pox (pox_5_sbtc_contract, Epoch 4.0), else, from a node that names none, testnet sBTC; needs --sbtc-amount; with --devnet the devnet's own token")
	fs.Uint64(&o.SBTC.Amount, "sbtc-amount", "turn on the sBTC faucet: satoshis per drip (0 = sBTC off; with --devnet "+strconv.FormatUint(DevnetSBTCAmount, 10)+")")
	fs.Var(limitValue{&o.SBTC.Limits.PerAddress}, "sbtc-limit-address", "sBTC drips per address, N/window, a bucket apart from STX's (0 disables)")
	fs.Var(limitValue{&o.SBTC.Limits.PerIP}, "sbtc-limit-ip", "sBTC drips per client IP (IPv6 by /64), N/window (0 disables)")
	fs.Uint64(&o.SBTC.RefillBelow, "sbtc-refill-below", "with a treasury: refill a faucet key whose available sBTC falls below this many satoshis (0 = 20 sBTC drips' worth)")
	fs.Uint64(&o.SBTC.RefillAmount, "sbtc-refill-amount", "with a treasury: satoshis per sBTC refill (0 = 10 × --sbtc-refill-below)")
}

// sbtcToken is the shorthand as a token; ok is false when sBTC is off.
func (o *Assets) sbtcToken() (Token, bool) {
	s := o.SBTC
	if s.Amount == 0 {
		return Token{}, false
	}
	return Token{Name: "sbtc", Asset: s.Asset, Amount: s.Amount, Limits: s.Limits,
		RefillBelow: s.RefillBelow, RefillAmount: s.RefillAmount}, true
}

func (o *Assets) validate(devnet, hasTreasury bool) error {
	s := o.SBTC
	if s.Amount == 0 && !devnet {
		switch {
		case s.Asset != "":
			return errors.New("--sbtc-asset needs --sbtc-amount, the satoshis per drip")
		case s.RefillBelow != 0 || s.RefillAmount != 0:
			return errors.New("--sbtc-refill-below and --sbtc-refill-amount need the sBTC faucet on: --sbtc-amount")
		}
	}
	if !hasTreasury && (s.RefillBelow != 0 || s.RefillAmount != 0) {
		return errors.New("--sbtc-refill-below and --sbtc-refill-amount need a treasury: --treasury-key-file (or --devnet-treasury)")
	}
	for _, t := range o.Tokens {
		if !hasTreasury && (t.RefillBelow != 0 || t.RefillAmount != 0) {
			return fmt.Errorf("--token %s: refill-below and refill-amount need a treasury: --treasury-key-file (or --devnet-treasury)", t.Name)
		}
	}
	return nil
}

// checkTokens checks the tokens as the engine will, naming their flags.
func checkTokens(tokens []Token, hasTreasury bool) error {
	var names []string
	for _, t := range tokens {
		flagName := "--token " + t.Name
		if t.Name == "sbtc" {
			flagName = "--token sbtc (or --sbtc-asset/--sbtc-amount)"
		}
		if slices.Contains(names, t.Name) {
			return fmt.Errorf("%s: the name %s is given twice", flagName, t.Name)
		}
		names = append(names, t.Name)
		if t.Asset == "" && t.Name != "sbtc" {
			// Only sBTC can be found on the node; a token without an
			// identifier is more likely a slip than a second sBTC.
			return fmt.Errorf("%s: asset=ADDR.contract::token is required (only sbtc may leave it out, to use the contract the node names in /v2/pox)", flagName)
		}
		if err := t.check(); err != nil {
			return fmt.Errorf("%s: %w", flagName, err)
		}
		if hasTreasury {
			if below, amount, err := settings.Refill(t.RefillBelow, t.RefillAmount, t.Amount); err != nil {
				return fmt.Errorf("%s: token refill amount %d is below the token refill threshold %d; a refill must lift a key above it", flagName, amount, below)
			}
		}
		if err := validLimit(flagName+" limit-address", t.Limits.PerAddress); err != nil {
			return err
		}
		if err := validLimit(flagName+" limit-ip", t.Limits.PerIP); err != nil {
			return err
		}
	}
	return nil
}
