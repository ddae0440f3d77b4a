// Command faucet is the single binary of faucet-operator: the Kubernetes
// manager, the faucet HTTP server, the simulated Stacks node and key tooling.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = "unknown"
)

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

func commands() []command {
	return []command{
		{"manager", "run the FaucetServer Kubernetes operator", runManager},
		{"serve", "run the faucet HTTP server (--node-url/--key-file, or --devnet)", runServe},
		{"devnet", "run the simulated Stacks node alone", runDevnet},
		{"keys", "manage faucet keys: keys generate [-n N] [--btc [--btc-network regtest|signet|testnet]]", runKeys},
		{"version", "print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if code := exitCode(err); code != 0 {
		fmt.Fprintln(os.Stderr, "faucet:", err)
		os.Exit(code)
	}
}

// exitCode is 0 for success and for -h (the flag package has printed the
// usage, as `faucet -h` does), else 2.
func exitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout)
		}
	}
	usage(stderr)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: faucet <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

func runVersion(_ context.Context, _ []string, stdout io.Writer) error {
	_, err := fmt.Fprintf(stdout, "faucet-operator %s (%s)\n", version, commit)
	return err
}
