package options

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// Node is the Stacks nodes the faucet reads from and sends through.
type Node struct {
	// URLs are the nodes of one chain; reads go to the best, broadcasts to
	// all (see nodepool).
	URLs    URLList
	Timeout time.Duration
	// ChainID, when set, refuses a node reporting another chain id.
	ChainID uint
	// HeadersFile holds header lines sent with every node request, such
	// as the x-api-key of a rate-limited public API. It is read at
	// start-up only: the operator rolls the pod when its Secret changes.
	HeadersFile string
	// PollInterval is how often the engine reads the node's tip while no
	// transaction is in flight, and how often the node pool probes each
	// node; BusyPollInterval is the engine's cadence while one is, or
	// drips wait for a slot. Together they are most of the faucet's
	// requests to a node, so a rate-limited gateway needs them slower.
	PollInterval, BusyPollInterval time.Duration
}

// Bounds of the poll cadences: faster than MinPollInterval only loads the
// node; slower than MaxPollInterval, readiness, nonce repairs and
// confirmations would lag the chain by several blocks.
const (
	MinPollInterval = 50 * time.Millisecond
	MaxPollInterval = time.Minute
)

func defaultNode() Node {
	return Node{Timeout: node.DefaultTimeout, PollInterval: settings.PollInterval, BusyPollInterval: settings.BusyPollInterval}
}

// BindFlags binds --node-url, --node-timeout, --node-poll-interval,
// --node-busy-poll-interval, --chain-id and --node-headers-file.
func (o *Node) BindFlags(fs *Flags) {
	fs.Var(&o.URLs, "node-url", "Stacks node RPC URL, e.g. http://stacks-node:20443; comma-separated or repeated for several nodes of one chain: reads go to a healthy node at the highest tip, broadcasts to all")
	fs.Duration(&o.Timeout, "node-timeout", "timeout of each node RPC call")
	fs.Duration(&o.PollInterval, "node-poll-interval", "how often the faucet reads the node's tip (/v2/info) while no transaction is in flight, and how often it probes each node's health (50ms..1m); raise it against a rate-limited gateway such as Hiro's API, at the cost of noticing new blocks later")
	fs.Duration(&o.BusyPollInterval, "node-busy-poll-interval", "how often the faucet reads the node's tip while a transaction is in flight or drips wait for a key (50ms up to --node-poll-interval); raise it against a rate-limited gateway, at the cost of later confirmations")
	fs.Uint(&o.ChainID, "chain-id", "refuse a node reporting another chain id (0 = accept any testnet id)")
	fs.String(&o.HeadersFile, "node-headers-file", "file of HTTP header lines \"Name: value\" sent with every request to the Stacks node(s), e.g. x-api-key: <key> for Hiro's API (values are never logged)")
}

// Headers reads --node-headers-file: nil when it is not set. Errors name
// the flag, the file and the line, never a value.
func (o *Node) Headers() (http.Header, error) {
	if o.HeadersFile == "" {
		return nil, nil
	}
	h, err := rpcclient.ReadHeadersFile(o.HeadersFile)
	if err != nil {
		return nil, fmt.Errorf("--node-headers-file: %w", err)
	}
	return h, nil
}

func (o *Node) validate() error {
	if o.ChainID > 0xffffffff {
		return fmt.Errorf("--chain-id %d does not fit in 32 bits", o.ChainID)
	}
	// The engine reads 0 as "use the default"; on the command line it
	// would mean node calls without any timeout (a hung node would then
	// stall the engine's poll loop for good).
	if o.Timeout <= 0 {
		return fmt.Errorf("--node-timeout must be positive, got %s", o.Timeout)
	}
	if err := o.validatePolls(); err != nil {
		return err
	}
	for _, u := range o.URLs {
		if err := needScheme("--node-url", u); err != nil {
			return err
		}
	}
	_, err := o.Headers()
	return err
}

// validatePolls checks the poll cadences. The engine would quietly read
// a busy cadence slower than the idle one as the idle one; refusing it
// keeps what the flags say and what the faucet does the same.
func (o *Node) validatePolls() error {
	for _, p := range []struct {
		flag string
		d    time.Duration
	}{{"--node-poll-interval", o.PollInterval}, {"--node-busy-poll-interval", o.BusyPollInterval}} {
		if p.d < MinPollInterval || p.d > MaxPollInterval {
			return fmt.Errorf("%s must be %s..%s, got %s", p.flag, MinPollInterval, MaxPollInterval, p.d)
		}
	}
	if o.BusyPollInterval > o.PollInterval {
		return fmt.Errorf("--node-busy-poll-interval %s is above --node-poll-interval %s: the faucet polls at least as often while a transaction is in flight; lower it or raise --node-poll-interval",
			o.BusyPollInterval, o.PollInterval)
	}
	return nil
}

// Keys are the faucet's keys: the distributors, and the treasury that
// tops them up.
type Keys struct {
	File         string
	TreasuryFile string
	// RefillBelow and RefillAmount are µSTX (0: the engine's defaults).
	RefillBelow, RefillAmount uint64
}

// BindFlags binds --key-file, --treasury-key-file, --refill-below and
// --refill-amount.
func (o *Keys) BindFlags(fs *Flags) {
	fs.String(&o.File, "key-file", "file with one or more hex private keys (newline or comma separated)")
	fs.String(&o.TreasuryFile, "treasury-key-file", "file with one hex private key: the treasury, which tops up the faucet keys (never pays drips) so an operator funds a single address")
	fs.Uint64(&o.RefillBelow, "refill-below", "with a treasury: refill a faucet key whose available µSTX (balance minus in-flight spends) falls below this (0 = 20 default drips' worth, 20 × (--amount + --fee-fallback))")
	fs.Uint64(&o.RefillAmount, "refill-amount", "with a treasury: µSTX per refill (0 = 10 × --refill-below); must be at least --refill-below so that one refill lifts a key above the threshold")
}

// hasTreasury reports whether a treasury is configured or generated.
func (o *Keys) hasTreasury(d Devnet) bool { return o.TreasuryFile != "" || d.On && d.Treasury }

func (o *Keys) validate(hasTreasury bool, a Amounts, f Fees) error {
	if !hasTreasury && (o.RefillBelow != 0 || o.RefillAmount != 0) {
		return errors.New("--refill-below and --refill-amount need a treasury: --treasury-key-file (or --devnet-treasury)")
	}
	if _, _, err := o.Refills(a, f); err != nil {
		return fmt.Errorf("--refill-below/--refill-amount: %w", err)
	}
	return nil
}

// Refills are the refill flags with the defaults applied: the µSTX
// threshold below which a key is topped up, and the top-up.
func (o *Keys) Refills(a Amounts, f Fees) (below, amount uint64, err error) {
	return settings.Refill(o.RefillBelow, o.RefillAmount, settings.DripCost(a.Default, f.Fallback))
}
