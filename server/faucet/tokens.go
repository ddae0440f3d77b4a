package faucet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// tokens are the configured SIP-010 tokens, as data: each one's
// identifier (found on the node when none is given), its metadata
// (decimals, symbol and name, read from the contract) and whether it can
// be dripped now. A token the node cannot name yet, or whose contract
// does not answer, does not stop the others: its drips answer "not
// available" with the reason until it can be used.
type tokens struct {
	list []*tokenState // in configuration order
	log  *slog.Logger
}

// tokenState is one token: its configuration and what was learnt of it.
type tokenState struct {
	cfg Token

	mu    sync.Mutex
	asset stacks.AssetInfo // resolved; zero until then
	// source says where a FromPoX token's contract came from
	// (node.PoXInfo.Token's); "" until it is resolved.
	source string
	err    error // why it cannot be dripped yet
	meta   *node.TokenMetadata
	// metaErr is why the last read of the metadata failed (nil once read).
	metaErr error
	// logged is the last resolution error logged, so an unchanged one is
	// logged once.
	logged string
}

func newTokens(cfg []Token, log *slog.Logger) (*tokens, error) {
	t := &tokens{log: log}
	seen := map[Asset]bool{}
	for _, c := range cfg {
		if err := c.validate(); err != nil {
			return nil, err
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("token %s is configured twice", c.Name)
		}
		seen[c.Name] = true
		st := &tokenState{cfg: c}
		if c.FromPoX {
			st.err = errNotResolved
		} else {
			st.asset = c.Asset
		}
		t.list = append(t.list, st)
	}
	return t, nil
}

// errNotResolved: the token's contract is to be found on the node, which
// has not been asked yet.
var errNotResolved = errors.New("its contract has not been read from the node yet")

// byName finds a configured token.
func (t *tokens) byName(name Asset) *tokenState {
	for _, s := range t.list {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

// usable lists the tokens whose contract is known.
func (t *tokens) usable() []*tokenState {
	out := make([]*tokenState, 0, len(t.list))
	for _, s := range t.list {
		if _, err := s.usable(); err == nil {
			out = append(out, s)
		}
	}
	return out
}

// usable returns the token's identifier, or a drip error saying why it
// cannot be dripped now.
func (s *tokenState) usable() (stacks.AssetInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return stacks.AssetInfo{}, failf(ReasonDisabled, s.err, "the %s faucet is not available: %v", s.cfg.Name, s.err)
	}
	return s.asset, nil
}

// tokenNode is what resolving the tokens reads from the node.
type tokenNode interface {
	PoX(ctx context.Context) (*node.PoXInfo, error)
	TokenMetadata(ctx context.Context, token stacks.ContractID) (node.TokenMetadata, error)
}

// resolve learns what it can of every token that still needs it: the
// contract of a token to be found on the node, and each token's metadata.
// It asks the node nothing once everything is known, so the poll loop
// calls it at every block.
func (t *tokens) resolve(ctx context.Context, n tokenNode) {
	var pox *node.PoXInfo
	var poxErr error
	for _, s := range t.list {
		s.mu.Lock()
		needPoX, needMeta := s.cfg.FromPoX && s.asset.IsZero(), s.meta == nil
		s.mu.Unlock()
		if needPoX {
			if pox == nil && poxErr == nil {
				pox, poxErr = n.PoX(ctx)
			}
			t.settle(s, pox, poxErr)
		}
		if asset, err := s.usable(); needMeta && err == nil {
			meta, err := n.TokenMetadata(ctx, asset.Contract)
			if ctx.Err() == nil {
				s.mu.Lock()
				s.metaErr = err
				s.mu.Unlock()
			}
			if err == nil {
				s.mu.Lock()
				s.meta = &meta
				s.mu.Unlock()
			} else if ctx.Err() == nil {
				t.log.Warn("reading a token's metadata failed; retried at the next block", "asset", string(s.cfg.Name),
					"contract", asset.Contract.String(), "err", err)
			}
		}
	}
}

// settle applies what /v2/pox said of a token to be found there.
func (t *tokens) settle(s *tokenState, pox *node.PoXInfo, poxErr error) {
	var err error
	var asset stacks.AssetInfo
	var source string
	if poxErr != nil {
		err = fmt.Errorf("the node's /v2/pox could not be read: %w", poxErr)
	} else {
		asset, source, err = pox.Token(s.cfg.Asset.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.asset, s.source, s.err = asset, source, nil
		t.log.Info("token contract settled", "asset", string(s.cfg.Name), "asset_identifier", asset.String(),
			"source", source)
		return
	}
	s.err = err
	if msg := err.Error(); msg != s.logged {
		s.logged = msg
		t.log.Warn("token not available; the others still drip", "asset", string(s.cfg.Name), "err", err)
	}
}

// TokenInfo is what the engine knows of a configured token.
type TokenInfo struct {
	Name Asset
	// Asset is the token's identifier; zero while it is to be found on the
	// node and not found yet.
	Asset stacks.AssetInfo
	// FromPoX: the contract is the one the node names in /v2/pox, else
	// the testnet default; Source says which once it is known.
	FromPoX bool
	Source  string
	Amount  uint64
	// Metadata is read from the contract; nil until it answered.
	// MetadataErr is why the last read failed (a contract the node does
	// not have, or an unreachable node).
	Metadata    *node.TokenMetadata
	MetadataErr error
	// Err says why the token cannot be dripped now; nil when it can.
	Err                       error
	RefillBelow, RefillAmount uint64
}

// info reports s.
func (s *tokenState) info() TokenInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := TokenInfo{Name: s.cfg.Name, Asset: s.asset, FromPoX: s.cfg.FromPoX, Source: s.source, Amount: s.cfg.Amount, Err: s.err,
		MetadataErr: s.metaErr, RefillBelow: s.cfg.RefillBelow, RefillAmount: s.cfg.RefillAmount}
	if s.meta != nil {
		m := *s.meta
		i.Metadata = &m
	}
	return i
}

// Tokens reports every configured token, in configuration order.
func (f *Faucet) Tokens() []TokenInfo {
	out := make([]TokenInfo, len(f.tokens.list))
	for i, s := range f.tokens.list {
		out[i] = s.info()
	}
	return out
}
