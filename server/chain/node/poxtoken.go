package node

import (
	"errors"
	"fmt"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// ErrPoXTokenNotTestnet: the contract the node names in /v2/pox is
// malformed or on mainnet; the faucet is testnet only, and a node that
// names a mainnet contract is no testnet node, so no default stands in.
var ErrPoXTokenNotTestnet = errors.New("the node's pox_5_sbtc_contract is no testnet contract")

// errNoPoXInfo: Token was asked without a /v2/pox answer to read.
var errNoPoXInfo = errors.New("no /v2/pox answer to read the token contract from")

// Token is the token name in the contract of the token configured without
// one, by the one rule the faucet's engine and the operator's funding
// monitor share: on testnet, the contract the node names in
// /v2/pox (pox_5_sbtc_contract, Epoch 4.0), else, from a node that names
// none (before Epoch 4.0), settings.SBTCTestnet's contract, today's testnet
// one. source says which: settings.SourcePoX or settings.SourceDefault.
func (p *PoXInfo) Token(name string) (asset stacks.AssetInfo, source string, err error) {
	if p == nil {
		return stacks.AssetInfo{}, "", errNoPoXInfo
	}
	if p.Pox5SBTCContract == "" {
		def, err := stacks.ParseAssetID(settings.SBTCTestnet)
		if err != nil {
			return stacks.AssetInfo{}, "", fmt.Errorf("the default token %q: %w", settings.SBTCTestnet, err)
		}
		return stacks.AssetInfo{Contract: def.Contract, Name: name}, settings.SourceDefault, nil
	}
	id, err := stacks.ParseContractID(p.Pox5SBTCContract)
	if err == nil && id.Address.IsMainnet() {
		err = fmt.Errorf("%s is a mainnet contract", id)
	}
	if err != nil {
		return stacks.AssetInfo{}, "", fmt.Errorf("%w: %q: %w", ErrPoXTokenNotTestnet, p.Pox5SBTCContract, err)
	}
	return stacks.AssetInfo{Contract: id, Name: name}, settings.SourcePoX, nil
}
