// Package settings holds what the faucet's parts and its operator agree on
// without depending on each other: the names of the built-in assets, the
// defaults of every setting both `faucet serve` and the FaucetServer CRD
// expose, and the arithmetic of funding (what a drip costs, when funds are
// low). It imports nothing of the faucet, so the operator builds without
// the HTTP server, the engines or their dependencies.
package settings

import (
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The built-in assets' names: their path segments, metric labels and
// budget keys. SIP-010 tokens are named by configuration.
const (
	AssetSTX = "stx"
	AssetBTC = "btc"
)

// ValidAssetName: what a URL path segment, a metrics label and a
// Kubernetes list key all take without escaping.
func ValidAssetName(a string) bool {
	if len(a) == 0 || len(a) > 32 || a[0] < 'a' || a[0] > 'z' {
		return false
	}
	for _, c := range []byte(a) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Defaults of the Stacks engine's settings.
const (
	STXAmount       uint64 = 500_000_000 // 500 STX
	StackingPadding uint64 = 20          // percent above PoX min_amount_ustx
	Memo                   = "faucet"
	MaxInFlight            = 25 // the node's mempool chaining limit
	FeeMin          uint64 = 180
	FeeMax          uint64 = 100_000
	FeeFallback     uint64 = 1_000
	StuckBlocks     uint64 = 3
	BusyWait               = 5 * time.Second
	// PollInterval is the tip poll's cadence while nothing is in flight
	// (and the node pool's probe interval); BusyPollInterval while
	// transactions are: a block frees its confirmed nonces' slots within
	// about this much of the node showing it.
	PollInterval     = time.Second
	BusyPollInterval = 100 * time.Millisecond
	// BatchMax drips share one send-many call by default, the most the
	// contract takes.
	BatchMax = stacks.SendManyMaxRecipients
	// A key is topped up from the treasury below RefillBelowDrips drips,
	// with RefillAmountFactor times that threshold.
	RefillBelowDrips   uint64 = 20
	RefillAmountFactor uint64 = 10
)

// Defaults of the BTC faucet: the incumbent's three drip sizes (0.0001,
// 0.01 and 0.5 BTC), and fee rates in sat/vB: the rate when the node has no
// estimate (btcd never has one; a young regtest Core neither), and the cap
// on any rate.
const (
	BTCAmount          int64 = 10_000
	BTCLargeAmount     int64 = 1_000_000
	BTCXLargeAmount    int64 = 50_000_000
	BTCFallbackFeeRate int64 = 2
	BTCMaxFeeRate      int64 = 100
	// BTCBatchMax drips share one payout transaction by default;
	// BTCMaxBatch outputs is the most one may have.
	BTCBatchMax = 100
	BTCMaxBatch = 500
)

// Defaults of the HTTP server.
const (
	Port           = 3999
	StatusCacheTTL = time.Second
	// ExplorerTxURL links a drip to Hiro's explorer; {txid} is replaced.
	ExplorerTxURL = "https://explorer.hiro.so/txid/{txid}?chain=testnet"
	// LowDrips: an asset that can pay fewer drips than this is "low".
	LowDrips = 100
	// ShutdownTimeout bounds a graceful shutdown: in-flight drips finish
	// within it. The operator's termination grace period is built on it.
	ShutdownTimeout = 28 * time.Second
)

// IncumbentLabels are the assets the incumbent API always routes, by the
// names its messages write them: their routes answer 403 "… faucet is not
// available" when this faucet does not drip them, rather than 404.
var IncumbentLabels = map[string]string{"sbtc": "sBTC", AssetBTC: "BTC"}

// IncumbentAssets lists IncumbentLabels' names in a fixed order.
var IncumbentAssets = []string{"sbtc", AssetBTC}

// How /faucet/v1/info names where the contract of sBTC configured without
// one comes from (node.PoXInfo.Token's rule): SourcePoX, the field of
// /v2/pox the node names it in; SourceDefault, SBTCTestnet's, the node
// naming none.
const (
	SourcePoX     = "pox_5_sbtc_contract"
	SourceDefault = "default"
)

// SBTCTestnet is today's testnet sBTC token's asset identifier (the PoX-5
// testnet's, which its 4.x nodes name in /v2/pox): sBTC's contract when
// none is configured and the node names none (a node before Epoch 4.0),
// and where the devnet deploys its sBTC. The previous testnet's,
// ST1F7QA2MDF17S807EPA36TSS8AMEFY4KA9TVGWXT.sbtc-token, is retired.
const SBTCTestnet = "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token"

// OrDefault is v when it is above zero, else def: how a zero (or invalid
// negative) setting takes its default.
func OrDefault[T int | int64 | uint64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
