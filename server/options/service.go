package options

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/settings"
)

// Store is where the faucet keeps its state.
type Store struct {
	// DSN is an SQLite file, a postgres:// URI or "memory"; "" is
	// DefaultStorePath, or memory with --devnet.
	DSN              string
	HistoryRetention time.Duration
}

// Store defaults: a file in the working directory keeps state across
// restarts; the throwaway devnet needs none.
const (
	DefaultStorePath        = "faucet.db"
	DefaultHistoryRetention = 30 * 24 * time.Hour
	StoreMemory             = "memory"
)

func defaultStore() Store { return Store{HistoryRetention: DefaultHistoryRetention} }

// BindFlags binds --store and --history-retention.
func (o *Store) BindFlags(fs *Flags) {
	fs.String(&o.DSN, "store", "where the faucet keeps nonces, limits and history: an SQLite file PATH, a postgres:// URI (shared by replicas), or memory (lost at exit); default "+DefaultStorePath+", or memory with --devnet")
	fs.Duration(&o.HistoryRetention, "history-retention", "how long the drip history is kept")
}

func (o *Store) validate() error {
	if o.HistoryRetention <= 0 {
		return fmt.Errorf("--history-retention must be positive, got %s", o.HistoryRetention)
	}
	return nil
}

// Resolved is the store the flags name, with the default filled in.
func (o *Store) Resolved(devnet bool) string {
	switch {
	case o.DSN != "":
		return o.DSN
	case devnet:
		return StoreMemory
	}
	return DefaultStorePath
}

// HTTP is the HTTP server and what the page shows.
type HTTP struct {
	Listen         string
	StatusCacheTTL time.Duration
	ExplorerTxURL  string
	LowDrips       int
	// StallAfter is how long without a new Stacks block before the faucet
	// reports the chain stalled; 0 never does.
	StallAfter time.Duration
	// ShutdownDelay is the lame duck after SIGTERM (server.ServeLameDuck).
	ShutdownDelay time.Duration
	// MCP serves the Model Context Protocol endpoint at /mcp.
	MCP bool
	// PeerListen is the replicas' internal listener (BTC drips forwarded
	// to the replica holding the Bitcoin key); PeerURL where the others
	// reach it ("": from POD_IP or the host name, and PeerListen's port).
	PeerListen, PeerURL string
}

// PeerPort is the peer listener's default port; PodIPEnv the variable
// the operator sets to the pod's IP (the default --peer-url's host).
const (
	PeerPort = 3998
	PodIPEnv = "FAUCET_POD_IP"
)

// DefaultStallAfter is --stall-after's default. A Nakamoto testnet makes
// a Stacks block every few seconds while transactions flow and at least
// one per tenure, that is per Bitcoin block (10 min on average); gaps
// between Bitcoin blocks past 30 min are rare (about one in twenty at a
// 10-minute mean) and far past the wait a drip's user accepts, so a
// shorter default would cry wolf at ordinary gaps and a longer one leave
// users waiting unwarned.
const DefaultStallAfter = 30 * time.Minute

func defaultHTTP() HTTP {
	return HTTP{Listen: fmt.Sprintf(":%d", settings.Port), StatusCacheTTL: settings.StatusCacheTTL,
		ExplorerTxURL: settings.ExplorerTxURL, LowDrips: settings.LowDrips, StallAfter: DefaultStallAfter, MCP: true,
		PeerListen: fmt.Sprintf(":%d", PeerPort)}
}

// BindFlags binds --listen, --status-cache-ttl, --explorer-tx-url,
// --low-drips, --stall-after, --shutdown-delay and --mcp.
func (o *HTTP) BindFlags(fs *Flags) {
	fs.String(&o.Listen, "listen", "address the HTTP server listens on")
	fs.Duration(&o.StatusCacheTTL, "status-cache-ttl", "how long node reads for the status endpoint are cached")
	fs.String(&o.ExplorerTxURL, "explorer-tx-url", "explorer link the web page shows for a drip; {txid} is replaced by the 0x txid")
	fs.Int(&o.LowDrips, "low-drips", "report the faucet as low on funds when fewer default drips than this are left")
	fs.Duration(&o.StallAfter, "stall-after", "how long without a new Stacks block before the faucet reports the chain stalled: state stalled in /faucet/v1/info and on the page, and faucet_stacks_tip_age_seconds past faucet_stacks_stall_after_seconds for the FaucetChainStalled alert; drips are still accepted and /readyz stays ready. Nakamoto makes a block every few seconds while transactions flow and at least one per Bitcoin block, whose gaps rarely pass 30m (0 = never)")
	fs.Duration(&o.ShutdownDelay, "shutdown-delay", "after SIGTERM, answer /readyz with 503 and keep serving this long before draining, so load balancers and the Service's endpoints stop sending first (0 = drain at once); the operator sets it from the readiness probe")
	fs.String(&o.PeerListen, "peer-listen", "address of the listener the other replicas forward BTC drips to (the replica holding the Bitcoin key pays them; requests signed with a key derived from it); used with a Postgres store and BTC (\"\" = off: a replica without the key answers BTC drips 503)")
	fs.String(&o.PeerURL, "peer-url", "URL the other replicas reach this replica's --peer-listen at (default: http://$FAUCET_POD_IP:<port>, which the operator sets to the pod's IP, else http://<host name>:<port>)")
	fs.Bool(&o.MCP, "mcp", "serve the Model Context Protocol endpoint at /mcp (streamable HTTP), so agents can ask for drips through the same checks and limits as HTTP clients")
}

// validate checks the web page's settings.
func (o *HTTP) validate() error {
	if err := o.validatePeer(); err != nil {
		return err
	}
	u := o.ExplorerTxURL
	if !strings.Contains(u, "{txid}") || !(strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")) {
		return fmt.Errorf("--explorer-tx-url %q: want an http(s) URL containing {txid}", u)
	}
	if o.LowDrips < 1 {
		return fmt.Errorf("--low-drips must be at least 1, got %d", o.LowDrips)
	}
	if o.ShutdownDelay < 0 {
		return fmt.Errorf("--shutdown-delay must not be negative, got %s", o.ShutdownDelay)
	}
	if o.StallAfter < 0 {
		return fmt.Errorf("--stall-after must not be negative (0 = never report a stall), got %s", o.StallAfter)
	}
	return nil
}

// Log is where and how the faucet logs.
type Log struct {
	Level, Format string
}

func defaultLog() Log { return Log{Level: "info", Format: "json"} }

// BindFlags binds --log-level and --log-format.
func (o *Log) BindFlags(fs *Flags) {
	fs.String(&o.Level, "log-level", "log level: debug, info, warn, error")
	fs.String(&o.Format, "log-format", "log format: json or text")
}

func (o *Log) validate() error {
	_, err := o.Logger()
	return err
}

// Logger is the logger the flags describe, writing to stderr.
func (o *Log) Logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.Level)); err != nil {
		// slog's own message ("level string …: unknown name") names
		// neither the flag's choices nor that offsets like info+2 exist.
		return nil, fmt.Errorf("--log-level: unknown level %q: want debug, info, warn or error", o.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.Format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", o.Format)
}

// Devnet runs an embedded simulated Stacks node (and a btcd) with
// generated, funded keys.
type Devnet struct {
	On        bool
	Keys      int
	BlockTime time.Duration
	Treasury  bool
	// SBTC deploys sBTC and turns it on; TestToken deploys a second
	// token, tUSD, and turns it on; BTC runs a btcd and turns BTC on.
	SBTC, TestToken, BTC bool
	BTCBlockTime         time.Duration
}

func defaultDevnet() Devnet {
	return Devnet{Keys: 4, BlockTime: 2 * time.Second, SBTC: true, TestToken: true, BTC: true, BTCBlockTime: 10 * time.Second}
}

// BindFlags binds --devnet and the flags that shape it.
func (o *Devnet) BindFlags(fs *Flags) {
	fs.Bool(&o.On, "devnet", "run an embedded simulated node with generated, funded keys")
	fs.Int(&o.Keys, "devnet-keys", "with --devnet: how many faucet keys to generate")
	fs.Duration(&o.BlockTime, "block-time", "with --devnet: block interval of the embedded node")
	fs.Bool(&o.Treasury, "devnet-treasury", "with --devnet: generate a funded treasury key and start the faucet keys with little funding, so refills are visible")
	fs.Bool(&o.SBTC, "devnet-sbtc", "with --devnet: deploy an sBTC token, name it in /v2/pox as an Epoch 4.0 node does, fund the keys with it and turn the sBTC faucet on (false: no sBTC)")
	fs.Bool(&o.TestToken, "devnet-test-token", "with --devnet: deploy a second SIP-010 token, tUSD (a 6-decimal test stablecoin), fund the keys with it and drip it as "+DevnetTestTokenName)
	fs.Bool(&o.BTC, "devnet-btc", "with --devnet: run a btcd regtest node (bin/btcd, $FAUCET_BTCD or btcd on PATH) and turn the BTC faucet on")
	fs.Duration(&o.BTCBlockTime, "btc-block-time", "with --devnet: how often the devnet's btcd mines a block")
}

// errBTCBlockTime is the devnet's rule for its btcd's pace.
var errBTCBlockTime = errors.New("--btc-block-time must be positive")

// validatePeer checks --peer-listen and --peer-url.
func (o *HTTP) validatePeer() error {
	if o.PeerListen != "" {
		if _, port, err := net.SplitHostPort(o.PeerListen); err != nil || port == "" {
			return fmt.Errorf("--peer-listen %q: want host:port or :port", o.PeerListen)
		}
	}
	if o.PeerURL != "" {
		u, err := url.Parse(o.PeerURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--peer-url %q: want an http(s) URL such as http://10.0.0.7:%d", o.PeerURL, PeerPort)
		}
	}
	return nil
}

// AdvertisedPeerURL is where the other replicas reach this one, listening
// on ln: --peer-url, else the pod's IP (FAUCET_POD_IP, set by the
// operator), the listener's own IP when it has one, or the host name; and
// the listener's port.
func (o *HTTP) AdvertisedPeerURL(getenv func(string) string, ln net.Addr) string {
	if o.PeerURL != "" {
		return strings.TrimSuffix(o.PeerURL, "/")
	}
	ip, port, _ := net.SplitHostPort(ln.String())
	host := getenv(PodIPEnv)
	if host == "" {
		if a := net.ParseIP(ip); a != nil && !a.IsUnspecified() {
			host = ip
		} else {
			host, _ = os.Hostname()
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
