package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/options"
)

// updateDocsEnv set to 1 makes the flag reference tests write the files
// they check: `make docs`.
const updateDocsEnv = "UPDATE_DOCS"

// TestServeFlagReference: docs/serve-flags.md is the flag set of `faucet
// serve`, grouped as its -h groups it.
func TestServeFlagReference(t *testing.T) {
	o := options.Defaults()
	fs := newServeFlags(&o)
	checkFlagReference(t, "serve-flags.md", flagDoc{
		command: "faucet serve",
		source:  "server/options",
		help:    helpOf(t, func() error { return runServe(context.Background(), clock.RealClock{}, []string{"-h"}, io.Discard) }),
		intro: "Every flag of the faucet server, in the groups `faucet serve -h` prints. Every flag can also be " +
			"set as the environment variable beside it (a flag on the command line wins; a bad value in a " +
			"variable fails as on the command line, naming the variable). A bool flag is `--flag` or " +
			"`--flag=false`; `N/window` is a count and a duration, e.g. `5/5m`, `0` to disable. The " +
			"operator passes a FaucetServer's spec to its pods as these flags ([kubernetes.md](kubernetes.md)).",
		env: true,
	}, fs, serveFlagGroups())
}

// TestManagerFlagReference: docs/manager-flags.md is the flag set of
// `faucet manager`.
func TestManagerFlagReference(t *testing.T) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var o managerOptions
	o.register(fs)
	checkFlagReference(t, "manager-flags.md", flagDoc{
		command: "faucet manager",
		source:  "cmd/faucet/manager.go",
		help: helpOf(t, func() error {
			_, err := parseManagerOptions([]string{"-h"})
			return err
		}),
		intro: "Every flag of the operator's manager. Every flag can also be set as the environment variable " +
			"beside it (a flag on the command line wins). The chart and `config/manager` set them for you; see " +
			"[kubernetes.md](kubernetes.md).",
		env: true,
	}, fs, managerFlagGroups)
}

// helpOf is the text a command prints for -h.
func helpOf(t *testing.T, parse func() error) string {
	t.Helper()
	h, ok := errors.AsType[*helpRequest](parse())
	if !ok {
		t.Fatal("-h did not ask for help")
	}
	return h.text
}

// checkFlagReference renders fs and compares it with docs/<name>, or
// writes it there with UPDATE_DOCS=1.
func checkFlagReference(t *testing.T, name string, d flagDoc, fs *flag.FlagSet, groups []flagGroup) {
	t.Helper()
	var b bytes.Buffer
	if err := writeFlagReference(&b, d, fs, groups); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	fs.VisitAll(func(f *flag.Flag) {
		if n := strings.Count(got, "| `"+dashed(f.Name)+"`") + strings.Count(got, "| `"+dashed(f.Name)+" "); n != 1 {
			t.Errorf("%s is in %s %d times, want once", dashed(f.Name), name, n)
		}
	})
	path := filepath.Join("..", "..", "docs", name)
	if os.Getenv(updateDocsEnv) == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/%s", name)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("docs/%s: %v: run make docs", name, err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/%s is stale: run make docs\nfirst difference, line %d:\n  committed: %s\n  flag set:  %s", name, i+1, w, g)
			}
		}
	}
}

// TestFlagSections: every flag once, grouped flags first, the rest under
// "other flags", empty groups dropped.
func TestFlagSections(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	for _, n := range []string{"a", "b", "c", "d"} {
		fs.String(n, "", "")
	}
	got := flagSections(fs, []flagGroup{{"one", []string{"c", "a", "missing"}}, {"two", []string{"a"}}, {"three", []string{"b"}}})
	var s []string
	for _, sec := range got {
		var names []string
		for _, f := range sec.flags {
			names = append(names, f.Name)
		}
		s = append(s, sec.title+":"+strings.Join(names, ","))
	}
	if want := "one:c,a three:b other flags:d"; strings.Join(s, " ") != want {
		t.Fatalf("sections %q, want %q", strings.Join(s, " "), want)
	}
	if got := flagSections(fs, nil); len(got) != 1 || got[0].title != "flags" || len(got[0].flags) != 4 {
		t.Fatalf("without groups: %+v", got)
	}
}

func TestFlagDocCells(t *testing.T) {
	for in, want := range map[string]string{
		"node and keys":        "Node and keys",
		"sBTC":                 "sBTC",
		"HTTP server and page": "HTTP server and page",
	} {
		if got := sectionTitle(in); got != want {
			t.Errorf("sectionTitle(%q) = %q, want %q", in, got, want)
		}
	}
	if got := mdCell("NAME TOKEN|sha256:HEX  QUOTA\n<x>"); got != `NAME TOKEN\|sha256:HEX QUOTA &lt;x>` {
		t.Errorf("cell %q", got)
	}
}

func TestFlagDefaultDurations(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Duration("a", 48*time.Hour, "")
	fs.Duration("b", 90*time.Minute, "")
	fs.Duration("c", 250*time.Millisecond, "")
	fs.Duration("d", 10*time.Second, "")
	o := options.Defaults()
	limit := newServeFlags(&o).Lookup("limit-address").Value
	if err := limit.Set("5/5m"); err != nil {
		t.Fatal(err)
	}
	fs.Var(limit, "e", "")
	fs.String("f", "10m0s", "")
	for name, want := range map[string]string{"a": "`48h`", "b": "`1h30m`", "c": "`250ms`", "d": "`10s`", "e": "`5/5m`", "f": "`10m0s`"} {
		if got := flagDefault(fs.Lookup(name)); got != want {
			t.Errorf("default of %s: %s, want %s", name, got, want)
		}
	}
}
