package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// This file holds the pure part of the funding of spec.assets: from what
// the FundingMonitor read to status.funding.assets and each asset's part
// of the Funded condition. Every asset is an entry of a list, judged
// against its own threshold; none is named here.

// maxAssetMessage caps an asset's status message: up to 32 entries share
// the status.
const maxAssetMessage = 1024

// assetOutcome is one asset's funding level and its part of the Funded
// message; unknown, when set, is the Funded reason of an asset whose
// latest read failed.
type assetOutcome struct {
	level   settings.FundingLevel
	unknown string
	message string
}

// severity orders outcomes for the Funded reason: the worst asset decides.
// An asset known to be empty or low is worse news than one that cannot be
// read, so an unreadable token does not hide an empty STX.
func (o assetOutcome) severity() int {
	switch {
	case o.level == settings.FundsEmpty:
		return 3
	case o.level == settings.FundsLow:
		return 2
	case o.unknown != "":
		return 1
	}
	return 0
}

// tokenDripCost is what one drip of a token costs a key in its base units:
// the amount. The fee is paid in STX, from the balance dripCost budgets.
func tokenDripCost(t *faucetv1alpha1.TokenSpec) uint64 {
	return settings.DripCost(uint64(max(t.Amount, 1)), 0)
}

// assetFundingsOf is status.funding.assets: every asset of spec.assets, in
// its order, with the figures of its last successful read, if any, and
// why the latest read failed, if it did.
func assetFundingsOf(fs *faucetv1alpha1.FaucetServer, res fundingResult) []faucetv1alpha1.AssetFunding {
	var out []faucetv1alpha1.AssetFunding
	tokens := 0
	for _, a := range fs.Spec.Assets {
		switch {
		case a.Token != nil && tokens < len(res.target.tokens):
			var r tokenResult
			if tokens < len(res.tokens) {
				r = res.tokens[tokens]
			}
			out = append(out, tokenFundingOf(a, res.target, r))
			tokens++
		case a.BTC != nil && res.target.btc.address != "":
			out = append(out, btcFundingOf(a, res))
		}
	}
	return out
}

// tokenFundingOf is a token's entry of status.funding.assets.
func tokenFundingOf(a faucetv1alpha1.AssetSpec, t fundingTarget, r tokenResult) faucetv1alpha1.AssetFunding {
	f := faucetv1alpha1.AssetFunding{Name: a.Name, AssetIdentifier: a.Token.AssetIdentifier}
	if r.err != nil {
		f.Message = truncate(r.err.Error(), maxAssetMessage)
	}
	if !r.ok {
		return f
	}
	cost := tokenDripCost(a.Token)
	f.AssetIdentifier = r.asset.String()
	var total, drips uint64
	for i, addr := range t.addresses {
		bal := r.balances[i]
		d := bal / cost
		f.Keys = append(f.Keys, faucetv1alpha1.KeyTokenFunding{Address: addr, Balance: clampInt64(bal), DripsLeft: clampInt64(d)})
		total += bal
		drips += d
	}
	f.Balance, f.DripsLeft = ptr.To(clampInt64(total)), ptr.To(clampInt64(drips))
	if t.treasury != "" {
		f.TreasuryBalance = ptr.To(clampInt64(r.treasury))
	}
	f.LastChecked = ptr.To(metav1.NewTime(r.checked.Truncate(time.Second)))
	return f
}

// btcFundingOf is BTC's entry of status.funding.assets: its address is
// known from the key before the first read, so the faucet's operator knows
// where to send coins even while the Bitcoin node cannot be read.
func btcFundingOf(a faucetv1alpha1.AssetSpec, res fundingResult) faucetv1alpha1.AssetFunding {
	b := res.target.btc
	f := faucetv1alpha1.AssetFunding{Name: a.Name, Network: b.network, Address: b.address}
	if res.btcErr != nil {
		f.Message = truncate(res.btcErr.Error(), maxAssetMessage)
	}
	if res.btcOK {
		f.Balance = ptr.To(clampInt64(res.btc))
		f.DripsLeft = ptr.To(clampInt64(res.btc / btcDripCost(a.BTC)))
		f.LastChecked = ptr.To(metav1.NewTime(res.btcChecked.Truncate(time.Second)))
	}
	return f
}

// assetsSummary is status.funding.assetsSummary, the ASSETS column: each
// asset's drips left, "?" while unknown.
func assetsSummary(assets []faucetv1alpha1.AssetFunding) string {
	parts := make([]string, len(assets))
	for i, a := range assets {
		n := "?"
		if a.DripsLeft != nil {
			n = strconv.FormatInt(*a.DripsLeft, 10)
		}
		parts[i] = a.Name + ":" + n
	}
	return strings.Join(parts, " ")
}

// assetOutcomes judge each asset of st.Assets, in order, against its own
// low threshold; res says why an asset's latest read failed.
func assetOutcomes(fs *faucetv1alpha1.FaucetServer, res fundingResult, st *faucetv1alpha1.FundingStatus) []assetOutcome {
	var out []assetOutcome
	for _, f := range st.Assets {
		a := assetSpec(fs, f.Name)
		if a == nil {
			continue
		}
		if a.BTC != nil {
			out = append(out, btcOutcome(fs, *a, f, res))
			continue
		}
		var err error
		if i := tokenIndex(res.target, f.Name); i >= 0 && i < len(res.tokens) {
			err = res.tokens[i].err
		}
		out = append(out, tokenOutcome(fs, *a, f, err, res))
	}
	return out
}

// assetSpec is the entry of spec.assets named name; nil if none is.
func assetSpec(fs *faucetv1alpha1.FaucetServer, name string) *faucetv1alpha1.AssetSpec {
	for i := range fs.Spec.Assets {
		if fs.Spec.Assets[i].Name == name {
			return &fs.Spec.Assets[i]
		}
	}
	return nil
}

// tokenIndex is the index of the token named name in t.tokens; -1 if none.
func tokenIndex(t fundingTarget, name string) int {
	for i, tok := range t.tokens {
		if tok.name == name {
			return i
		}
	}
	return -1
}

// tokenOutcome judges a token: unknown while its latest read failed (err),
// else its drips left against its threshold.
func tokenOutcome(fs *faucetv1alpha1.FaucetServer, a faucetv1alpha1.AssetSpec, f faucetv1alpha1.AssetFunding, err error, res fundingResult) assetOutcome {
	if err != nil || f.DripsLeft == nil {
		o := assetOutcome{unknown: faucetv1alpha1.ReasonNodeUnreachable}
		if tokenRefused(err) {
			o.unknown = faucetv1alpha1.ReasonAssetUnreadable
		}
		o.message = fmt.Sprintf("%s: not read yet", a.Name)
		if err != nil {
			o.message = fmt.Sprintf("%s: cannot read its balances from the node %s: %v", a.Name, redactURLs(res.target.nodeURLs), err)
		}
		return o
	}
	low := fs.AssetLowThreshold(a)
	o := assetOutcome{level: settings.LevelOf(uint64(max(*f.DripsLeft, 0)), uint64(max(low, 0)))}
	held := fmt.Sprintf("%d on %d key(s), %d per drip", ptr.Deref(f.Balance, 0), len(f.Keys), tokenDripCost(a.Token))
	switch o.level {
	case settings.FundsEmpty:
		o.message = fmt.Sprintf("%s: 0 drips left (%s): no key can pay one drip; send %s (%s) to %s",
			a.Name, held, a.Name, f.AssetIdentifier, strings.Join(res.target.addresses, ", "))
	case settings.FundsLow:
		o.message = fmt.Sprintf("%s: %d drips left, below %d (%s)", a.Name, *f.DripsLeft, low, held)
	default:
		o.message = fmt.Sprintf("%s: %d drips left (%s)", a.Name, *f.DripsLeft, held)
	}
	return o
}

// btcOutcome judges BTC: unknown while its latest read failed, else its
// default drips left against the faucet's threshold.
func btcOutcome(fs *faucetv1alpha1.FaucetServer, a faucetv1alpha1.AssetSpec, f faucetv1alpha1.AssetFunding, res fundingResult) assetOutcome {
	if res.btcErr != nil || f.DripsLeft == nil {
		// A Bitcoin node that answers but cannot look the address up
		// (btcd without --addrindex, a refused call) is up: its setup is
		// what needs a look. Core warming up is only unavailable.
		o := assetOutcome{unknown: faucetv1alpha1.ReasonNodeUnreachable}
		var rpcErr *btcnode.RPCError
		if err := res.btcErr; err != nil && !btcnode.IsUnavailable(err) &&
			(errors.Is(err, btcnode.ErrNoAddressIndex) || errors.As(err, &rpcErr)) {
			o.unknown = faucetv1alpha1.ReasonAssetUnreadable
		}
		o.message = fmt.Sprintf("%s: not read yet", a.Name)
		if res.btcErr != nil {
			o.message = fmt.Sprintf("%s: cannot read the BTC balance from the Bitcoin node %s: %v", a.Name, redactURLs(res.target.btc.rpcURLs), res.btcErr)
		}
		return o
	}
	low := fs.AssetLowThreshold(a)
	o := assetOutcome{level: settings.LevelOf(uint64(max(*f.DripsLeft, 0)), uint64(max(low, 0)))}
	held := fmt.Sprintf("%d sats at %s on %s, %d sats per drip", ptr.Deref(f.Balance, 0), f.Address, f.Network, btcDripCost(a.BTC))
	switch o.level {
	case settings.FundsEmpty:
		o.message = fmt.Sprintf("%s: 0 drips left (%s): send test BTC to %s", a.Name, held, f.Address)
	case settings.FundsLow:
		o.message = fmt.Sprintf("%s: %d drips left, below %d (%s)", a.Name, *f.DripsLeft, low, held)
	default:
		o.message = fmt.Sprintf("%s: %d drips left (%s)", a.Name, *f.DripsLeft, held)
	}
	return o
}

// fundingMatches reports whether a status.funding describes exactly these
// addresses (and treasury), so it may be kept while no fresh read exists:
// its keys are these, and each asset it reports is still in the spec, a
// token with the identifier the spec gives it (any, for one read from
// /v2/pox), BTC at the address of btc. An asset not reported yet is no
// mismatch: its first read adds it.
func fundingMatches(st *faucetv1alpha1.FundingStatus, addresses []string, treasury string, tokens []tokenTarget, btc string) bool {
	if st == nil || len(st.Keys) != len(addresses) {
		return false
	}
	for i, k := range st.Keys {
		if k.Address != addresses[i] {
			return false
		}
	}
	for _, a := range st.Assets {
		i := slices.IndexFunc(tokens, func(t tokenTarget) bool { return t.name == a.Name })
		switch {
		case a.Address != "": // BTC's
			if a.Address != btc {
				return false
			}
		case i < 0:
			return false
		case !tokens[i].fromPoX && a.AssetIdentifier != "" && a.AssetIdentifier != tokens[i].asset.String():
			return false
		}
	}
	if st.Treasury == nil {
		return treasury == ""
	}
	return st.Treasury.Address == treasury
}
