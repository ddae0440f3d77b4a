package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// runCLI runs the command as main does: what it prints and its exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut strings.Builder
	code = report(&errOut, run(context.Background(), clock.RealClock{}, args, &out, &errOut))
	return out.String(), errOut.String(), code
}

// A mistake on the command line is one line saying what is wrong and one
// pointing at -h, nothing else, and exit 2.
func TestUsageErrors(t *testing.T) {
	clearServeEnv(t)
	clearManagerEnv(t)
	keyFile := writeKeyFile(t)
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string // the whole of stderr
	}{
		{args: []string{"serve", "--node-timeout", "10"},
			want: `faucet serve: invalid value "10" for --node-timeout: a duration needs a unit, e.g. 10s or 500ms` + "\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--busy-wait=5"},
			want: `faucet serve: invalid value "5" for --busy-wait: a duration needs a unit, e.g. 10s or 500ms` + "\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--pow-ttl", "soon"},
			want: `faucet serve: invalid value "soon" for --pow-ttl: want a duration such as 10s, 500ms or 1h30m` + "\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--limit-ip", "5/5"},
			want: `faucet serve: invalid value "5/5" for --limit-ip: the window: a duration needs a unit, e.g. 10s or 500ms` + "\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve"}, env: map[string]string{"FAUCET_NODE_TIMEOUT": "10"},
			want: `faucet serve: invalid value "10" in FAUCET_NODE_TIMEOUT for --node-timeout: a duration needs a unit, e.g. 10s or 500ms` + "\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--amount", "lots"},
			want: `faucet serve: invalid value "lots" for --amount: want a whole number, 0 or more` + "\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--node-url", "127.0.0.1:20443", "--key-file", keyFile},
			want: "faucet serve: --node-url 127.0.0.1:20443: needs a scheme: http://127.0.0.1:20443\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--node-url", "localhost:20443", "--key-file", keyFile},
			want: "faucet serve: --node-url localhost:20443: needs a scheme: http://localhost:20443\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--node-url", "http://127.0.0.1:1", "--key-file", keyFile, "--btc-rpc-url", "127.0.0.1:18443", "--btc-key-file", keyFile},
			want: "faucet serve: --btc-rpc-url 127.0.0.1:18443: needs a scheme: http://127.0.0.1:18443\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		// The credentials in a URL never reach the terminal.
		{args: []string{"serve", "--node-url", "http://127.0.0.1:1", "--key-file", keyFile, "--btc-rpc-url", "rpc:s3cret@127.0.0.1:18443", "--btc-key-file", keyFile},
			want: "faucet serve: --btc-rpc-url …@127.0.0.1:18443: needs a scheme: http://…@127.0.0.1:18443\n" +
				"Run 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--nope"},
			want: "faucet serve: unknown flag --nope\nRun 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--key-file"},
			want: "faucet serve: --key-file needs a value\nRun 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--devnet=maybe"},
			want: `faucet serve: invalid value "maybe" for --devnet: want true or false` + "\nRun 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--log-format", "text", "--key-file", keyFile},
			want: "faucet serve: --node-url and --key-file are required (or use --devnet)\nRun 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "--devnet", "--amount", "0"},
			want: "faucet serve: --amount must be positive\nRun 'faucet serve -h' for the flags.\n"},
		{args: []string{"serve", "stray"},
			want: `faucet serve: unexpected arguments: ["stray"]` + "\nRun 'faucet serve -h' for the flags.\n"},
		{args: []string{"devnet", "--block-time", "2"},
			want: `faucet devnet: invalid value "2" for --block-time: a duration needs a unit, e.g. 10s or 500ms` + "\nRun 'faucet devnet -h' for the flags.\n"},
		{args: []string{"devnet"},
			want: "faucet devnet: nothing to fund: give --fund-key-file or --fund ADDR=µSTX\nRun 'faucet devnet -h' for the flags.\n"},
		{args: []string{"keys"},
			want: "faucet keys: missing subcommand: faucet keys generate\nRun 'faucet keys -h' for usage.\n"},
		{args: []string{"keys", "make"},
			want: `faucet keys: unknown subcommand "make": want generate` + "\nRun 'faucet keys -h' for usage.\n"},
		{args: []string{"keys", "generate", "-n", "x"},
			want: `faucet keys generate: invalid value "x" for -n: want a whole number` + "\nRun 'faucet keys generate -h' for the flags.\n"},
		{args: []string{"keys", "generate", "-n", "0"},
			want: "faucet keys generate: -n must be between 1 and 1000, got 0\nRun 'faucet keys generate -h' for the flags.\n"},
		{args: []string{"manager"},
			want: "faucet manager: --server-image (or FAUCET_SERVER_IMAGE) is required: the image faucet pods run by default\n" +
				"Run 'faucet manager -h' for the flags.\n"},
		{args: []string{"manager", "--server-image", "i", "--funding-interval", "30"},
			want: `faucet manager: invalid value "30" for --funding-interval: a duration needs a unit, e.g. 10s or 500ms` + "\n" +
				"Run 'faucet manager -h' for the flags.\n"},
		{args: []string{"manager", "--server-image", "i", "--log-level", "loud"},
			want: "faucet manager: --log-level: unknown level \"loud\": want debug, info, warn or error\nRun 'faucet manager -h' for the flags.\n"},
		{args: []string{"bogus"},
			want: `faucet: unknown command "bogus"` + "\nRun 'faucet -h' for the commands.\n"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			stdout, stderr, code := runCLI(t, c.args...)
			if code != exitUsage || stderr != c.want || stdout != "" {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and:\n%s\nstdout: %q", code, stderr, c.want, stdout)
			}
		})
	}
}

// A bare `faucet` lists the commands on stderr and exits 2.
func TestNoCommand(t *testing.T) {
	stdout, stderr, code := runCLI(t)
	if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "usage: faucet <command>") || strings.Contains(stderr, "no command given") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Every -h is the usage on stdout and exit 0.
func TestHelpOnStdout(t *testing.T) {
	clearManagerEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "usage: faucet <command>"},
		{[]string{"--help"}, "usage: faucet <command>"},
		{[]string{"help"}, "usage: faucet <command>"},
		{[]string{"help", "serve"}, "usage: faucet serve"},
		{[]string{"serve", "-h"}, "usage: faucet serve"},
		{[]string{"serve", "--devnet", "--help"}, "usage: faucet serve"},
		{[]string{"devnet", "-h"}, "usage: faucet devnet"},
		{[]string{"keys", "-h"}, "usage: faucet keys generate"},
		{[]string{"keys", "--help"}, "usage: faucet keys generate"},
		{[]string{"keys", "generate", "-h"}, "usage: faucet keys generate"},
		{[]string{"manager", "-h"}, "usage: faucet manager"},
	} {
		stdout, stderr, code := runCLI(t, c.args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, c.want) {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%s", c.args, code, stderr, stdout)
		}
	}
	stdout, _, _ := runCLI(t, "keys", "-h")
	if !strings.Contains(stdout, "\n  -n int\n") || !strings.Contains(stdout, "\n  --btc-network string\n") {
		t.Errorf("keys -h lacks generate's flags:\n%s", stdout)
	}
}

// `serve -h` and `devnet -h` list every flag once, as --name, under the
// group titles, with its usage and default.
func TestHelpGroupsEveryFlag(t *testing.T) {
	for _, c := range []struct {
		cmd    string
		fs     *flag.FlagSet
		groups []flagGroup
	}{
		{"serve", serveFlagSet(), serveFlagGroups()},
		{"devnet", nil, devnetFlagGroups},
		{"manager", managerFlagSet(), managerFlagGroups},
	} {
		stdout, _, code := runCLI(t, c.cmd, "-h")
		if code != 0 {
			t.Fatalf("%s -h: exit %d", c.cmd, code)
		}
		if strings.Contains(stdout, "\nother flags:") {
			t.Errorf("%s -h: a flag in no group:\n%s", c.cmd, stdout)
		}
		for _, g := range c.groups {
			if !strings.Contains(stdout, "\n"+g.title+":\n") {
				t.Errorf("%s -h: no group %q", c.cmd, g.title)
			}
		}
		if c.fs == nil {
			continue
		}
		var names []string
		c.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		listed := map[string]bool{}
		for _, g := range c.groups {
			for _, n := range g.names {
				if c.fs.Lookup(n) == nil {
					t.Errorf("group %q names %q, no %s flag", g.title, n, c.cmd)
				}
				if listed[n] {
					t.Errorf("%q is in two groups", n)
				}
				listed[n] = true
			}
		}
		for _, n := range names {
			re := regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(n) + `( |$)`)
			if got := len(re.FindAllString(stdout, -1)); got != 1 {
				t.Errorf("%s -h shows --%s %d times", c.cmd, n, got)
			}
			if strings.Contains(stdout, "\n  -"+n+" ") || strings.Contains(stdout, "\n  -"+n+"\n") {
				t.Errorf("%s -h writes -%s", c.cmd, n)
			}
		}
	}
	if stdout, _, _ := runCLI(t, "devnet", "-h"); !strings.Contains(stdout, "\n  --fund ADDR=µSTX\n") {
		t.Errorf("devnet -h lacks --fund's placeholder:\n%s", stdout)
	}
	stdout, _, _ := runCLI(t, "serve", "-h")
	for _, want := range []string{
		"node and keys:\n  --node-url urls\n      Stacks node RPC URL, e.g. http://stacks-node:20443; comma-separated or\n",
		"\n  --node-timeout duration\n      timeout of each node RPC call (default 10s)\n",
		"\n  --limit-ip N/window\n",
		`(default "faucet")`,
		"\n  --devnet\n      run an embedded simulated node with generated, funded keys\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("serve -h lacks %q:\n%s", want, stdout)
		}
	}
}

func managerFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var o managerOptions
	o.register(fs)
	return fs
}

func serveFlagSet() *flag.FlagSet {
	o := options.Defaults()
	return newServeFlags(&o)
}

// A --node-url that answers but is not a Stacks node's RPC fails at start
// saying so (exit 1: the command line was well formed).
func TestNodeURLNotAStacksNode(t *testing.T) {
	clearServeEnv(t)
	keyFile := writeKeyFile(t)
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"404", http.NotFound, "(GET /v2/info answered 404 Not Found)"},
		{"html", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>hello</html>"))
		}, "(GET /v2/info answered, but not with the node's JSON: invalid character '<'"},
		{"other json", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"status":"ready"}`))
		}, "(GET /v2/info answered JSON without the node's fields)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			stdout, stderr, code := runCLI(t, "serve", "--node-url", srv.URL, "--key-file", keyFile, "--store", "memory",
				"--listen", "127.0.0.1:0", "--log-level", "error")
			want := "faucet: --node-url " + srv.URL + " does not look like a Stacks node RPC "
			if code != exitFailure || stdout != "" || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, c.want) ||
				!strings.HasSuffix(stderr, "; the node's RPC port is usually 20443\n") {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
		})
	}
}

// The exit codes of the real command: 2 for a usage mistake, 1 for a
// failure while running, 0 and stdout for -h.
func TestExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command as a process")
	}
	keyFile := writeKeyFile(t)
	notNode := httptest.NewServer(http.NotFoundHandler())
	defer notNode.Close()
	for _, c := range []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"serve", "--node-timeout", "10"}, 2, "",
			`faucet serve: invalid value "10" for --node-timeout: a duration needs a unit, e.g. 10s or 500ms` + "\nRun 'faucet serve -h' for the flags.\n"},
		{[]string{"nope"}, 2, "", `faucet: unknown command "nope"` + "\nRun 'faucet -h' for the commands.\n"},
		{[]string{"serve", "--node-url", notNode.URL, "--key-file", keyFile, "--store", "memory", "--listen", "127.0.0.1:0", "--log-level", "error"}, 1, "",
			"faucet: --node-url " + notNode.URL + " does not look like a Stacks node RPC (GET /v2/info answered 404 Not Found); the node's RPC port is usually 20443\n"},
		{[]string{"serve", "--node-url", "http://127.0.0.1:1", "--key-file", keyFile + ".missing"}, 1, "",
			"faucet: --key-file: open " + keyFile + ".missing: no such file or directory\n"},
		{[]string{"keys", "-h"}, 0, "usage: faucet keys generate", ""},
	} {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), asFaucetEnv+"=1")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || stderr.String() != c.errs || !strings.HasPrefix(stdout.String(), c.stdout) || (c.stdout == "" && stdout.Len() != 0) {
			t.Errorf("faucet %v: exit %d, stdout %q, stderr %q; want exit %d, stderr %q", c.args, code, stdout.String(), stderr.String(), c.code, c.errs)
		}
	}
}

// writeKeyFile is a key file with one fresh key.
func writeKeyFile(t *testing.T) string {
	t.Helper()
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte(k.Hex()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
