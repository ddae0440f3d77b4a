// Package server is the faucet's HTTP surface: the Hiro-compatible drip and
// status endpoints, health probes and Prometheus metrics. New builds the
// handler from its dependencies; Run and Serve run it with production
// timeouts and a graceful shutdown.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/guard"
	"github.com/stxfaucet/faucet-operator/server/identity"
	"github.com/stxfaucet/faucet-operator/server/settings"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// StatusNode is the node RPC the status endpoint reads; *node.Client
// implements it.
type StatusNode interface {
	Info(ctx context.Context) (*node.Info, error)
	PoX(ctx context.Context) (*node.PoXInfo, error)
}

// TxNode is the node RPC the drip status endpoint reads; *node.Client
// implements it.
type TxNode interface {
	Transaction(ctx context.Context, txid string) (*node.MinedTx, error)
	MempoolTx(ctx context.Context, txid string) (bool, error)
}

// Defaults for Config fields left zero.
const (
	// DefaultPort is the port `faucet serve` listens on and the operator's
	// pods and Services use: the port of the Hiro API.
	DefaultPort           = settings.Port
	DefaultStatusCacheTTL = settings.StatusCacheTTL
	// DefaultDripTimeout stays below ShutdownTimeout, so a drip in flight at
	// SIGTERM can finish before the server stops.
	DefaultDripTimeout = 25 * time.Second
	DefaultCORSOrigin  = "*"
	// DefaultExplorerTxURL is the page's explorer link; {txid} is the 0x txid.
	DefaultExplorerTxURL = settings.ExplorerTxURL
	// DefaultLowDrips: below this many default drips left the faucet reports "low".
	DefaultLowDrips = settings.LowDrips
)

// Config holds the handler's dependencies and settings.
type Config struct {
	// Faucet is the dispensing engine (a *faucet.Faucet). Required.
	Faucet Engine
	// Node serves the status endpoint. Required.
	Node StatusNode
	// Nodes, when set, reports each Stacks node's health in the info
	// document and the metrics.
	Nodes NodeHealth
	// BTCNodes, when set, reports each Bitcoin node's health likewise.
	BTCNodes NodeHealth
	// Txs answers the drip status endpoint's questions about transactions;
	// nil answers from the faucet's own records only.
	Txs TxNode
	// Guard runs the abuse checks before every drip; nil checks nothing.
	Guard *guard.Chain
	// Limits charges every drip the checks let through against the rate
	// limits; nil limits nothing.
	Limits *guard.RateLimits
	// BTC is the BTC faucet (a *btcfaucet.Faucet); nil answers its
	// endpoints with 403, as the incumbent does when BTC is off.
	BTC BTCFaucet
	// Switches are the operator's switches: suspend every drip or one
	// asset's, turn an asset off. They may change while the server runs;
	// nil is every asset on.
	Switches *switches.Set
	// MCP serves the Model Context Protocol endpoint at /mcp: the same
	// drips, checks and limits as the HTTP API, as tools for agents.
	MCP bool
	// Tiers are what each kind of requester gets (amount, limit, proof of
	// work, budget share); nil serves everyone as one anonymous tier with
	// the whole budget.
	Tiers *identity.Tiers
	// SignIn identifies people signed in through an OpenID Connect
	// provider (the page's session, bearer tokens); nil: no sign-in.
	SignIn SignIn

	// Devnet says the node is the embedded simulated one (`serve
	// --devnet`): no public explorer knows its transactions, so the page
	// links a drip to the faucet's own status instead.
	Devnet bool
	// ExplorerTxURL is the explorer link the page shows for a drip.
	ExplorerTxURL string
	// LowDrips is the number of default drips left below which the faucet
	// reports its state as "low"; AssetLowDrips overrides it per asset.
	LowDrips      int
	AssetLowDrips map[string]int
	// StallAfter is how long without a new Stacks block before the faucet
	// reports the chain stalled (info's state, the metrics); 0 never does.
	StallAfter time.Duration

	// Version and Commit appear in the status endpoint's server_version.
	Version string
	Commit  string

	// TrustedProxyHops is how many reverse proxies in front of the server
	// append to X-Forwarded-For; 0 ignores the header and uses the peer
	// address. See clientIP for the exact rule.
	TrustedProxyHops int

	// StatusCacheTTL is how long one node read serves the status endpoint.
	StatusCacheTTL time.Duration
	// DripTimeout bounds one drip, which runs to completion even if the
	// client goes away (a half-done broadcast must not lose its nonce or its
	// rate-limit charge). Keep it below the server's WriteTimeout.
	DripTimeout time.Duration

	// Metrics receives the server's metrics; nil uses a private registry.
	Metrics *Metrics
	Logger  *slog.Logger
	// CORSOrigin is sent as Access-Control-Allow-Origin on every response.
	CORSOrigin string
	// Clock dates drips, caches and rate-limit answers; nil is the real
	// clock.
	Clock clock.PassiveClock
}

// server carries the dependencies the handlers share.
type server struct {
	cfg Config
	catalogue
	log     *slog.Logger
	metrics *Metrics
	status  *statusCache
	treasury
	people
}

// New returns the faucet's HTTP handler. It panics when cfg lacks the faucet
// or the node, as http.Handle panics on a bad pattern: both are programming
// errors found at start-up.
func New(cfg Config) http.Handler {
	if cfg.Faucet == nil {
		panic("server: Config.Faucet is nil")
	}
	if cfg.Node == nil {
		panic("server: Config.Node is nil")
	}
	if cfg.StatusCacheTTL <= 0 {
		cfg.StatusCacheTTL = DefaultStatusCacheTTL
	}
	if cfg.DripTimeout <= 0 {
		cfg.DripTimeout = DefaultDripTimeout
	}
	if cfg.CORSOrigin == "" {
		cfg.CORSOrigin = DefaultCORSOrigin
	}
	if cfg.TrustedProxyHops < 0 {
		cfg.TrustedProxyHops = 0
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Commit == "" {
		cfg.Commit = "unknown"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ExplorerTxURL == "" {
		cfg.ExplorerTxURL = DefaultExplorerTxURL
	}
	if cfg.LowDrips <= 0 {
		cfg.LowDrips = DefaultLowDrips
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Limits == nil {
		cfg.Limits = guard.NewRateLimits(guard.Limits{}, nil, cfg.Clock)
	}
	cfg.Metrics.registerFaucet(cfg.Faucet, cfg.lowDrips, cfg.StallAfter)
	cfg.Metrics.registerBTC(cfg.BTC)
	if cfg.Guard != nil {
		cfg.Metrics.RegisterGuard(cfg.Guard)
	}
	if cfg.Nodes != nil {
		cfg.Metrics.nodes.set(cfg.Nodes)
	}
	if cfg.BTCNodes != nil {
		cfg.Metrics.btcNodes.set(cfg.BTCNodes)
	}

	s := &server{
		cfg:       cfg,
		catalogue: catalogue{assets: buildAssets(&cfg), switches: cfg.Switches},
		log:       cfg.Logger,
		metrics:   cfg.Metrics,
		status: newStatusCache(cfg.Node, cfg.StatusCacheTTL, cfg.Clock,
			"faucet-operator "+cfg.Version+" ("+cfg.Commit+")", cfg.Logger),
	}
	s.treasury = newTreasury(&s.cfg, &s.catalogue, cfg.Logger)
	s.people = people{signIn: cfg.SignIn, tiers: cfg.Tiers, log: cfg.Logger, apiTokens: cfg.Guard != nil && cfg.Guard.TokensConfigured()}
	cfg.Metrics.treasury.set(s)
	cfg.Metrics.setSuspended(s.assetNames(), s.suspended)
	cfg.Metrics.keys.setOff(s.turnedOff)
	cfg.Switches.OnChange(func(switches.State) {
		cfg.Metrics.setSuspended(s.assetNames(), s.suspended)
	})
	mux := http.NewServeMux()
	s.addRoutes(mux)
	return s.observe(s.cors(s.recoverPanics(s.reconnectWhileHandingOver(mux))))
}

// keysHandover is an engine that may be handing its keys over to another
// replica (*faucet.Faucet).
type keysHandover interface{ HandingKeysOver() bool }

// reconnectWhileHandingOver closes each client connection after its answer
// while the engine hands its keys over: a kept-alive connection would
// otherwise keep bringing drips to this replica after the Service has
// stopped sending it new ones, and once the keys are gone they would find
// none.
func (s *server) reconnectWhileHandingOver(h http.Handler) http.Handler {
	e, ok := s.cfg.Faucet.(keysHandover)
	if !ok {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.HandingKeysOver() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// lowDrips is asset's threshold of "low".
func (c *Config) lowDrips(asset faucet.Asset) int {
	if n, ok := c.AssetLowDrips[string(asset)]; ok && n > 0 {
		return n
	}
	return c.LowDrips
}

// errorBody is every non-2xx JSON answer. success and error are the
// incumbent's fields; the rest are additions clients may ignore.
type errorBody struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
	// Reason is a stable machine-readable code.
	Reason string `json:"reason,omitempty"`
	// Detail adds user-safe context to a fixed Error text.
	Detail string `json:"detail,omitempty"`
	// Help shows the supported form of a request.
	Help              string `json:"help,omitempty"`
	RetryAfterSeconds int64  `json:"retry_after_seconds,omitempty"`
	NextAllowedAt     string `json:"next_allowed_at,omitempty"`
}

// writeJSON writes v with status. Faucet answers are per-request, so the
// caller decides about caching headers.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalJSON(v)
	if err != nil {
		// Only our own fixed types are encoded; this is unreachable in practice.
		status = http.StatusInternalServerError
		b = []byte(`{"success":false,"error":"internal error"}`)
	}
	writeJSONBytes(w, status, b)
}

// marshalJSON is json.Marshal without HTML escaping: bodies are served as
// application/json with nosniff, and the help text's "&" should read as "&"
// in a terminal, not "\u0026".
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func writeJSONBytes(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, body errorBody) {
	body.Success = false
	writeJSON(w, status, body)
}
