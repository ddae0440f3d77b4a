package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/bits"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/stxfaucet/faucet-operator/server"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
)

// serveOptions are the settings of `faucet serve`, each also an env variable.
type serveOptions struct {
	listen      string
	nodeURL     string
	nodeTimeout time.Duration
	keyFile     string
	devnet      bool
	devnetKeys  int
	blockTime   time.Duration

	// Treasury refill: one key funds the faucet keys.
	treasuryKeyFile string
	devnetTreasury  bool
	refillBelow     uint64
	refillAmount    uint64

	chainID         uint
	amount          uint64
	stackingAmount  uint64
	stackingPadding uint64
	memo            string
	feeMin          uint64
	feeMax          uint64
	feeFallback     uint64
	feeReserve      uint64
	maxInFlight     int
	stuckBlocks     uint64
	busyWait        time.Duration
	batch           batchOptions
	sbtc            sbtcOptions
	btc             btcOptions
	limits          guard.Limits
	trustedHops     int
	suspend         bool
	statusCacheTTL  time.Duration
	store           string
	historyRetain   time.Duration
	abuse           abuseOptions
	explorerTxURL   string
	lowDrips        int
	log             logFlags
}

// abuseOptions are the checks that keep scripts from draining a public
// faucet (package guard).
type abuseOptions struct {
	powDifficulty    int
	powRaiseAbove    guard.Limit
	powMaxDifficulty int
	powTTL           time.Duration
	tokensFile       string
	ipAllow, ipDeny  prefixList
	balanceCap       uint64
}

// sbtcOptions turn on the sBTC faucet: a SIP-010 token dripped beside STX.
type sbtcOptions struct {
	devnet       bool // with --devnet: deploy the token and turn sBTC on
	asset        string
	amount       uint64
	refillBelow  uint64
	refillAmount uint64
}

// batchOptions gather default drips into send-many contract calls.
type batchOptions struct {
	max      int
	window   time.Duration
	contract string
}

func (o *serveOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.listen, "listen", fmt.Sprintf(":%d", server.DefaultPort), "address the HTTP server listens on")
	fs.StringVar(&o.nodeURL, "node-url", "", "Stacks node RPC URL, e.g. http://stacks-node:20443")
	fs.DurationVar(&o.nodeTimeout, "node-timeout", node.DefaultTimeout, "timeout of each node RPC call")
	fs.StringVar(&o.keyFile, "key-file", "", "file with one or more hex private keys (newline or comma separated)")
	fs.BoolVar(&o.devnet, "devnet", false, "run an embedded simulated node with generated, funded keys")
	fs.IntVar(&o.devnetKeys, "devnet-keys", 4, "with --devnet: how many faucet keys to generate")
	fs.DurationVar(&o.blockTime, "block-time", 2*time.Second, "with --devnet: block interval of the embedded node")
	fs.StringVar(&o.treasuryKeyFile, "treasury-key-file", "", "file with one hex private key: the treasury, which tops up the faucet keys (never pays drips) so an operator funds a single address")
	fs.BoolVar(&o.devnetTreasury, "devnet-treasury", false, "with --devnet: generate a funded treasury key and start the faucet keys with little funding, so refills are visible")
	fs.Uint64Var(&o.refillBelow, "refill-below", 0, "with a treasury: refill a faucet key whose available µSTX (balance minus in-flight spends) falls below this (0 = 20 default drips' worth, 20 × (--amount + --fee-fallback))")
	fs.Uint64Var(&o.refillAmount, "refill-amount", 0, "with a treasury: µSTX per refill (0 = 10 × --refill-below); must be at least --refill-below so that one refill lifts a key above the threshold")
	fs.UintVar(&o.chainID, "chain-id", 0, "refuse a node reporting another chain id (0 = accept any testnet id)")
	fs.Uint64Var(&o.amount, "amount", faucet.DefaultAmount, "µSTX per default drip")
	fs.Uint64Var(&o.stackingAmount, "stacking-amount", 0, "fixed µSTX per stacking drip (0 = PoX min_amount_ustx plus padding)")
	fs.Uint64Var(&o.stackingPadding, "stacking-padding-percent", faucet.DefaultStackingPadding, "percent added to PoX min_amount_ustx for stacking drips")
	fs.StringVar(&o.memo, "memo", faucet.DefaultMemo, "memo of faucet transfers (at most 34 bytes)")
	fs.Uint64Var(&o.feeMin, "fee-min", faucet.DefaultFeeMin, "minimum fee in µSTX")
	fs.Uint64Var(&o.feeMax, "fee-max", faucet.DefaultFeeMax, "maximum fee in µSTX")
	fs.Uint64Var(&o.feeFallback, "fee-fallback", faucet.DefaultFeeFallback, "fee in µSTX when the node cannot estimate")
	fs.Uint64Var(&o.feeReserve, "fee-reserve", 0, "µSTX each key keeps back beyond in-flight spends")
	fs.IntVar(&o.maxInFlight, "max-in-flight", faucet.DefaultMaxInFlight, "unconfirmed transactions per key (the node's chaining limit is 25)")
	fs.DurationVar(&o.busyWait, "busy-wait", faucet.DefaultBusyWait, "how long a drip waits for a free in-flight slot before answering busy")
	fs.IntVar(&o.batch.max, "batch-max", faucet.DefaultBatchMax, "most default drips one send-many contract call pays (2..200; 0 or 1 = off, every drip a transfer of its own): drips that find in-flight slots scarce gather into one call, so a key pays far more than the node's 25 transactions per block")
	fs.DurationVar(&o.batch.window, "batch-window", 0, "gather each batch for this long from its first drip (a full batch leaves at once); 0 is adaptive: a drip leaves at once, alone, while slots are plentiful and none waits; once a fifth of each key's slots is left, drips wait and leave together the moment a block frees a slot")
	fs.StringVar(&o.batch.contract, "batch-contract", stacks.SendManyMemoTestnet, "with --batch-max: the send-many-memo contract id (ADDR.name) batches call")
	fs.Uint64Var(&o.stuckBlocks, "stuck-blocks", faucet.DefaultStuckBlocks, "blocks without nonce progress before a stuck nonce is repaired")
	o.limits = guard.DefaultLimits()
	fs.Var(limitValue{&o.limits.PerAddress}, "limit-address", "default drips per address, N/window (0 disables)")
	fs.Var(limitValue{&o.limits.StackingPerAddress}, "limit-stacking", "stacking drips per address, N/window (0 disables)")
	fs.Var(limitValue{&o.limits.PerIP}, "limit-ip", "STX drips per client IP (IPv6 by /64), N/window (0 disables)")
	fs.BoolVar(&o.sbtc.devnet, "devnet-sbtc", true, "with --devnet: deploy an sBTC token, fund the keys with it and turn the sBTC faucet on (false: STX only)")
	fs.StringVar(&o.sbtc.asset, "sbtc-asset", "", "turn on the sBTC faucet: the SIP-010 token's asset identifier, ADDR.contract::token (testnet sBTC: "+stacks.SBTCTestnet+"); needs --sbtc-amount; with --devnet the devnet's own token")
	fs.Uint64Var(&o.sbtc.amount, "sbtc-amount", 0, "sBTC per drip, in satoshis (0 = sBTC off; with --devnet "+strconv.FormatUint(devnetSBTCAmount, 10)+")")
	fs.Var(limitValue{&o.limits.SBTC.PerAddress}, "sbtc-limit-address", "sBTC drips per address, N/window, a bucket apart from STX's (0 disables)")
	fs.Var(limitValue{&o.limits.SBTC.PerIP}, "sbtc-limit-ip", "sBTC drips per client IP (IPv6 by /64), N/window (0 disables)")
	fs.Uint64Var(&o.sbtc.refillBelow, "sbtc-refill-below", 0, "with a treasury: refill a faucet key whose available sBTC falls below this many satoshis (0 = 20 sBTC drips' worth)")
	fs.Uint64Var(&o.sbtc.refillAmount, "sbtc-refill-amount", 0, "with a treasury: satoshis per sBTC refill (0 = 10 × --sbtc-refill-below)")
	o.btc.register(fs)
	fs.Var(limitValue{&o.limits.BTC.PerAddress}, "btc-limit-address", "BTC drips per address, N/window, a bucket apart from the Stacks assets' (0 disables)")
	fs.Var(limitValue{&o.limits.BTC.PerIP}, "btc-limit-ip", "BTC drips per client IP (IPv6 by /64), N/window (0 disables)")
	fs.IntVar(&o.trustedHops, "trusted-proxy-hops", 0, "X-Forwarded-For hops appended by trusted proxies (0 = use the peer address)")
	fs.BoolVar(&o.suspend, "suspend", false, "answer drips with 403 while still serving status")
	fs.DurationVar(&o.statusCacheTTL, "status-cache-ttl", server.DefaultStatusCacheTTL, "how long node reads for the status endpoint are cached")
	fs.StringVar(&o.store, "store", "", "where the faucet keeps nonces, limits and history: an SQLite file PATH, a postgres:// URI (shared by replicas), or memory (lost at exit); default "+defaultStorePath+", or memory with --devnet")
	fs.DurationVar(&o.historyRetain, "history-retention", defaultHistoryRetention, "how long the drip history is kept")
	fs.IntVar(&o.abuse.powDifficulty, "pow-difficulty", guard.DefaultDifficulty, "proof of work asked of anonymous drips, in leading zero bits of SHA-256 (0 = off; 18 costs a browser about a second); API tokens and --ip-allow skip it")
	fs.Var(limitValue{&o.abuse.powRaiseAbove}, "pow-raise-above", "raise the proof of work while more than N anonymous drips pass per window, N/window (0 = never)")
	fs.IntVar(&o.abuse.powMaxDifficulty, "pow-max-difficulty", guard.DefaultMaxDifficulty, "ceiling of the raised proof of work, in bits")
	fs.DurationVar(&o.abuse.powTTL, "pow-ttl", guard.DefaultChallengeTTL, "how long a proof-of-work challenge stays valid")
	fs.StringVar(&o.abuse.tokensFile, "api-tokens-file", "", "file of API tokens for CI and teams, one per line: NAME TOKEN|sha256:HEX QUOTA [PER_ADDRESS]; re-read when it changes")
	fs.Var(&o.abuse.ipAllow, "ip-allow", "comma-separated IPs/CIDRs that skip the proof of work and the per-IP limit")
	fs.Var(&o.abuse.ipDeny, "ip-deny", "comma-separated IPs/CIDRs whose drips are refused")
	fs.Uint64Var(&o.abuse.balanceCap, "balance-cap", 0, "refuse drips to an address already holding at least this many µSTX (0 = off)")
	fs.StringVar(&o.explorerTxURL, "explorer-tx-url", server.DefaultExplorerTxURL, "explorer link the web page shows for a drip; {txid} is replaced by the 0x txid")
	fs.IntVar(&o.lowDrips, "low-drips", server.DefaultLowDrips, "report the faucet as low on funds when fewer default drips than this are left")
	o.log.register(fs)
}

// serveUsage heads `faucet serve -h`.
const serveUsage = `usage: faucet serve --node-url URL --key-file FILE [flags]
       faucet serve --devnet [flags]

Every flag can also be set as FAUCET_<NAME> (e.g. FAUCET_NODE_URL); a flag on
the command line wins.
`

// serveFlagGroups order `faucet serve -h` by concern.
var serveFlagGroups = []flagGroup{
	{"node and keys", []string{"node-url", "node-timeout", "key-file", "chain-id", "treasury-key-file", "refill-below", "refill-amount"}},
	{"amounts and fees", []string{"amount", "stacking-amount", "stacking-padding-percent", "memo", "fee-min", "fee-max", "fee-fallback", "fee-reserve"}},
	{"sending and batching", []string{"max-in-flight", "busy-wait", "stuck-blocks", "batch-max", "batch-window", "batch-contract"}},
	{"limits and abuse", []string{"limit-address", "limit-stacking", "limit-ip", "trusted-proxy-hops", "pow-difficulty", "pow-raise-above",
		"pow-max-difficulty", "pow-ttl", "api-tokens-file", "ip-allow", "ip-deny", "balance-cap", "suspend"}},
	{"sBTC", []string{"sbtc-asset", "sbtc-amount", "sbtc-limit-address", "sbtc-limit-ip", "sbtc-refill-below", "sbtc-refill-amount"}},
	{"BTC", []string{"btc-rpc-url", "btc-rpc-credentials-file", "btc-key-file", "btc-network", "btc-amount", "btc-large-amount", "btc-xlarge-amount",
		"btc-fee-rate", "btc-min-fee-rate", "btc-max-fee-rate", "btc-start-height", "btc-batch-max", "btc-rpc-timeout", "btc-limit-address", "btc-limit-ip"}},
	{"store", []string{"store", "history-retention"}},
	{"HTTP server and page", []string{"listen", "status-cache-ttl", "explorer-tx-url", "low-drips"}},
	{"logging", []string{"log-level", "log-format"}},
	{"devnet", []string{"devnet", "devnet-keys", "block-time", "devnet-treasury", "devnet-sbtc", "devnet-btc", "btc-block-time"}},
}

func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var o serveOptions
	o.register(fs)
	fs.Usage = usageFunc(fs, serveUsage, serveFlagGroups...)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	// Everything up to here and in check is the command line's fault
	// (exit 2); what fails from here on fails while running (exit 1).
	logger, err := o.log.logger()
	if err != nil {
		return flagError(fs, err)
	}
	token, batchContract, err := o.check()
	if err != nil {
		return flagError(fs, err)
	}
	o.sbtc.amount = token.Amount // the devnet's default, for the banner
	var btcKey *bitcoin.PrivateKey
	if o.btc.on() {
		if btcKey, err = readBTCKeyFile(o.btc.keyFile, o.btc.network); err != nil {
			return err
		}
	}

	reg := prometheus.NewRegistry()
	metrics := server.NewMetrics(reg)
	var keys []*stacks.PrivateKey
	var treasury *stacks.PrivateKey
	var devnetURL string
	if o.devnet {
		keys, treasury, devnetURL, err = startEmbeddedDevnet(ctx, o, token, logger)
		if err != nil {
			return err
		}
		o.nodeURL = devnetURL
		if o.btc.devnet {
			var stopBtcd func()
			if btcKey, stopBtcd, err = o.startDevnetBTC(ctx, logger); err != nil {
				return err
			}
			defer stopBtcd()
		}
	}
	client, err := node.New(o.nodeURL, node.WithTimeout(o.nodeTimeout), node.WithObserver(metrics.ObserveNodeCall),
		node.WithUserAgent("faucet-operator/"+version))
	if err != nil {
		return flagError(fs, fmt.Errorf("--node-url: %w", err))
	}
	if !o.devnet {
		if keys, err = readKeyFile(o.keyFile); err != nil {
			return err
		}
		if o.treasuryKeyFile != "" {
			if treasury, err = readTreasuryKeyFile(o.treasuryKeyFile); err != nil {
				return err
			}
		}
		if err := checkNode(ctx, client, logger); err != nil {
			return err
		}
	}

	state, err := openState(ctx, o, logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := state.close(); cerr != nil {
			logger.Warn("closing the store failed", "err", cerr)
		}
	}()

	f, err := faucet.New(faucet.Config{
		Keys: keys, Node: client, ChainID: uint32(o.chainID), Logger: logger,
		Amounts:  faucet.Amounts{Default: o.amount, Stacking: o.stackingAmount, StackingPaddingPercent: &o.stackingPadding, Memo: o.memo},
		Token:    token,
		Fees:     faucet.Fees{Min: o.feeMin, Max: o.feeMax, Fallback: o.feeFallback, Reserve: o.feeReserve},
		Batching: faucet.Batching{Max: o.batch.max, Window: o.batch.window, Contract: batchContract},
		Refills:  faucet.Refills{Treasury: treasury, Below: o.refillBelow, Amount: o.refillAmount},
		State:    faucet.State{Journal: state.journal, History: state.history, Shared: state.owner != nil},
		Timing:   faucet.Timing{MaxInFlight: o.maxInFlight, StuckBlocks: o.stuckBlocks, BusyWait: o.busyWait},
	})
	if err != nil {
		return err
	}
	var btcFaucet *btcfaucet.Faucet
	if btcKey != nil {
		client, err := o.btc.client(nil)
		if err != nil {
			return err
		}
		if btcFaucet, err = o.btc.newBTCFaucet(btcKey, client, state, logger); err != nil {
			return err
		}
	}
	checks, err := guard.New(guard.Config{
		Allow: o.abuse.ipAllow, Deny: o.abuse.ipDeny,
		TokensFile: o.abuse.tokensFile,
		PoW: guard.PoWConfig{
			Difficulty: o.abuse.powDifficulty, TTL: o.abuse.powTTL,
			RaiseAbove: o.abuse.powRaiseAbove, MaxDifficulty: o.abuse.powMaxDifficulty,
			// Replicas share the keys, so they derive the same secret and
			// accept each other's challenges.
			Secret: f.DeriveSecret("proof-of-work challenges"),
		},
		BalanceCap: o.abuse.balanceCap, Accounts: client,
		Spent: state.spent,
		// Failed API tokens count in the limits store: shared by replicas.
		Failures: state.limiter,
		Logger:   logger.With("component", "guard"),
	})
	if err != nil {
		return err
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.listen, err)
	}
	logger.Info("faucet starting", "version", version, "listen", ln.Addr().String(), "page", pageURL(ln.Addr()),
		"node", client.URL(), "store", state.kind, "addresses", f.Addresses(),
		"pow_difficulty", checks.Difficulty(), "api_tokens", checks.TokenCount())
	if ts, ok := f.Treasury(); ok {
		logger.Info("treasury refills faucet keys", "treasury", ts.Address, "refill_below", ts.RefillBelow, "refill_amount", ts.RefillAmount)
	}
	if tok, on := f.TokenConfig(); on {
		logger.Info("sBTC faucet on", "asset", tok.Asset.String(), "amount_sats", tok.Amount,
			"limit_address", limitValue{&o.limits.SBTC.PerAddress}.String(), "limit_ip", limitValue{&o.limits.SBTC.PerIP}.String())
	}
	if btcFaucet != nil {
		am := btcFaucet.Amounts()
		logger.Info("BTC faucet on", "network", btcFaucet.Network().String(), "address", btcFaucet.Address().String(),
			"btc_node", o.btc.publicURL, "amount_sats", am.Default, "large_sats", am.Large, "xlarge_sats", am.XLarge,
			"limit_address", limitValue{&o.limits.BTC.PerAddress}.String(), "limit_ip", limitValue{&o.limits.BTC.PerIP}.String())
	}
	if o.devnet {
		tok, _ := f.TokenConfig()
		printDevnetBanner(stdout, ln.Addr(), devnetURL, f.Addresses(), tok)
		printDevnetBTCBanner(stdout, ln.Addr(), btcFaucet, o.btc)
		if ts, ok := f.Treasury(); ok {
			fmt.Fprintf(stdout, "  treasury:         %s (refills a faucet key below %d µSTX with %d µSTX)\n\n", ts.Address, ts.RefillBelow, ts.RefillAmount)
		}
	}

	h := server.New(server.Config{
		Faucet: f, Node: client, Txs: client, Guard: checks, Version: version, Commit: commit,
		BTC:    btcOrNil(btcFaucet),
		Limits: guard.NewRateLimits(o.limits, state.limiter, nil), Suspended: o.suspend,
		ExplorerTxURL: o.explorerTxURL, LowDrips: o.lowDrips, Devnet: o.devnet,
		TrustedProxyHops: o.trustedHops, StatusCacheTTL: o.statusCacheTTL, Metrics: metrics, Logger: logger,
	})
	// The engine outlives the HTTP server's graceful shutdown: drips still
	// in flight at SIGTERM need their keys (and, on a shared store, their
	// ownership) until they have answered.
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	return supervise(ctx, logger,
		task{"faucet engine", func(context.Context) error { return f.Run(engineCtx) }},
		task{"btc faucet", func(context.Context) error { return btcTask(btcFaucet)(engineCtx) }},
		task{"key ownership", func(context.Context) error { return state.keepOwnership(engineCtx, f, btcFaucet, logger) }},
		task{"http server", func(ctx context.Context) error {
			defer stopEngine()
			return server.Serve(ctx, ln, h, logger)
		}},
		task{"store maintenance", state.background},
		task{"api tokens reload", func(ctx context.Context) error { checks.Run(ctx); return nil }},
	)
}

// check validates the flags against each other before anything starts,
// and returns the sBTC token and the batch contract they name.
func (o *serveOptions) check() (faucet.Token, stacks.ContractID, error) {
	var none stacks.ContractID
	if o.chainID > 0xffffffff {
		return faucet.Token{}, none, fmt.Errorf("--chain-id %d does not fit in 32 bits", o.chainID)
	}
	// The engine reads 0 as "use the default"; on the command line it would
	// silently mean 500 STX, or node calls without any timeout (a hung node
	// would then stall the engine's poll loop for good).
	if o.nodeTimeout <= 0 {
		return faucet.Token{}, none, fmt.Errorf("--node-timeout must be positive, got %s", o.nodeTimeout)
	}
	if o.amount == 0 {
		return faucet.Token{}, none, errors.New("--amount must be positive")
	}
	switch {
	case o.devnet:
		if o.nodeURL != "" || o.keyFile != "" || o.treasuryKeyFile != "" {
			return faucet.Token{}, none, errors.New("--devnet runs its own node and keys; drop --node-url, --key-file and --treasury-key-file (--devnet-treasury generates a treasury)")
		}
		if o.devnetKeys < 1 || o.devnetKeys > 100 {
			return faucet.Token{}, none, fmt.Errorf("--devnet-keys must be 1..100, got %d", o.devnetKeys)
		}
	case o.nodeURL == "" || o.keyFile == "":
		return faucet.Token{}, none, errors.New("--node-url and --key-file are required (or use --devnet)")
	}
	if err := needScheme("--node-url", o.nodeURL); err != nil {
		return faucet.Token{}, none, err
	}
	if err := needScheme("--btc-rpc-url", o.btc.rpcURL); err != nil {
		return faucet.Token{}, none, err
	}
	if err := o.validatePage(); err != nil {
		return faucet.Token{}, none, err
	}
	if err := o.validateRefill(); err != nil {
		return faucet.Token{}, none, err
	}
	token, err := o.sbtc.token(o.devnet, o.treasuryKeyFile != "" || o.devnetTreasury)
	if err != nil {
		return faucet.Token{}, none, err
	}
	batchContract, err := o.batch.validate()
	if err != nil {
		return faucet.Token{}, none, err
	}
	if err := o.btc.validate(o.devnet); err != nil {
		return faucet.Token{}, none, err
	}
	return token, batchContract, nil
}

// checkNode reads /v2/info once at start, so that a --node-url pointing
// at something other than a Stacks node's RPC (the API's port, a web
// server) fails now, saying so, rather than as endless "node poll failed"
// warnings. A node that does not answer at all may be starting beside
// the faucet; the engine keeps polling it, so that is only a warning.
func checkNode(ctx context.Context, c *node.Client, logger *slog.Logger) error {
	info, err := c.Info(ctx)
	var why string
	var httpErr *node.HTTPError
	var respErr *node.ResponseError
	switch {
	case err == nil && info.PeerVersion == 0 && info.ServerVersion == "" && info.NetworkID == 0:
		why = "GET /v2/info answered JSON without the node's fields"
	case err == nil:
		return nil
	case errors.As(err, &httpErr) && (httpErr.StatusCode == http.StatusNotFound || httpErr.StatusCode == http.StatusMethodNotAllowed):
		why = fmt.Sprintf("GET /v2/info answered %d %s", httpErr.StatusCode, http.StatusText(httpErr.StatusCode))
	case errors.As(err, &respErr):
		why = fmt.Sprintf("GET /v2/info answered, but not with the node's JSON: %v", respErr.Err)
	default:
		if ctx.Err() == nil { // not just stopping
			logger.Warn("the Stacks node does not answer yet; the faucet keeps trying", "node", c.URL(), "err", err)
		}
		return nil
	}
	return fmt.Errorf("--node-url %s does not look like a Stacks node RPC (%s); the node's RPC port is usually 20443", c.URL(), why)
}

// task is one long-running part of a command.
type task struct {
	name string
	run  func(context.Context) error
}

// supervise runs the tasks until ctx ends and waits for all of them. When
// one fails, or returns while ctx is still live (a loop that stops on its
// own is a failure too), the others are stopped and its error is returned,
// so the process exits non-zero and Kubernetes restarts the pod instead of
// serving from a dead engine.
func supervise(ctx context.Context, logger *slog.Logger, tasks ...task) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, t := range tasks {
		g.Go(func() error {
			err := t.run(gctx)
			if err == nil && gctx.Err() == nil {
				err = errors.New("stopped unexpectedly")
			}
			if err != nil && gctx.Err() == nil {
				logger.Error("stopping: "+t.name+" failed", "err", err)
				return fmt.Errorf("%s: %w", t.name, err)
			}
			return err
		})
	}
	return g.Wait()
}

// Store defaults: a file in the working directory keeps state across
// restarts; the throwaway devnet needs none.
const (
	defaultStorePath        = "faucet.db"
	defaultHistoryRetention = 30 * 24 * time.Hour
	storeMemory             = "memory"
)

// readKeyFile loads keys; errors name the file and the key's position only.
func readKeyFile(path string) ([]*stacks.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--key-file: %w", err)
	}
	keys, err := stacks.ParsePrivateKeys(string(data))
	if err != nil {
		return nil, fmt.Errorf("--key-file %s: %w", path, err)
	}
	return keys, nil
}

// readTreasuryKeyFile loads the treasury key: exactly one.
func readTreasuryKeyFile(path string) (*stacks.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--treasury-key-file: %w", err)
	}
	keys, err := stacks.ParsePrivateKeys(string(data))
	if err != nil {
		return nil, fmt.Errorf("--treasury-key-file %s: %w", path, err)
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("--treasury-key-file %s: want exactly one key, found %d", path, len(keys))
	}
	return keys[0], nil
}

// devnetSBTCAmount is the devnet's sBTC drip: 0.001 sBTC.
const devnetSBTCAmount uint64 = 100_000

// token is the engine's token configuration from the sBTC flags: off
// unless both the asset and the amount are set (the devnet sets both
// unless told otherwise).
func (s sbtcOptions) token(devnet, hasTreasury bool) (faucet.Token, error) {
	if devnet && s.devnet {
		if s.asset == "" {
			s.asset = stacks.SBTCTestnet
		}
		if s.amount == 0 {
			s.amount = devnetSBTCAmount
		}
	}
	switch {
	case s.asset == "" && s.amount == 0:
		if s.refillBelow != 0 || s.refillAmount != 0 {
			return faucet.Token{}, errors.New("--sbtc-refill-below and --sbtc-refill-amount need the sBTC faucet on: --sbtc-asset and --sbtc-amount")
		}
		return faucet.Token{}, nil
	case s.asset == "":
		return faucet.Token{}, errors.New("--sbtc-amount needs --sbtc-asset, the token's asset identifier (ADDR.contract::token)")
	case s.amount == 0:
		return faucet.Token{}, errors.New("--sbtc-asset needs --sbtc-amount, the satoshis per drip")
	}
	asset, err := stacks.ParseAssetID(s.asset)
	if err != nil {
		return faucet.Token{}, fmt.Errorf("--sbtc-asset: %w", err)
	}
	if asset.Contract.Address.IsMainnet() {
		return faucet.Token{}, fmt.Errorf("--sbtc-asset %s: a mainnet contract; the faucet only serves test networks", s.asset)
	}
	if !hasTreasury && (s.refillBelow != 0 || s.refillAmount != 0) {
		return faucet.Token{}, errors.New("--sbtc-refill-below and --sbtc-refill-amount need a treasury: --treasury-key-file (or --devnet-treasury)")
	}
	t := faucet.Token{Asset: asset, Amount: s.amount, RefillBelow: s.refillBelow, RefillAmount: s.refillAmount}
	if hasTreasury {
		if _, err := t.ResolveRefills(); err != nil {
			return faucet.Token{}, fmt.Errorf("--sbtc-refill-below/--sbtc-refill-amount: %w", err)
		}
	}
	return t, nil
}

// validate checks the batching flags and parses the contract id.
func (b batchOptions) validate() (stacks.ContractID, error) {
	if b.window < 0 {
		return stacks.ContractID{}, fmt.Errorf("--batch-window must be positive, or 0 for adaptive; got %s", b.window)
	}
	id, err := stacks.ParseContractID(b.contract)
	if err != nil {
		return stacks.ContractID{}, fmt.Errorf("--batch-contract: %w", err)
	}
	// The engine's rules, checked now so that a bad flag fails before
	// the store is opened.
	if _, err := (faucet.Batching{Max: b.max, Window: b.window, Contract: id}).Resolve(); err != nil {
		return stacks.ContractID{}, fmt.Errorf("--batch-max/--batch-contract: %w", err)
	}
	return id, nil
}

// validateRefill checks the treasury flags (the engine checks again that
// the treasury is not also a faucet key).
func (o *serveOptions) validateRefill() error {
	hasTreasury := o.treasuryKeyFile != "" || o.devnetTreasury
	if o.devnetTreasury && !o.devnet {
		return errors.New("--devnet-treasury needs --devnet (use --treasury-key-file with a real node)")
	}
	if !hasTreasury && (o.refillBelow != 0 || o.refillAmount != 0) {
		return errors.New("--refill-below and --refill-amount need a treasury: --treasury-key-file (or --devnet-treasury)")
	}
	if _, err := o.refills(); err != nil {
		return fmt.Errorf("--refill-below/--refill-amount: %w", err)
	}
	return nil
}

// refills are the refill flags with the engine's defaults applied.
func (o *serveOptions) refills() (faucet.Refills, error) {
	return faucet.Refills{Below: o.refillBelow, Amount: o.refillAmount}.Resolve(o.amount, o.feeFallback)
}

// satAddMul is a + b×c, saturating at the largest uint64.
func satAddMul(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(b, c)
	if hi != 0 || lo+a < lo {
		return math.MaxUint64
	}
	return lo + a
}

// devnetTokenFunding is the sBTC each generated devnet key starts with:
// 1,000 sBTC in satoshis, ten million devnet drips.
const devnetTokenFunding uint64 = 1_000 * 100_000_000

// devnetFunding is what each generated devnet key starts with: a billion
// STX, two million drips or thousands of stacking drips at the devnode's
// default PoX minimum. Nine keys' worth stays below 2^53 µSTX, so the
// balance /faucet/v1/info reports is a number JavaScript reads exactly.
const devnetFunding uint64 = 1_000_000_000 * 1_000_000

// browseHost is the host:port a person on this machine opens for addr.
func browseHost(listen net.Addr) string {
	host := listen.String()
	if tcp, ok := listen.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		host = fmt.Sprintf("localhost:%d", tcp.Port)
	}
	return host
}

// validatePage checks the web page and abuse-control settings that
// package guard does not see.
func (o *serveOptions) validatePage() error {
	u := o.explorerTxURL
	if !strings.Contains(u, "{txid}") || !(strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")) {
		return fmt.Errorf("--explorer-tx-url %q: want an http(s) URL containing {txid}", u)
	}
	if o.lowDrips < 1 {
		return fmt.Errorf("--low-drips must be at least 1, got %d", o.lowDrips)
	}
	return nil
}
