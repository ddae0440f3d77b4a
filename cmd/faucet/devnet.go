package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/devnode"
	"github.com/stxfaucet/faucet-operator/server/stacks"
)

// fundList collects repeated --fund ADDR=µSTX flags.
type fundList map[stacks.Address]uint64

func (f fundList) String() string { return fmt.Sprintf("%d entries", len(f)) }

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
	fund := fundList{}
	fs.Var(fund, "fund", "fund ADDR with µSTX at genesis, ADDR=µSTX (repeatable)")
	var lf logFlags
	lf.register(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	logger, err := lf.logger()
	if err != nil {
		return err
	}
	if *keyFile != "" {
		keys, err := readKeyFile(*keyFile)
		if err != nil {
			return err
		}
		for _, k := range keys {
			fund[k.TestnetAddress()] = *keyFunding
		}
	}
	if len(fund) == 0 {
		return errors.New("nothing to fund: give --fund-key-file or --fund ADDR=µSTX")
	}
	if *sendMany != "" {
		if _, err := stacks.ParseContractID(*sendMany); err != nil {
			return fmt.Errorf("--send-many-contract: %w", err)
		}
	}
	dn := devnode.New(devnode.Config{BlockTime: *blockTime, Genesis: fund, MinAmountUstx: *minStacking,
		SendManyContract: *sendMany, Logger: logger})
	url, err := serveDevnode(ctx, dn, *listen, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "devnode serving the Stacks node RPC at %s (block time %s, %d funded addresses)\n", url, *blockTime, len(fund))
	<-ctx.Done()
	return nil
}
