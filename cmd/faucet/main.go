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
	"strings"
	"syscall"

	"k8s.io/utils/clock"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=…".
var (
	version = "dev"
	commit  = "unknown"
)

// procClock is the one clock of the process: main builds it and every
// command passes it to every part that reads or waits on time.
type procClock = clock.WithTickerAndDelayedExecution

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, clk procClock, args []string, stdout io.Writer) error
}

func commands() []command {
	return []command{
		{"manager", "run the FaucetServer Kubernetes operator", runManager},
		{"serve", "run the faucet HTTP server (--node-url/--key-file, or --devnet)", runServe},
		{"devnet", "run the simulated Stacks node alone", runDevnet},
		{"keys", "manage faucet keys: keys generate [-n N] [--btc [--btc-network regtest|signet|testnet]]", runKeys},
		{"store", "back up and restore the embedded SQLite store: store backup --out FILE|-, store restore --in FILE|-", runStore},
		{"version", "print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, clock.RealClock{}, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if code := report(os.Stderr, err); code != 0 {
		os.Exit(code)
	}
}

// Exit codes: a mistake on the command line is told apart from a failure
// while running, as the flag package and most tools do.
const (
	exitFailure = 1
	exitUsage   = 2
)

// report writes err for the person at the terminal and returns the exit
// code: a usage mistake is its message and one line pointing at -h,
// anything else "faucet: " and the error.
func report(w io.Writer, err error) int {
	if err == nil {
		return 0
	}
	if ue, ok := errors.AsType[*usageError](err); ok {
		if !errors.Is(err, errNoCommand) { // the command list is printed
			prog := strings.TrimSpace("faucet " + ue.cmd)
			fmt.Fprintf(w, "%s: %v\nRun '%s -h' for %s.\n", prog, ue.err, prog, ue.what)
		}
		return exitUsage
	}
	fmt.Fprintln(w, "faucet:", err)
	return exitFailure
}

// usageError is a command line the command cannot run: a bad or missing
// flag, an unknown command. It exits 2.
type usageError struct {
	cmd  string // "serve", "keys generate"; "" for faucet itself
	what string // what -h shows: "the flags", "the commands"
	err  error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// flagError is err as a usage mistake of fs's command.
func flagError(fs *flag.FlagSet, err error) error {
	if _, ok := errors.AsType[*usageError](err); ok {
		return err
	}
	return &usageError{cmd: fs.Name(), what: "the flags", err: err}
}

// helpRequest is -h: the command's usage, which run prints to stdout.
type helpRequest struct{ text string }

func (h *helpRequest) Error() string { return "help requested" }
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

var errNoCommand = errors.New("no command given")

func run(ctx context.Context, clk procClock, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return &usageError{what: "the commands", err: errNoCommand}
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return nil
	case "help":
		if len(args) == 1 {
			usage(stdout)
			return nil
		}
		args = []string{args[1], "-h"} // faucet help serve
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, clk, args[1:], stdout)
		if h, ok := errors.AsType[*helpRequest](err); ok {
			_, err = io.WriteString(stdout, h.text)
		}
		return err
	}
	return &usageError{what: "the commands", err: fmt.Errorf("unknown command %q", args[0])}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: faucet <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'faucet <command> -h' (or 'faucet help <command>') for a command's flags.")
}

func runVersion(_ context.Context, _ procClock, _ []string, stdout io.Writer) error {
	_, err := fmt.Fprintf(stdout, "faucet-operator %s (%s)\n", version, commit)
	return err
}
