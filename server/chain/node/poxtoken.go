package node

import (
	"errors"
	"fmt"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// Why a token to be found in /v2/pox has no contract there. The faucet
// and the operator find it by this one rule (Token).
var (
	// ErrNoPoXToken: the node names no token contract (a node before
	// Epoch 4.0).
	ErrNoPoXToken = errors.New("the node names no sBTC contract in /v2/pox (pox_5_sbtc_contract: a node before Epoch 4.0)")
	// ErrPoXTokenNotTestnet: the contract it names is malformed or on
	// mainnet; the faucet is testnet only.
	ErrPoXTokenNotTestnet = errors.New("the node's pox_5_sbtc_contract is no testnet contract")
)

// Token is the token name in the contract PoX-5 uses, as the node names it
// in /v2/pox (Epoch 4.0's pox_5_sbtc_contract).
func (p *PoXInfo) Token(name string) (stacks.AssetInfo, error) {
	if p == nil || p.Pox5SBTCContract == "" {
		return stacks.AssetInfo{}, ErrNoPoXToken
	}
	id, err := stacks.ParseContractID(p.Pox5SBTCContract)
	if err == nil && id.Address.IsMainnet() {
		err = fmt.Errorf("%s is a mainnet contract", id)
	}
	if err != nil {
		return stacks.AssetInfo{}, fmt.Errorf("%w: %q: %w", ErrPoXTokenNotTestnet, p.Pox5SBTCContract, err)
	}
	return stacks.AssetInfo{Contract: id, Name: name}, nil
}
