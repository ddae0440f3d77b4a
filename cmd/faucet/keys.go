package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// runKeys implements `faucet keys generate`: fresh compressed testnet keys and
// their addresses, which is what an operator needs to create the key Secret.
func runKeys(_ context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "generate" {
		return errors.New("usage: faucet keys generate [-n N] [-json]")
	}
	fs := flag.NewFlagSet("keys generate", flag.ContinueOnError)
	n := fs.Int("n", 1, "number of keys to generate")
	asJSON := fs.Bool("json", false, "print a JSON array of {privateKey, address}")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *n < 1 || *n > 1000 {
		return fmt.Errorf("-n must be between 1 and 1000, got %d", *n)
	}
	type entry struct {
		PrivateKey string `json:"privateKey"`
		Address    string `json:"address"`
	}
	out := make([]entry, 0, *n)
	for range *n {
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
