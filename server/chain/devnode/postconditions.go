package devnode

import (
	"fmt"
	"maps"
	"slices"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// stxAssetID is how stacks-core prints AssetIdentifier::STX() in a
// post-condition failure: the null principal's "STX" contract and asset.
var stxAssetID = stacks.Address{}.String() + ".STX::STX"

// assetMap is the part of stacks-core's AssetMap the devnode can produce:
// the fungible amounts (µSTX, or tokens) each principal sent, keyed by
// principal and then by asset identifier (stxAssetID for STX). Mints are not
// outflows and never appear, as in the real asset map.
type assetMap map[string]map[string]uint64

// add records that principal sent amount of asset.
func (m assetMap) add(principal, asset string, amount uint64) {
	if m[principal] == nil {
		m[principal] = make(map[string]uint64)
	}
	m[principal][asset] += amount
}

// postConditionFailure is check_transaction_postconditions for STX and
// fungible-token conditions over what the call moved: every condition must
// hold for the amount its principal sent of its asset (nothing sent counts
// as 0), and in Deny mode every asset any principal sent must be named by a
// condition on that principal. It returns stacks-core's reason, or "" when
// the conditions pass. origin is the tx sender, whom type-0x01 conditions
// name.
func postConditionFailure(tx *stacks.Transaction, origin string, moved assetMap) string {
	checked := make(map[string]map[string]bool)
	for _, pc := range tx.PostConditions {
		principal := origin
		if !pc.Origin {
			principal = pc.Principal.String()
		}
		asset := stxAssetID
		if pc.IsFungible() {
			asset = pc.Asset.String()
		}
		sent := moved[principal][asset]
		if !conditionHolds(pc.Code, pc.Amount, sent) {
			if pc.IsFungible() {
				return fmt.Sprintf("Post-condition check failure on fungible asset %s owned by %s: %d %s %d", asset, principal, pc.Amount, conditionName(pc.Code), sent)
			}
			return fmt.Sprintf("Post-condition check failure on STX owned by %s: %d %s %d", principal, pc.Amount, conditionName(pc.Code), sent)
		}
		if checked[principal] == nil {
			checked[principal] = make(map[string]bool)
		}
		checked[principal][asset] = true
	}
	if tx.PostConditionMode != stacks.PostConditionModeDeny {
		return ""
	}
	// The node walks a hash map; sorting only makes the reported pair
	// deterministic when several are uncovered.
	for _, principal := range slices.Sorted(maps.Keys(moved)) {
		for _, asset := range slices.Sorted(maps.Keys(moved[principal])) {
			if moved[principal][asset] > 0 && !checked[principal][asset] {
				return fmt.Sprintf("Post-condition check failure: Fungible asset %s was moved by %s but not checked", asset, principal)
			}
		}
	}
	return ""
}

// conditionHolds is FungibleConditionCode::check(amount, sent).
func conditionHolds(code stacks.ConditionCode, amount, sent uint64) bool {
	switch code {
	case stacks.ConditionEq:
		return sent == amount
	case stacks.ConditionGt:
		return sent > amount
	case stacks.ConditionGtEq:
		return sent >= amount
	case stacks.ConditionLt:
		return sent < amount
	case stacks.ConditionLtEq:
		return sent <= amount
	}
	return false
}

// conditionName is FungibleConditionCode's Debug form.
func conditionName(code stacks.ConditionCode) string {
	switch code {
	case stacks.ConditionEq:
		return "SentEq"
	case stacks.ConditionGt:
		return "SentGt"
	case stacks.ConditionGtEq:
		return "SentGe"
	case stacks.ConditionLt:
		return "SentLt"
	case stacks.ConditionLtEq:
		return "SentLe"
	}
	return fmt.Sprintf("0x%02x", byte(code))
}
