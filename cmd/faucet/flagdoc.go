package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stxfaucet/faucet-operator/cmd/faucet/mdanchor"
)

// flagDoc is a command's flag reference in Markdown: docs/serve-flags.md
// and docs/manager-flags.md, written by `make docs` from the commands'
// own flag sets (flagdoc_test.go) and checked by `make verify-docs`, so
// every flag is documented exactly once and never drifts from -h.
type flagDoc struct {
	command string // "faucet serve"
	source  string // where the flags are registered, e.g. "cmd/faucet/serve.go"
	help    string // the command's -h text; its first paragraph, the usage lines, is shown
	intro   string // Markdown after the title
	env     bool   // every flag can also be set as its FAUCET_ variable
}

// flagSection is one group of flags in the order -h shows them.
type flagSection struct {
	title string
	flags []*flag.Flag
}

// flagSections splits fs as printFlags does: the groups' flags in their
// order, each flag once, and the flags in no group last, under "other
// flags" (all under "flags" without groups). Empty groups are dropped.
func flagSections(fs *flag.FlagSet, groups []flagGroup) []flagSection {
	seen := map[string]bool{}
	var out []flagSection
	for _, g := range groups {
		var flags []*flag.Flag
		for _, name := range g.names {
			if f := fs.Lookup(name); f != nil && !seen[name] {
				seen[name] = true
				flags = append(flags, f)
			}
		}
		if len(flags) > 0 {
			out = append(out, flagSection{g.title, flags})
		}
	}
	var rest []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] {
			rest = append(rest, f)
		}
	})
	title := "other flags"
	if len(groups) == 0 {
		title = "flags"
	}
	if len(rest) > 0 {
		out = append(out, flagSection{title, rest})
	}
	return out
}

// writeFlagReference writes fs as Markdown: a title, d's intro, the -h
// header, then a table per section with each flag's argument, default,
// environment variable (with d.env) and usage.
func writeFlagReference(w io.Writer, d flagDoc, fs *flag.FlagSet, groups []flagGroup) error {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- Generated from the flag set of `%s` (%s) by `make docs`; `make verify-docs` fails when it is stale. Do not edit. -->\n\n", d.command, d.source)
	fmt.Fprintf(&b, "# `%s` flags\n\n", d.command)
	if d.intro != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(d.intro))
	}
	if h := usageHead(d.help); h != "" {
		fmt.Fprintf(&b, "```text\n%s\n```\n\n", h)
	}
	sections := flagSections(fs, groups)
	b.WriteString("Sections: ")
	for i, s := range sections {
		if i > 0 {
			b.WriteString(" · ")
		}
		fmt.Fprintf(&b, "[%s](#%s)", sectionTitle(s.title), mdanchor.Heading(sectionTitle(s.title)))
	}
	b.WriteString("\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n", sectionTitle(s.title))
		if d.env {
			b.WriteString("| flag | default | environment | meaning |\n|---|---|---|---|\n")
		} else {
			b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
		}
		for _, f := range s.flags {
			name := dashed(f.Name)
			if arg := argName(f.Value); arg != "" {
				name += " " + arg
			}
			fmt.Fprintf(&b, "| %s | %s |", mdCode(name), flagDefault(f))
			if d.env {
				fmt.Fprintf(&b, " %s |", mdCode(envName(f.Name)))
			}
			fmt.Fprintf(&b, " %s |\n", mdCell(f.Usage))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// usageHead is the first paragraph of a command's -h text: its usage
// lines.
func usageHead(help string) string {
	head, _, _ := strings.Cut(strings.TrimSpace(help), "\n\n")
	return head
}

// sectionTitle is a group's title as a heading: "node and keys" becomes
// "Node and keys"; a title that starts with a lower-case acronym stays as it is.
func sectionTitle(t string) string {
	first, n := utf8.DecodeRuneInString(t)
	second, _ := utf8.DecodeRuneInString(t[n:])
	if unicode.IsUpper(second) {
		return t
	}
	return string(unicode.ToUpper(first)) + t[n:]
}

// flagDefault is a flag's default as the table shows it: "—" when the
// flag has none (an empty string or list), else the value as code, a
// duration without its zero minutes and seconds (5m, not 5m0s).
func flagDefault(f *flag.Flag) string {
	if f.DefValue == "" {
		return "—"
	}
	def := f.DefValue
	if arg := argName(f.Value); arg == "duration" || arg == "N/window" {
		def = zeroUnits.ReplaceAllString(def, "$1")
	}
	return mdCode(def)
}

// zeroUnits matches the zero minutes and seconds time.Duration.String
// writes after hours or minutes: 48h0m0s, 5m0s.
var zeroUnits = regexp.MustCompile(`([hm])(?:0m)?0s$`)

// mdCode is s as a code span in a table cell.
func mdCode(s string) string {
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// mdCell is s as table cell text: on one line, with | escaped and < as
// an entity, so no text reads as a column break or an HTML tag.
func mdCell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "<", "&lt;")
}
