package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// fundList collects repeated --fund ADDR=µSTX flags.
type fundList map[stacks.Address]uint64

func (f fundList) String() string { return fmt.Sprintf("%d entries", len(f)) }

func (fundList) ArgName() string { return "ADDR=µSTX" }

func (f fundList) Set(s string) error {
	addr, amount, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("--fund %q: want ADDR=µSTX", s)
	}
	a, err := stacks.ParseAddress(addr)
	if err != nil {
		return fmt.Errorf("--fund: %w", err)
	}
	if !a.IsTestnet() {
		return fmt.Errorf("--fund %s: not a testnet address", addr)
	}
	v, err := strconv.ParseUint(amount, 10, 64)
	if err != nil {
		return fmt.Errorf("--fund %q: amount must be µSTX as a whole number", s)
	}
	f[a] = v
	return nil
}

// devnetUsage heads `faucet devnet -h`.
const devnetUsage = `usage: faucet devnet --fund-key-file FILE [flags]
       faucet devnet --fund ADDR=µSTX [--fund ADDR=µSTX]... [flags]
       faucet devnet --upstream URL [--listen ADDR]

Serves the simulated Stacks node alone, e.g. for a separate
faucet serve --node-url. With --btc-listen it also runs a Bitcoin regtest
node (btcd) for the faucet's --btc-rpc-url, mining to the faucet's
Bitcoin address. With --upstream it serves another front end of a
running one instead: a second RPC endpoint of the same chain, as a
follower node is, to give faucet serve several --node-url. Every flag can
also be set as FAUCET_<NAME>.
`

// devnetFlagGroups order `faucet devnet -h` by concern.
var devnetFlagGroups = []flagGroup{
	{"node", []string{"listen", "upstream", "block-time", "pox-min-amount", "send-many-contract", "token-asset"}},
	{"genesis funding", []string{"fund-key-file", "fund-amount", "fund-token-amount", "fund"}},
	{"bitcoin node", devnetBTCFlagNames},
	{"logging", []string{"log-level", "log-format"}},
}

// runDevnet serves the simulated Stacks node alone, e.g. for a separate
// `faucet serve --node-url` process.
func runDevnet(ctx context.Context, clk procClock, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("devnet", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:20443", "address the node RPC listens on")
	blockTime := fs.Duration("block-time", 2*time.Second, "block interval")
	keyFile := fs.String("fund-key-file", "", "fund the addresses of the keys in this file at genesis")
	keyFunding := fs.Uint64("fund-amount", devnetFunding, "µSTX for each address from --fund-key-file")
	minStacking := fs.Uint64("pox-min-amount", 0, "PoX min_amount_ustx the node reports (0 = devnode default)")
	sendMany := fs.String("send-many-contract", stacks.SendManyMemoTestnet, "contract id of the send-many-memo contract the node deploys (\"\" = none)")
	token := fs.String("token-asset", settings.SBTCTestnet, "asset identifier ADDR.contract::"+devnode.TokenName+" of the SIP-010 token (sBTC) the node deploys (\"\" = none)")
	tokenFunding := fs.Uint64("fund-token-amount", devnetTokenFunding, "token base units (sats) for each address from --fund-key-file")
	upstream := fs.String("upstream", "", "serve another RPC front end of the devnode at this URL (http://host:port) instead of a node of its own; the other flags but --listen and logging do not apply")
	fund := fundList{}
	fs.Var(fund, "fund", "fund ADDR with µSTX at genesis, ADDR=µSTX (repeatable)")
	var btcFlags devnetBTCFlags
	btcFlags.bind(fs)
	lf := options.Defaults().Log
	lf.BindFlags(options.NewFlags(fs))
	fs.Usage = usageFunc(fs, devnetUsage, devnetFlagGroups...)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	logger, err := lf.Logger()
	if err != nil {
		return flagError(fs, err)
	}
	if *upstream != "" {
		return serveFrontEndOf(ctx, fs, *upstream, *listen, stdout, logger)
	}
	tokenGenesis := map[stacks.Address]uint64{}
	if *keyFile != "" {
		keys, err := readKeyFile(*keyFile)
		if err != nil {
			return err
		}
		for _, k := range keys {
			fund[k.TestnetAddress()] = *keyFunding
			if *tokenFunding > 0 {
				tokenGenesis[k.TestnetAddress()] = *tokenFunding
			}
		}
	}
	if len(fund) == 0 {
		return flagError(fs, errors.New("nothing to fund: give --fund-key-file or --fund ADDR=µSTX"))
	}
	if *sendMany != "" {
		if _, err := stacks.ParseContractID(*sendMany); err != nil {
			return flagError(fs, fmt.Errorf("--send-many-contract: %w", err))
		}
	}
	cfg := devnode.Config{BlockTime: *blockTime, Genesis: fund, MinAmountUstx: *minStacking,
		SendManyContract: *sendMany, Logger: logger, Clock: clk}
	if *token != "" {
		a, err := stacks.ParseAssetID(*token)
		if err != nil {
			return flagError(fs, fmt.Errorf("--token-asset: %w", err))
		}
		if a.Name != devnode.TokenName || a.Contract.String() == *sendMany {
			return flagError(fs, fmt.Errorf("--token-asset %s: the node deploys its own token, named %s, at a contract other than send-many's", *token, devnode.TokenName))
		}
		cfg.TokenAsset, cfg.TokenGenesis = *token, tokenGenesis
	}
	btc, err := btcFlags.resolve(fs)
	if err != nil {
		return err
	}
	var btcd *devnetBtcd
	if btc != nil {
		// Before the Stacks node, whose RPC answering (a pod's readiness)
		// then says both are up.
		if btcd, err = btc.start(ctx, clk, logger.With("component", "btcd")); err != nil {
			return err
		}
		defer btcd.Stop()
	}
	dn := devnode.New(cfg)
	url, err := serveDevnode(ctx, dn, *listen, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "devnode serving the Stacks node RPC at %s (block time %s, %d funded addresses)\n", url, *blockTime, len(fund))
	if btcd != nil {
		fmt.Fprintf(stdout, "btcd serving the Bitcoin regtest RPC at http://%s (block time %s, mining to %s)\n", btcd.gate.address(), btc.cfg.blockTime, btc.cfg.mineTo)
	}
	<-ctx.Done()
	return nil
}

// serveFrontEndOf serves a second RPC front end of the devnode at
// upstream, relaying every call to it, until ctx ends: a node of the same
// chain whose process (or pod) can be stopped while the chain goes on, as
// a follower can beside a miner.
func serveFrontEndOf(ctx context.Context, fs *flag.FlagSet, upstream, listen string, stdout io.Writer, logger *slog.Logger) error {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return flagError(fs, fmt.Errorf("--upstream %q: want the devnode's URL, http://host:port", upstream))
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("devnode front end listen %s: %w", listen, err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		logger.Warn("the upstream devnode did not answer", "path", r.URL.Path, "err", err)
		http.Error(w, "upstream devnode unavailable", http.StatusBadGateway)
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	fmt.Fprintf(stdout, "devnode front end serving the Stacks node RPC at http://%s (relaying to %s)\n", ln.Addr(), u.Redacted())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("devnode front end: %w", err)
	}
	return nil
}

// serveDevnode starts the node's RPC on addr and its miner; both stop with ctx.
func serveDevnode(ctx context.Context, dn *devnode.Node, addr string, logger *slog.Logger) (string, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("devnode listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: dn.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("devnode server stopped", "err", err)
		}
	}()
	go func() {
		if err := dn.Run(ctx); err != nil {
			logger.Error("devnode miner stopped", "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// pageURL is the web page's address for the log.
func pageURL(listen net.Addr) string { return "http://" + browseHost(listen) + "/" }

// embeddedDevnet is what startEmbeddedDevnet started: the node's URL and
// the keys it funded.
type embeddedDevnet struct {
	url      string
	keys     []*stacks.PrivateKey
	treasury *stacks.PrivateKey
}

// startEmbeddedDevnet runs a simulated node on a loopback port with freshly
// generated, generously funded keys, the send-many contract at its testnet
// id, and the devnet's tokens (sBTC, named in /v2/pox as an Epoch 4.0
// node names it, and the test token), each key minted its share. With
// --devnet-treasury it also generates the treasury, which gets the
// generous funding, while the faucet keys start about ten drips above the
// refill thresholds.
func startEmbeddedDevnet(ctx context.Context, clk procClock, o *options.Serve, logger *slog.Logger) (*embeddedDevnet, error) {
	d := &embeddedDevnet{}
	cfg := devnode.Config{BlockTime: o.Devnet.BlockTime, Genesis: map[stacks.Address]uint64{}, SendManyContract: stacks.SendManyMemoTestnet,
		Logger: logger.With("component", "devnode"), Clock: clk}
	specs, err := devnetTokens(o)
	if err != nil {
		return nil, err
	}
	keyFunding := devnetFunding
	if o.Devnet.Treasury {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			return nil, err
		}
		d.treasury = k
		cfg.Genesis[k.TestnetAddress()] = devnetFunding
		below, _, _ := o.Keys.Refills(o.Amounts, o.Fees) // checked by Validate
		keyFunding = satAddMul(below, 10, settings.DripCost(o.Amounts.Default, o.Fees.Fallback))
	}
	for range o.Devnet.Keys {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		cfg.Genesis[k.TestnetAddress()] = keyFunding
	}
	for _, s := range specs {
		s.mint(d.keys, d.treasury)
		cfg.Tokens = append(cfg.Tokens, s.spec)
		if s.sbtc {
			cfg.PoXSBTCContract = s.spec.Asset.Contract
		}
	}
	if d.url, err = serveDevnode(ctx, devnode.New(cfg), "127.0.0.1:0", logger); err != nil {
		return nil, err
	}
	return d, nil
}

// devnetToken is a token the devnet deploys and how much of it each key
// gets.
type devnetToken struct {
	spec     devnode.TokenSpec
	sbtc     bool
	perKey   uint64 // base units each faucet key starts with
	treasury uint64 // base units the treasury starts with
}

// mint sets the token's genesis balances of keys and treasury.
func (t *devnetToken) mint(keys []*stacks.PrivateKey, treasury *stacks.PrivateKey) {
	t.spec.Genesis = map[stacks.Address]uint64{}
	for _, k := range keys {
		t.spec.Genesis[k.TestnetAddress()] = t.perKey
	}
	if treasury != nil {
		t.spec.Genesis[treasury.TestnetAddress()] = t.treasury
	}
}

// devnetTokens are the tokens the devnet deploys: sBTC (--devnet-sbtc),
// where --sbtc-asset says or at its testnet identifier, and the test token
// (--devnet-test-token). With a treasury each key starts about ten drips
// above its refill threshold.
func devnetTokens(o *options.Serve) ([]devnetToken, error) {
	var out []devnetToken
	for _, t := range o.TokenList() {
		var spec devnode.TokenSpec
		switch {
		case t.Name == "sbtc" && o.Devnet.SBTC:
			asset, err := stacks.ParseAssetID(o.DevnetSBTCAsset())
			if err != nil {
				return nil, fmt.Errorf("%w: --sbtc-asset: %w", errUsage, err)
			}
			if asset.Name != devnode.TokenName {
				return nil, fmt.Errorf("%w: --sbtc-asset %s: the devnet deploys its own token, named %s: use ADDR.contract::%s", errUsage, asset, devnode.TokenName, devnode.TokenName)
			}
			spec = devnode.SBTCToken(asset, nil)
		case t.Name == options.DevnetTestTokenName && t.Asset == options.DevnetTestTokenAsset:
			asset, _ := stacks.ParseAssetID(options.DevnetTestTokenAsset)
			spec = devnode.TokenSpec{Asset: asset, Name: options.DevnetTestTokenDisplay, Symbol: options.DevnetTestTokenSymbol,
				Decimals: options.DevnetTestTokenDecimals}
		default:
			continue // a token of the user's: not the devnet's to deploy
		}
		funding := satAddMul(0, devnetTokenDrips, t.Amount)
		dt := devnetToken{spec: spec, sbtc: t.Name == "sbtc", perKey: funding, treasury: funding}
		if o.Devnet.Treasury {
			below, _, _ := settings.Refill(t.RefillBelow, t.RefillAmount, t.Amount) // checked by Validate
			dt.perKey = satAddMul(below, 10, t.Amount)
		}
		out = append(out, dt)
	}
	return out, nil
}

// devnetTokenDrips is how many drips of each token a devnet key starts
// with: a million (1,000 sBTC at the devnet's drip).
const devnetTokenDrips = 1_000_000
