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
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/faucet"
)

// fundList collects repeated --fund ADDR=µSTX flags.
type fundList map[stacks.Address]uint64

func (f fundList) String() string { return fmt.Sprintf("%d entries", len(f)) }

func (fundList) argName() string { return "ADDR=µSTX" }

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

Serves the simulated Stacks node alone, e.g. for a separate
faucet serve --node-url. Every flag can also be set as FAUCET_<NAME>.
`

// devnetFlagGroups order `faucet devnet -h` by concern.
var devnetFlagGroups = []flagGroup{
	{"node", []string{"listen", "block-time", "pox-min-amount", "send-many-contract", "token-asset"}},
	{"genesis funding", []string{"fund-key-file", "fund-amount", "fund-token-amount", "fund"}},
	{"logging", []string{"log-level", "log-format"}},
}

// runDevnet serves the simulated Stacks node alone, e.g. for a separate
// `faucet serve --node-url` process.
func runDevnet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("devnet", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:20443", "address the node RPC listens on")
	blockTime := fs.Duration("block-time", 2*time.Second, "block interval")
	keyFile := fs.String("fund-key-file", "", "fund the addresses of the keys in this file at genesis")
	keyFunding := fs.Uint64("fund-amount", devnetFunding, "µSTX for each address from --fund-key-file")
	minStacking := fs.Uint64("pox-min-amount", 0, "PoX min_amount_ustx the node reports (0 = devnode default)")
	sendMany := fs.String("send-many-contract", stacks.SendManyMemoTestnet, "contract id of the send-many-memo contract the node deploys (\"\" = none)")
	token := fs.String("token-asset", stacks.SBTCTestnet, "asset identifier ADDR.contract::"+devnode.TokenName+" of the SIP-010 token (sBTC) the node deploys (\"\" = none)")
	tokenFunding := fs.Uint64("fund-token-amount", devnetTokenFunding, "token base units (sats) for each address from --fund-key-file")
	fund := fundList{}
	fs.Var(fund, "fund", "fund ADDR with µSTX at genesis, ADDR=µSTX (repeatable)")
	var lf logFlags
	lf.register(fs)
	fs.Usage = usageFunc(fs, devnetUsage, devnetFlagGroups...)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	logger, err := lf.logger()
	if err != nil {
		return flagError(fs, err)
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
		SendManyContract: *sendMany, Logger: logger}
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
	dn := devnode.New(cfg)
	url, err := serveDevnode(ctx, dn, *listen, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "devnode serving the Stacks node RPC at %s (block time %s, %d funded addresses)\n", url, *blockTime, len(fund))
	<-ctx.Done()
	return nil
}

// startEmbeddedDevnet runs a simulated node on a loopback port with freshly
// generated, generously funded keys; with the token on, it deploys the
// SIP-010 token contract at the token's identifier and mints each key its
// share. With --devnet-treasury it also generates the treasury, which gets
// the generous funding, while the faucet keys start about ten drips above
// the refill threshold.
func startEmbeddedDevnet(ctx context.Context, o serveOptions, token faucet.Token, logger *slog.Logger) ([]*stacks.PrivateKey, *stacks.PrivateKey, string, error) {
	if o.devnetKeys < 1 || o.devnetKeys > 100 {
		return nil, nil, "", fmt.Errorf("--devnet-keys must be 1..100, got %d", o.devnetKeys)
	}
	if token.Enabled() && token.Asset.Name != devnode.TokenName {
		return nil, nil, "", fmt.Errorf("--sbtc-asset %s: the devnet deploys its own token, named %s: use ADDR.contract::%s", token.Asset, devnode.TokenName, devnode.TokenName)
	}
	keyFunding, tokenFunding := devnetFunding, devnetTokenFunding
	genesis, tokenGenesis := map[stacks.Address]uint64{}, map[stacks.Address]uint64{}
	var treasury *stacks.PrivateKey
	if o.devnetTreasury {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			return nil, nil, "", err
		}
		treasury = k
		genesis[k.TestnetAddress()] = devnetFunding
		tokenGenesis[k.TestnetAddress()] = devnetTokenFunding
		refills, _ := o.refills() // checked by validateRefill
		keyFunding = satAddMul(refills.Below, 10, faucet.DripCost(o.amount, o.feeFallback))
		if token.Enabled() {
			t, _ := token.ResolveRefills() // checked by sbtcOptions.token
			tokenFunding = satAddMul(t.RefillBelow, 10, token.Amount)
		}
	}
	keys := make([]*stacks.PrivateKey, o.devnetKeys)
	for i := range keys {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			return nil, nil, "", err
		}
		keys[i] = k
		genesis[k.TestnetAddress()] = keyFunding
		tokenGenesis[k.TestnetAddress()] = tokenFunding
	}
	// The devnet deploys send-many-memo at its testnet id, as on testnet.
	cfg := devnode.Config{BlockTime: o.blockTime, Genesis: genesis, SendManyContract: stacks.SendManyMemoTestnet,
		Logger: logger.With("component", "devnode")}
	if token.Enabled() {
		cfg.TokenAsset, cfg.TokenGenesis = token.Asset.String(), tokenGenesis
	}
	dn := devnode.New(cfg)
	url, err := serveDevnode(ctx, dn, "127.0.0.1:0", logger)
	if err != nil {
		return nil, nil, "", err
	}
	return keys, treasury, url, nil
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

func printDevnetBanner(w io.Writer, listen net.Addr, nodeURL string, addrs []string, token faucet.Token) {
	host := browseHost(listen)
	example, _ := stacks.GeneratePrivateKey()
	fmt.Fprintf(w, `
faucet-operator devnet
  web page:         http://%s/   <- open this in a browser
  faucet addresses: %s
  node RPC:         %s
  faucet API:       http://%s

Try it:
  curl -sX POST 'http://%s/extended/v1/faucets/stx?address=%s'
  curl -sX POST -H 'Content-Type: application/json' -d '{"address":"%s"}' 'http://%s/extended/v3/faucets/stx'
  curl -s 'http://%s/extended/v1/status'
  curl -s '%s/v2/accounts/%s?proof=0'

`, host, strings.Join(addrs, ", "), nodeURL, host, host, example.TestnetAddress(), example.TestnetAddress(), host, host, nodeURL, example.TestnetAddress())
	if !token.Enabled() {
		return
	}
	a := example.TestnetAddress().String()
	c := token.Asset.Contract
	fmt.Fprintf(w, `sBTC (%s, %d sats per drip):
  curl -sX POST 'http://%s/extended/v1/faucets/sbtc?address=%s'
  curl -sX POST -H 'Content-Type: application/json' -d '{"address":"%s"}' 'http://%s/extended/v3/faucets/sbtc'
  # its balance, SIP-010 get-balance through the node's call-read RPC:
  curl -sX POST -H 'Content-Type: application/json' -d '{"sender":"%s","arguments":["0x%x"]}' '%s/v2/contracts/call-read/%s/%s/get-balance'

`, token.Asset, token.Amount, host, a, a, host, a, stacks.SerializeClarityValue(stacks.Principal{Address: example.TestnetAddress()}), nodeURL, c.Address, c.Name)
}
