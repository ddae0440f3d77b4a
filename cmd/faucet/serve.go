package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/bits"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/stxfaucet/faucet-operator/server"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/nodepool"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/settings"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// serveUsage heads `faucet serve -h`.
const serveUsage = `usage: faucet serve --node-url URL --key-file FILE [flags]
       faucet serve --devnet [flags]

Every flag can also be set as FAUCET_<NAME> (e.g. FAUCET_NODE_URL); a flag on
the command line wins.
`

// serveFlagGroups order `faucet serve -h` by concern, as the options'
// bindings name them.
func serveFlagGroups() []flagGroup {
	var out []flagGroup
	for _, g := range options.FlagGroups() {
		out = append(out, flagGroup{title: g.Title, names: g.Names})
	}
	return out
}

// newServeFlags binds serve's flags to o.
func newServeFlags(o *options.Serve) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	o.BindFlags(options.NewFlags(fs))
	fs.Usage = usageFunc(fs, serveUsage, serveFlagGroups()...)
	return fs
}

func runServe(ctx context.Context, clk procClock, args []string, stdout io.Writer) error {
	o := options.Defaults()
	fs := newServeFlags(&o)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	// Everything up to here and in Validate is the command line's fault
	// (exit 2); what fails from here on fails while running (exit 1).
	if err := o.Validate(); err != nil {
		return flagError(fs, err)
	}
	logger, err := o.Log.Logger()
	if err != nil {
		return flagError(fs, err)
	}
	r := &serveRun{o: &o, clk: clk, log: logger, stdout: stdout, metrics: server.NewMetrics(prometheus.NewRegistry())}
	defer r.cleanup()
	if err := r.setUp(ctx); err != nil {
		if errors.Is(err, errUsage) {
			return flagError(fs, err)
		}
		return err
	}
	return r.run(ctx)
}

// errUsage marks a set-up error that is the command line's fault.
var errUsage = errors.New("usage")

// serveRun is one run of `faucet serve`: what it starts, in order, and
// stops when it ends.
type serveRun struct {
	o       *options.Serve
	clk     procClock
	log     *slog.Logger
	stdout  io.Writer
	metrics *server.Metrics
	stops   []func()

	keys      []*stacks.PrivateKey
	treasury  *stacks.PrivateKey
	btcKey    *bitcoin.PrivateKey
	btcNodes  *nodepool.BTCPool
	devnetURL string
	client    *nodepool.Pool
	state     *engineState
	engine    *faucet.Faucet
	btc       *btcfaucet.Faucet
	checks    *guard.Chain
	signIn    *identity.Service // nil: no sign-in
	tiers     identity.Tiers
}

// cleanup stops what the run started, last first.
func (r *serveRun) cleanup() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
}

// setUp starts the chains (the devnet's, or reads the keys for a real
// node), opens the state and builds the engines and checks.
func (r *serveRun) setUp(ctx context.Context) error {
	steps := []func(context.Context) error{r.startChains, r.connect, r.openState, r.buildEngine, r.buildBTC, r.buildChecks, r.buildSignIn}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// startChains starts the devnet's nodes, or reads the keys for real ones.
func (r *serveRun) startChains(ctx context.Context) error {
	o := r.o
	if !o.Devnet.On {
		var err error
		if r.keys, err = readKeyFile(o.Keys.File); err != nil {
			return err
		}
		if o.Keys.TreasuryFile != "" {
			if r.treasury, err = readTreasuryKeyFile(o.Keys.TreasuryFile); err != nil {
				return err
			}
		}
		if o.BTC.On() {
			r.btcKey, err = readBTCKeyFile(o.BTC.KeyFile, o.BTC.Network)
		}
		return err
	}
	d, err := startEmbeddedDevnet(ctx, r.clk, o, r.log)
	if err != nil {
		return err
	}
	r.keys, r.treasury, r.devnetURL = d.keys, d.treasury, d.url
	o.Node.URLs = options.URLList{d.url}
	if o.Devnet.BTC {
		var stop func()
		if r.btcKey, stop, err = startDevnetBTC(ctx, r.clk, o, r.log); err != nil {
			return err
		}
		r.stops = append(r.stops, stop)
	}
	return nil
}

// connect makes the Stacks nodes' pool and, off the devnet, checks that
// each URL is a Stacks node's RPC; it probes them once so that the first
// reads go to a node in rotation.
func (r *serveRun) connect(ctx context.Context) error {
	opts := []rpcclient.Option{rpcclient.WithTimeout(r.o.Node.Timeout), rpcclient.WithObserver(r.metrics.ObserveNodeCall),
		rpcclient.WithUserAgent("faucet-operator/" + version), rpcclient.WithClock(r.clk)}
	// Read at start-up only: the operator rolls the pod when the file's
	// Secret changes.
	headers, err := r.o.Node.Headers()
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if headers != nil {
		opts = append(opts, rpcclient.WithHeader(headers))
	}
	var clients []*node.Client
	for _, u := range r.o.Node.URLs {
		c, err := node.New(u, opts...)
		if err != nil {
			return fmt.Errorf("%w: --node-url: %w", errUsage, err)
		}
		if !r.o.Devnet.On {
			if err := checkNode(ctx, c, r.log); err != nil {
				return err
			}
		}
		clients = append(clients, c)
	}
	pool, err := nodepool.New(stacksPoolConfig(&r.o.Node, clients, r.clk, r.log.With("component", "nodes")))
	if err != nil {
		return fmt.Errorf("%w: --node-url: %w", errUsage, err)
	}
	probeCtx, cancel := context.WithTimeout(ctx, r.o.Node.Timeout)
	defer cancel()
	pool.Probe(probeCtx)
	r.client = pool
	return nil
}

// openState opens the store and closes it when the run ends.
func (r *serveRun) openState(ctx context.Context) error {
	state, err := openState(ctx, r.clk, r.o.Store, r.o.Devnet.On, r.log)
	if err != nil {
		return err
	}
	r.state = state
	r.stops = append(r.stops, func() {
		if cerr := state.close(); cerr != nil {
			r.log.Warn("closing the store failed", "err", cerr)
		}
	})
	return nil
}

// buildEngine builds the Stacks engine.
func (r *serveRun) buildEngine(context.Context) error {
	st := faucet.State{Journal: r.state.journal, History: r.state.history, Shared: r.state.owner != nil}
	cfg, err := engineConfig(r.o, r.clk, r.keys, r.treasury, r.client, st, r.log)
	if err != nil {
		return err
	}
	r.engine, err = faucet.New(cfg)
	return err
}

// buildBTC builds the BTC faucet when it is on.
func (r *serveRun) buildBTC(ctx context.Context) error {
	if r.btcKey == nil {
		return nil
	}
	pool, err := btcPool(ctx, r.clk, &r.o.BTC, r.log.With("component", "btc-nodes"))
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	r.btcNodes = pool
	cfg := btcConfig(&r.o.BTC, r.clk, r.btcKey, pool, r.state.journal, r.state.owner != nil, r.log.With("component", "btc"))
	if r.btc, err = btcfaucet.New(cfg); err != nil {
		return fmt.Errorf("btc: %w", err)
	}
	return nil
}

// buildChecks builds the abuse checks.
func (r *serveRun) buildChecks(context.Context) error {
	// Replicas share the keys, so they derive the same secret and accept
	// each other's challenges.
	cfg := r.o.Abuse.GuardConfig(r.engine.DeriveSecret("proof-of-work challenges"))
	cfg.Accounts, cfg.Spent, cfg.Logger, cfg.Clock = r.client, r.state.spent, r.log.With("component", "guard"), r.clk
	// Failed API tokens count in the limits store: shared by replicas.
	cfg.Failures = r.state.limiter
	checks, err := guard.New(cfg)
	r.checks = checks
	return err
}

// buildSignIn builds sign-in, when it is on, and the tiers.
func (r *serveRun) buildSignIn(context.Context) error {
	r.tiers = r.o.SignIn.TierSet()
	svc, warn, err := r.o.SignIn.Service(r.o.Limits.TrustedProxyHops > 0, r.clk, r.log.With("component", "sign-in"))
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if warn != "" {
		r.log.Warn(warn)
	}
	r.signIn = svc
	return nil
}

// run listens and serves until ctx ends.
func (r *serveRun) run(ctx context.Context) error {
	o := r.o
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", o.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.HTTP.Listen, err)
	}
	sw, err := openSwitches(o)
	if err != nil {
		return err
	}
	if err := r.logStart(ln.Addr(), sw.Load()); err != nil {
		return err
	}
	warnUnknownSwitches := func(st switches.State) {
		if err := o.CheckSwitches(st); err != nil {
			r.log.Warn("the switches name an asset this faucet does not drip; that name is ignored", "err", err)
		}
	}
	warnUnknownSwitches(sw.Load())
	sw.OnChange(warnUnknownSwitches)
	btc, peers, err := r.btcForHTTP()
	if err != nil {
		return err
	}
	h := server.New(server.Config{
		Faucet: r.engine, Node: r.client, Txs: r.client, Nodes: r.client, Guard: r.checks, Version: version, Commit: commit,
		BTC: btc, BTCNodes: nodeHealthOrNil(r.btcNodes),
		Limits: guard.NewRateLimits(o.RateLimits(), r.state.limiter, r.clk), Switches: sw, MCP: o.HTTP.MCP, Clock: r.clk,
		Tiers: &r.tiers, SignIn: signInOrNil(r.signIn),
		ExplorerTxURL: o.HTTP.ExplorerTxURL, LowDrips: o.HTTP.LowDrips, AssetLowDrips: o.LowDrips(), StallAfter: o.HTTP.StallAfter, Devnet: o.Devnet.On,
		TrustedProxyHops: o.Limits.TrustedProxyHops, StatusCacheTTL: o.HTTP.StatusCacheTTL, Metrics: r.metrics, Logger: r.log,
	})
	// The engines outlive the HTTP server's graceful shutdown: drips still
	// in flight at SIGTERM need their keys (and, on a shared store, their
	// ownership) until they have answered.
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	return supervise(ctx, r.log,
		task{"faucet engine", func(context.Context) error { return r.engine.Run(engineCtx) }},
		task{"stacks nodes", func(context.Context) error { return r.client.Run(engineCtx) }},
		task{"btc faucet", func(context.Context) error { return btcTask(r.btc)(engineCtx) }},
		task{"bitcoin nodes", func(context.Context) error { return btcNodesTask(r.btcNodes)(engineCtx) }},
		// At SIGTERM (ctx) the replica leaves the key membership at once,
		// so the others count their shares without it, and keeps its keys
		// until the engines stop (engineCtx: the lame duck over, every
		// drip answered); one whose share falls to none drains as long
		// as the lame duck would before giving its keys up.
		task{"key ownership", func(ctx context.Context) error {
			return r.state.keepOwnership(engineCtx, ctx.Done(), o.HTTP.ShutdownDelay, r.clk, r.engine, r.btc, r.log)
		}},
		task{peers.name, func(context.Context) error { return peers.run(engineCtx) }},
		task{"http server", func(ctx context.Context) error {
			defer stopEngine()
			return server.ServeLameDuck(ctx, r.clk, ln, h, r.log, o.HTTP.ShutdownDelay)
		}},
		task{"store maintenance", r.state.background},
		task{"api tokens reload", func(ctx context.Context) error { r.checks.Run(ctx); return nil }},
		task{"switches file", func(ctx context.Context) error {
			if o.Abuse.SwitchesFile != "" {
				sw.Follow(ctx, r.clk, o.Abuse.SwitchesFile, switchesPoll, nil, r.log)
			}
			<-ctx.Done()
			return nil
		}},
	)
}

// switchesPoll is how often the switches file is read: a stat-and-read of
// a few bytes, and the kubelet updates a projected ConfigMap within a
// minute anyway.
const switchesPoll = 2 * time.Second

// openSwitches returns the switches in force at start: the flags', or the
// switches file's (Validate has read it once already).
func openSwitches(o *options.Serve) (*switches.Set, error) {
	if o.Abuse.SwitchesFile == "" {
		return switches.New(o.Abuse.Switches()), nil
	}
	st, err := switches.ReadFile(o.Abuse.SwitchesFile)
	if err != nil {
		return nil, fmt.Errorf("--switches-file: %w", err)
	}
	return switches.New(st), nil
}

// logStart says what the faucet serves with the switches in force at
// start, and on the devnet how to try it.
func (r *serveRun) logStart(addr net.Addr, sw switches.State) error {
	o, f := r.o, r.engine
	r.log.Info("faucet starting", "version", version, "listen", addr.String(), "page", pageURL(addr),
		"node", r.client.URL(), "store", r.state.kind, "addresses", f.Addresses(),
		"pow_difficulty", r.checks.Difficulty(), "api_tokens", r.checks.TokenCount())
	if msg, why := switchedMessage("STX faucet", sw, "stx"); why != nil {
		r.log.Info(msg, why...)
	}
	if ts, ok := f.Treasury(); ok {
		r.log.Info("treasury refills faucet keys", "treasury", ts.Address, "refill_below", ts.RefillBelow, "refill_amount", ts.RefillAmount)
	}
	limits := o.RateLimits()
	for _, t := range f.Tokens() {
		al := limits.Of(string(t.Name))
		id := t.Asset.String()
		if t.FromPoX {
			id = "the contract the node names in /v2/pox (" + settings.SourcePoX + ")" // logged again once found
		}
		msg, why := switchedMessage("token faucet", sw, string(t.Name))
		r.log.Info(msg, append(why, "asset", string(t.Name), "asset_identifier", id,
			"amount", t.Amount, "limit_address", options.LimitString(al.PerAddress), "limit_ip", options.LimitString(al.PerIP))...)
	}
	if r.btc != nil {
		am, al := r.btc.Amounts(), limits.Of("btc")
		msg, why := switchedMessage("BTC faucet", sw, "btc")
		r.log.Info(msg, append(why, "network", r.btc.Network().String(), "address", r.btc.Address().String(), "btc_node", r.btcNodes.URL(),
			"amount_sats", am.Default, "large_sats", am.Large, "xlarge_sats", am.XLarge,
			"limit_address", options.LimitString(al.PerAddress), "limit_ip", options.LimitString(al.PerIP))...)
	}
	for _, name := range slices.Sorted(maps.Keys(limits.Budgets)) {
		if b := limits.Budgets[name]; b.On() {
			r.log.Info("budget", "asset", name, "amount", b.Amount, "per", b.Per.String(), "reserve", b.Reserve, "target", b.Target)
		} else {
			r.log.Warn("no budget: nothing bounds what the faucet pays out of this asset", "asset", name)
		}
	}
	if r.signIn != nil {
		r.log.Info("sign-in on", "issuer", r.signIn.Issuer(), "tiers", len(r.tiers.SignedIn), "anonymous_drips", !r.tiers.AnonymousOff,
			"anonymous_budget_share", r.tiers.Anonymous.Share())
	}
	if o.Devnet.On {
		b, err := r.newDevnetBanner(addr, sw)
		if err != nil {
			return err
		}
		b.write(r.stdout)
		if ts, ok := f.Treasury(); ok {
			fmt.Fprintf(r.stdout, "  treasury:         %s (refills a faucet key below %d µSTX with %d µSTX)\n\n", ts.Address, ts.RefillBelow, ts.RefillAmount)
		}
	}
	return nil
}

// Why an asset the start-up log names is not dripping.
const (
	offReason       = "turned off by its operator (--disable-asset or the switches file): its routes answer 403"
	suspendedReason = "suspended by its operator (--suspend, --suspend-asset or the switches file): its drips answer 403 until resumed"
)

// switchedMessage is the start-up line of an asset ("<what> on", "off" or
// "suspended") and, as log attributes, why it is not on (none when it is).
func switchedMessage(what string, sw switches.State, asset string) (msg string, why []any) {
	switch {
	case sw.Off(asset):
		return what + " off", []any{"why", offReason}
	case sw.Suspended(asset):
		return what + " suspended", []any{"why", suspendedReason}
	}
	return what + " on", nil
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

// readKeyFile loads the keys of --key-file.
func readKeyFile(path string) ([]*stacks.PrivateKey, error) {
	return readKeys("--key-file", path)
}

// readTreasuryKeyFile loads the treasury key: exactly one.
func readTreasuryKeyFile(path string) (*stacks.PrivateKey, error) {
	keys, err := readKeys("--treasury-key-file", path)
	if err != nil {
		return nil, err
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("--treasury-key-file %s: want exactly one key, found %d", path, len(keys))
	}
	return keys[0], nil
}

// readKeys loads the keys of the file given to flagName; errors name the
// flag, the file and the key's position only, never key material.
func readKeys(flagName, path string) ([]*stacks.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	keys, err := stacks.ParsePrivateKeys(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flagName, path, err)
	}
	return keys, nil
}

// satAddMul is a + b×c, saturating at the largest uint64.
func satAddMul(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(b, c)
	if hi != 0 || lo+a < lo {
		return math.MaxUint64
	}
	return lo + a
}

// devnetTokenFunding is the token base units each generated devnet key
// starts with: 1,000 whole tokens of 8 decimals, ten million devnet drips.
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

// signInOrNil keeps a nil service a nil interface.
func signInOrNil(s *identity.Service) server.SignIn {
	if s == nil {
		return nil
	}
	return s
}
