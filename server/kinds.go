package server

import (
	"context"
	"log/slog"
	"net/http"
	"slices"

	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// Every asset the faucet drips is one kind of thing: an asset of a kind.
// A kind (Stacks STX, a SIP-010 token, Bitcoin) is an implementation of
// assetKind in a file of its own (kind_stx.go, kind_token.go, kind_btc.go)
// that registers itself; the routes, eligibility, MCP, info, the metrics
// and the page loop over the configured assets and never ask which kind
// one is.

// assetKind is what differs between kinds of asset: how a recipient is
// read, what a drip pays and how, and how its funds and drips are told.
type assetKind interface {
	// recipient reads an address, trimmed, the one way every door does.
	recipient(text string) (recipient, *refusal)
	// admits refuses the options the kind has no use for (stacking on
	// anything but STX, a size on anything but BTC).
	admits(a *asset, o dripOptions) *refusal
	// quote is the configured drip of o in base units, before tiers and
	// budgets.
	quote(ctx context.Context, o dripOptions) (uint64, error)
	// pay sends one drip; amount 0 is the configured one.
	pay(ctx context.Context, k ask, amount uint64) (*paid, error)
	// failure is the answer to pay's or quote's error, and how loudly to
	// log it.
	failure(a *asset, err error) (*dripFailure, slog.Level)
	// funds is what this replica can pay now, its share of the treasury
	// (the keys it holds among all) and whether it knows (false before it
	// read a balance).
	funds() (avail uint64, share float64, known bool)
	// describe fills the asset's entry of /faucet/v1/info: its name,
	// amounts, limits, state and funding; its budget and switches are the
	// caller's.
	describe(ctx context.Context, env *infoEnv, a *asset, out *infoAsset)
	// writeV1 writes the 200 of the asset's v1 route.
	writeV1(w http.ResponseWriter, p *paid)
	// label is how people write the asset: "STX", a token's symbol.
	label() string
	// decimals of the base unit; -1 when unknown (a token whose metadata
	// is not read yet).
	decimals() int
	// dispensed counts what a paid drip paid in the asset's metric.
	dispensed(m *Metrics, o dripOptions, amount uint64)
}

// asset is one asset the faucet drips.
type asset struct {
	name  faucet.Asset // its path segment, metric label and budget key
	chain string       // "stacks" or "bitcoin", as v3 and MCP answers name it
	// exhaustedV1 is the v1 status of an empty faucet or spent budget:
	// the seed's STX route answers 500, the incumbent's others 503.
	exhaustedV1 int
	// bodyAddress: the v1 route reads an address from the body when the
	// query has none (the incumbent's BTC route); the others refuse it.
	bodyAddress bool
	// sizes: the v1 route reads large= and xlarge= (BTC's drip sizes).
	sizes bool
	assetKind
}

// kindRegistration builds the assets of one kind the configuration turns
// on; rank orders the kinds in every list (STX, tokens, BTC).
type kindRegistration struct {
	rank  int
	build func(cfg *Config) []*asset
}

var kindRegistry []kindRegistration

// registerKind adds a kind; called from the init of the kind's file.
func registerKind(rank int, build func(cfg *Config) []*asset) {
	kindRegistry = append(kindRegistry, kindRegistration{rank, build})
	slices.SortStableFunc(kindRegistry, func(a, b kindRegistration) int { return a.rank - b.rank })
}

// routeRegistry adds the routes of kinds beside their drips (BTC's
// balance), whether or not the configuration turns the kind on: an
// incumbent route answers 403 when it is off.
var routeRegistry []func(s *server) []route

// registerRoutes adds a kind's routes; called from the init of its file.
func registerRoutes(routes func(s *server) []route) { routeRegistry = append(routeRegistry, routes) }

// buildAssets lists the assets cfg configures, in order.
func buildAssets(cfg *Config) []*asset {
	var out []*asset
	for _, k := range kindRegistry {
		out = append(out, k.build(cfg)...)
	}
	return out
}

// paid is a drip the node (or the Bitcoin network) holds, as every door
// answers with it.
type paid struct {
	txid   string // 64 hex digits, no 0x
	rawHex func() string
	amount uint64 // base units to the recipient
	fee    uint64 // this drip's share of the fee, base units
	sender string
	nonce  uint64
	batch  int // drips the transaction pays when shared; 0 alone
	// inDoubt: the node's answer was lost; the faucet keeps sending the
	// same bytes until a block holds them.
	inDoubt bool
}

// display is the txid as the chain's tools print it: 0x-prefixed on
// Stacks, bare on Bitcoin.
func (a *asset) display(p *paid) string {
	if a.chain == chainStacks {
		return "0x" + p.txid
	}
	return p.txid
}

// The chains, as v3 and MCP answers name them.
const (
	chainStacks  = "stacks"
	chainBitcoin = "bitcoin"
)
