package devnode

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// stxLedger moves STX for a contract call (the ledger); callers hold the
// state lock.
type stxLedger interface {
	credit(principal string, ustx uint64)
}

// contracts are the deployed contracts: send-many-memo, if any, and the
// SIP-010 tokens with their state. They check calls at admission, execute
// them when mined and answer read-only calls.
type contracts struct {
	mu       *sync.Mutex // the node's state lock
	log      *slog.Logger
	stx      stxLedger
	sendMany *stacks.ContractID                   // the deployed send-many-memo, if any
	tokens   map[stacks.ContractID]*tokenContract // the deployed token contracts
}

// newContracts deploys cfg's contracts at genesis; New panics on its error.
func newContracts(mu *sync.Mutex, log *slog.Logger, stx stxLedger, cfg *Config) (*contracts, error) {
	c := &contracts{mu: mu, log: log, stx: stx, tokens: make(map[stacks.ContractID]*tokenContract)}
	if cfg.SendManyContract != "" {
		id, err := stacks.ParseContractID(cfg.SendManyContract)
		if err != nil {
			return nil, fmt.Errorf("Config.SendManyContract: %w", err)
		}
		c.sendMany = &id
	}
	specs := cfg.Tokens
	legacy, ok, err := legacyTokenSpec(cfg)
	if err != nil {
		return nil, err
	}
	if ok {
		specs = append(slices.Clip(specs), legacy)
	}
	if err := c.deployTokens(specs, ok); err != nil {
		return nil, err
	}
	return c, nil
}

// deployTokens deploys specs at genesis: one contract each, none at the
// send-many contract's id. When legacy, the last spec is Config.TokenAsset's.
func (c *contracts) deployTokens(specs []TokenSpec, legacy bool) error {
	for i, s := range specs {
		field := fmt.Sprintf("Config.Tokens[%d]", i)
		if legacy && i == len(specs)-1 {
			field = "Config.TokenAsset"
		}
		if err := s.validate(); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		id := s.Asset.Contract
		if c.tokens[id] != nil {
			return fmt.Errorf("%s: a second token at contract %s", field, id)
		}
		if c.sendMany != nil && *c.sendMany == id {
			return fmt.Errorf("%s and Config.SendManyContract name the same contract %s", field, id)
		}
		t := &tokenContract{spec: s, deployer: id.Address.String(), balances: make(map[string]uint64)}
		t.spec.Genesis = nil
		for addr, amount := range s.Genesis {
			t.mint(addr.String(), amount)
		}
		c.tokens[id] = t
	}
	return nil
}

// tokenOf returns the deployed token defining asset, or nil. Callers hold
// the state lock.
func (c *contracts) tokenOf(asset stacks.AssetInfo) *tokenContract {
	if t := c.tokens[asset.Contract]; t != nil && t.spec.Asset == asset {
		return t
	}
	return nil
}

// onlyToken is the one deployed token for the single-token shorthands, nil
// when there is none; it panics when there are several. Callers hold the
// state lock.
func (c *contracts) onlyToken(caller string) *tokenContract {
	if len(c.tokens) > 1 {
		panic("devnode: " + caller + " with several tokens deployed: name one (AssetBalance, FundAsset)")
	}
	for _, t := range c.tokens {
		return t
	}
	return nil
}

// AssetBalance is p's confirmed balance of the token asset (0 when no such
// token is deployed).
func (c *contracts) AssetBalance(asset stacks.AssetInfo, p stacks.Principal) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokenOf(asset).balance(p)
}

// FundAsset mints amount of the token asset to addr immediately, outside
// any block, like Fund for STX. It panics when no such token is deployed, a
// mistake in the caller's setup.
func (c *contracts) FundAsset(asset stacks.AssetInfo, addr stacks.Address, amount uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tokenOf(asset)
	if t == nil {
		panic("devnode: FundAsset of " + asset.String() + ", which is not deployed")
	}
	t.mint(addr.String(), amount)
}

// TokenBalance is AssetBalance for a node with at most one token: p's
// confirmed balance of it, 0 when none is deployed. It panics when several
// are.
func (c *contracts) TokenBalance(p stacks.Principal) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.onlyToken("TokenBalance").balance(p)
}

// FundToken is FundAsset for a node with exactly one token. It panics when
// none or several are deployed.
func (c *contracts) FundToken(addr stacks.Address, amount uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.onlyToken("FundToken")
	if t == nil {
		panic("devnode: FundToken without a token deployed (Config.Tokens or Config.TokenAsset)")
	}
	t.mint(addr.String(), amount)
}

// checkContractCall is can_include_tx's payload check for a contract call:
// the contract must exist, the function must be public, the arguments must
// type-check. It returns the transfers a send-many call will attempt, or
// the checked call of a token contract. Callers hold the state lock.
func (c *contracts) checkContractCall(cc *stacks.ContractCall, mainnet bool) ([]transfer, *tokenCall, string, map[string]any) {
	if !validAddressVersion(mainnet, cc.Contract.Address.Version) {
		return nil, nil, node.ReasonBadAddressVersionByte, nil
	}
	if t := c.tokens[cc.Contract]; t != nil {
		tc, reason, data := checkTokenCall(t, cc)
		return nil, tc, reason, data
	}
	if c.sendMany == nil || cc.Contract != *c.sendMany {
		return nil, nil, node.ReasonNoSuchContract, nil
	}
	ts, reason, data := checkSendManyCall(cc)
	return ts, nil, reason, data
}

// callOutcome is what executing an admitted contract call produced.
type callOutcome struct {
	result  string // the receipt's result, as /v3/transaction reports it
	aborted bool   // rolled back: an (err …) result or a failed post-condition
	// pcFailure is stacks-core's reason when the post-conditions aborted the
	// call (the receipt's vm_error), else "".
	pcFailure string
	events    []TxEvent // the receipt's events; none once rolled back
}

// settle is the end of a call's execution: the result, (ok true) or the
// call's (err u<errCode>), which moves nothing; then the post-conditions
// checked against what the call moved (nothing, after an err). A failure
// rolls back too but keeps the would-have-been result. The caller applies
// the call's effects unless the outcome is aborted. Callers hold the state
// lock.
func (c *contracts) settle(e *poolEntry, errCode int, moved assetMap, events []TxEvent) callOutcome {
	out := callOutcome{result: resultTransferOK, events: events}
	if errCode != 0 {
		out = callOutcome{result: fmt.Sprintf("(err u%d)", errCode), aborted: true}
		moved = assetMap{}
	}
	if reason := postConditionFailure(e.tx, e.sender, moved); reason != "" {
		c.log.Info("devnode: contract call aborted by post-condition", "txid", e.txid.Hex0x(), "reason", reason)
		out.aborted, out.pcFailure, out.events = true, reason, nil
	}
	return out
}
