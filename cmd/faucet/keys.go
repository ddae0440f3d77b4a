package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

const keysUsage = "usage: faucet keys generate [-n N] [--json] [--btc [--btc-network regtest|signet|testnet]]\n\n" +
	"Prints fresh compressed testnet keys and their addresses, one \"KEY ADDRESS\" line each.\n"

// runKeys implements `faucet keys generate`: fresh compressed testnet keys and
// their addresses, which is what an operator needs to create the key Secret.
// With --btc the keys are Bitcoin keys for the BTC faucet: compressed WIF
// (what a BTC key file holds and bitcoin.ParsePrivateKey reads) and the
// P2WPKH address to fund.
func runKeys(_ context.Context, _ procClock, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("keys generate", flag.ContinueOnError)
	n := fs.Int("n", 1, "number of keys to generate")
	asJSON := fs.Bool("json", false, "print a JSON array of {privateKey, address}")
	btc := fs.Bool("btc", false, "generate Bitcoin keys (WIF and P2WPKH address) instead of Stacks keys")
	btcNetwork := bitcoin.Regtest
	fs.TextVar(&btcNetwork, "btc-network", bitcoin.Regtest, "with --btc: the network of the addresses: regtest, signet or testnet")
	fs.Usage = usageFunc(fs, keysUsage)
	if len(args) == 0 {
		return &usageError{cmd: "keys", what: "usage", err: errors.New("missing subcommand: faucet keys generate")}
	}
	switch args[0] {
	case "generate":
	case "-h", "-help", "--help", "help":
		return &helpRequest{text: helpText(fs)} // the only subcommand's flags
	default:
		return &usageError{cmd: "keys", what: "usage", err: fmt.Errorf("unknown subcommand %q: want generate", args[0])}
	}
	if err := parseFlags(fs, args[1:], false); err != nil {
		return err
	}
	if *n < 1 || *n > 1000 {
		return flagError(fs, fmt.Errorf("-n must be between 1 and 1000, got %d", *n))
	}
	networkSet := false
	fs.Visit(func(f *flag.Flag) { networkSet = networkSet || f.Name == "btc-network" })
	if networkSet && !*btc {
		return flagError(fs, errors.New("--btc-network applies to Bitcoin keys: add --btc"))
	}
	type entry struct {
		PrivateKey string `json:"privateKey"`
		Address    string `json:"address"`
	}
	out := make([]entry, 0, *n)
	for range *n {
		if *btc {
			k, err := bitcoin.GeneratePrivateKey(btcNetwork)
			if err != nil {
				return err
			}
			out = append(out, entry{PrivateKey: k.WIF(), Address: k.Address().String()})
			continue
		}
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			return err
		}
		out = append(out, entry{PrivateKey: k.Hex(), Address: k.TestnetAddress().String()})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, e := range out {
		if _, err := fmt.Fprintf(stdout, "%s %s\n", e.PrivateKey, e.Address); err != nil {
			return err
		}
	}
	return nil
}
