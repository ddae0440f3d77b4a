package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server"
	"github.com/stxfaucet/faucet-operator/server/btcfaucet"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
)

// devnetBTCBlockTime is the devnet btcd's block interval.
const devnetBTCBlockTime = 10 * time.Second

// btcOptions turn on the BTC faucet: regtest, signet or testnet BTC paid
// from one key through a Bitcoin node's JSON-RPC (Bitcoin Core or btcd).
type btcOptions struct {
	rpcURL      string
	credsFile   string
	keyFile     string
	network     bitcoin.Network
	amounts     btcfaucet.Amounts
	startHeight int64
	fees        btcfaucet.Fees
	batchMax    int
	rpcTimeout  time.Duration

	// With --devnet: run a btcd regtest node beside the simulated Stacks
	// node when its binary can be found.
	devnet    bool
	blockTime time.Duration
	// publicURL is the node's URL without credentials, for logs.
	publicURL string
}

func (o *btcOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.rpcURL, "btc-rpc-url", "", "turn on the BTC faucet: the Bitcoin node's JSON-RPC URL (Bitcoin Core or btcd), e.g. http://127.0.0.1:18443; credentials may be in it (user:pass@) or in --btc-rpc-credentials-file; needs --btc-key-file")
	fs.StringVar(&o.credsFile, "btc-rpc-credentials-file", "", "file holding the node's RPC credentials as user:password (Bitcoin Core's .cookie format); re-read when the node answers 401")
	fs.StringVar(&o.keyFile, "btc-key-file", "", "file with the BTC faucet's private key (WIF or 64 hex digits) on its first line, optionally followed by its address, as `faucet keys generate --btc` prints it")
	o.network = bitcoin.Regtest
	fs.TextVar(&o.network, "btc-network", bitcoin.Regtest, "the Bitcoin network: regtest, signet or testnet (mainnet is refused)")
	fs.Int64Var(&o.amounts.Default, "btc-amount", btcfaucet.DefaultAmount, "satoshis per default BTC drip (v1 and v3)")
	fs.Int64Var(&o.amounts.Large, "btc-large-amount", btcfaucet.DefaultLargeAmount, "satoshis per v1 drip with large=true")
	fs.Int64Var(&o.amounts.XLarge, "btc-xlarge-amount", btcfaucet.DefaultXLargeAmount, "satoshis per v1 drip with xlarge=true")
	fs.Int64Var(&o.startHeight, "btc-start-height", 0, "first block scanned for the key's coins (set it near the key's first funding on signet or testnet: the faucet reads every block from here at start)")
	fs.Int64Var(&o.fees.Fallback, "btc-fee-rate", btcfaucet.DefaultFallbackFeeRate, "fee rate in sat/vB when the node has no estimate (btcd and a fresh regtest Core have none)")
	fs.Int64Var(&o.fees.Min, "btc-min-fee-rate", bitcoin.MinFeeRate, "lowest fee rate paid, sat/vB")
	fs.Int64Var(&o.fees.Max, "btc-max-fee-rate", btcfaucet.DefaultMaxFeeRate, "highest fee rate paid, sat/vB, whatever the node estimates")
	fs.IntVar(&o.batchMax, "btc-batch-max", btcfaucet.DefaultBatchMax, "most BTC drips one payout transaction pays, one output each (1 = every drip alone)")
	fs.DurationVar(&o.rpcTimeout, "btc-rpc-timeout", btcnode.DefaultTimeout, "timeout of each Bitcoin node RPC call")
	fs.BoolVar(&o.devnet, "devnet-btc", true, "with --devnet: run a btcd regtest node (bin/btcd, $FAUCET_BTCD or btcd on PATH) and turn the BTC faucet on")
	fs.DurationVar(&o.blockTime, "btc-block-time", devnetBTCBlockTime, "with --devnet: how often the devnet's btcd mines a block")
}

// on reports whether BTC flags turn the faucet on outside the devnet.
func (o *btcOptions) on() bool { return o.rpcURL != "" || o.keyFile != "" || o.credsFile != "" }

// validate checks the BTC flags that do not need the node.
func (o *btcOptions) validate(devnet bool) error {
	if devnet && o.on() {
		return errors.New("--devnet runs its own btcd: drop --btc-rpc-url, --btc-key-file and --btc-rpc-credentials-file (or --devnet-btc=false and use them against your own node)")
	}
	if !devnet && o.on() {
		switch {
		case o.rpcURL == "":
			return errors.New("--btc-key-file needs --btc-rpc-url, the Bitcoin node's JSON-RPC URL")
		case o.keyFile == "":
			return errors.New("--btc-rpc-url needs --btc-key-file, the BTC faucet's private key")
		}
	}
	if o.fees.Min < 1 || o.fees.Max < o.fees.Min || o.fees.Fallback < 1 {
		return fmt.Errorf("--btc-min-fee-rate %d, --btc-max-fee-rate %d and --btc-fee-rate %d: want 1 ≤ min ≤ max and a positive fallback", o.fees.Min, o.fees.Max, o.fees.Fallback)
	}
	if o.fees.Max > bitcoin.MaxFeeRate {
		return fmt.Errorf("--btc-max-fee-rate %d sat/vB is above the sanity cap of %d", o.fees.Max, bitcoin.MaxFeeRate)
	}
	if o.batchMax < 1 || o.batchMax > btcfaucet.MaxBatch {
		return fmt.Errorf("--btc-batch-max must be 1..%d, got %d", btcfaucet.MaxBatch, o.batchMax)
	}
	if o.rpcTimeout <= 0 {
		return fmt.Errorf("--btc-rpc-timeout must be positive, got %s", o.rpcTimeout)
	}
	if devnet && o.devnet && o.blockTime <= 0 {
		return fmt.Errorf("--btc-block-time must be positive, got %s", o.blockTime)
	}
	return nil
}

// readBTCKeyFile loads the BTC key: the first field of the first line that
// is not blank or a comment. An address after it must be the key's own,
// which catches a key file of another network or a pasted wrong pair. The
// key never appears in an error.
func readBTCKeyFile(path string, net bitcoin.Network) (*bitcoin.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--btc-key-file: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		key, err := bitcoin.ParsePrivateKey(fields[0], net)
		if err != nil {
			return nil, fmt.Errorf("--btc-key-file %s: %w", path, err)
		}
		if len(fields) > 1 && fields[1] != key.Address().String() {
			return nil, fmt.Errorf("--btc-key-file %s: the address after the key is %s, but the key's %s address is %s", path, shortField(fields[1]), net, key.Address())
		}
		return key, nil
	}
	return nil, fmt.Errorf("--btc-key-file %s: no key in it", path)
}

func shortField(s string) string {
	if len(s) > 90 {
		return s[:90] + "…"
	}
	return s
}

// btcClient is the node client of the BTC flags.
func (o *btcOptions) client(observe func(string, time.Duration, error)) (*btcnode.Client, error) {
	opts := []btcnode.Option{btcnode.WithTimeout(o.rpcTimeout), btcnode.WithUserAgent("faucet-operator/" + version)}
	if o.credsFile != "" {
		opts = append(opts, btcnode.WithCredentialsFile(o.credsFile))
	}
	if observe != nil {
		opts = append(opts, btcnode.WithObserver(observe))
	}
	c, err := btcnode.New(o.rpcURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("--btc-rpc-url: %w", err)
	}
	o.publicURL = c.URL()
	return c, nil
}

// newBTCFaucet builds the BTC faucet on client with key, its payouts in
// state's journal.
func (o *btcOptions) newBTCFaucet(key *bitcoin.PrivateKey, client *btcnode.Client, state *engineState, logger *slog.Logger) (*btcfaucet.Faucet, error) {
	f, err := btcfaucet.New(btcfaucet.Config{
		Key: key, Node: client, Journal: state.journal, Shared: state.owner != nil, Fees: o.fees, Amounts: o.amounts,
		StartHeight: o.startHeight, BatchMax: o.batchMax, Logger: logger.With("component", "btc"),
	})
	if err != nil {
		return nil, fmt.Errorf("btc: %w", err)
	}
	return f, nil
}

// btcTask runs the BTC faucet's loop (a no-op when BTC is off).
func btcTask(f *btcfaucet.Faucet) func(context.Context) error {
	if f == nil {
		return func(ctx context.Context) error { <-ctx.Done(); return nil }
	}
	return f.Run
}

// btcOrNil keeps a nil *btcfaucet.Faucet a nil interface: BTC off.
func btcOrNil(f *btcfaucet.Faucet) server.BTCFaucet {
	if f == nil {
		return nil
	}
	return f
}

// startDevnetBTC starts the devnet's btcd when one is found and points the
// BTC flags at it; the caller defers the returned stop. Without btcd the
// devnet runs without BTC and says how to turn it on.
func (o *serveOptions) startDevnetBTC(ctx context.Context, logger *slog.Logger) (*bitcoin.PrivateKey, func(), error) {
	bin, err := findBtcd()
	if errors.Is(err, errNoBtcd) {
		logger.Info("BTC faucet off: no btcd found; run `make btcd` (or set FAUCET_BTCD to a btcd binary) and restart to turn it on")
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	d, err := startDevnetBtcd(ctx, bin, o.btc.blockTime, logger.With("component", "btcd"))
	if err != nil {
		return nil, nil, err
	}
	o.btc.rpcURL = d.url
	o.btc.network = bitcoin.Regtest
	return d.key, d.Stop, nil
}

// printDevnetBTCBanner shows how to try the devnet's BTC faucet.
func printDevnetBTCBanner(w io.Writer, listen net.Addr, f *btcfaucet.Faucet, o btcOptions) {
	if f == nil {
		fmt.Fprint(w, "BTC: off (no btcd found: `make btcd`, or set FAUCET_BTCD, then restart)\n\n")
		return
	}
	host := browseHost(listen)
	example, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		return
	}
	a := example.Address().String()
	fmt.Fprintf(w, `BTC (regtest btcd at %s, a block every %s; faucet address %s):
  curl -sX POST 'http://%s/extended/v1/faucets/btc?address=%s'
  curl -sX POST -H 'Content-Type: application/json' -d '{"address":"%s"}' 'http://%s/extended/v3/faucets/btc'
  curl -s 'http://%s/extended/v1/faucets/btc/%s'

`, o.publicURL, o.blockTime, f.Address(), host, a, a, host, host, a)
}
