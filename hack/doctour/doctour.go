// Package doctour reads the tours a Markdown file walks its reader through,
// so tests can run them as written: a fenced sh block after a
// `<!-- tour: NAME -->` comment is the tour NAME. Each command in it is a
// step (a heredoc belongs to its command); a comment line that starts with
// `# {` right after a command is the answer the reader is told to expect,
// JSON with … for what varies (see MatchShape). Other comment lines are
// prose.
//
// The placeholders a reader fills in by hand (ST… for their address, 0x…
// for a txid) are filled by the test with Fill.
package doctour

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Step is one command of a tour.
type Step struct {
	Line  int    // the command's line in the file, for messages
	Cmd   string // as written, heredoc included
	Shape string // the documented answer (JSON with …), or ""
}

// Background reports whether the command runs in the background (`cmd &`).
func (s Step) Background() bool {
	return strings.HasSuffix(strings.TrimSpace(stripComment(s.Cmd)), "&")
}

func (s Step) String() string { return fmt.Sprintf("line %d: %s", s.Line, firstLine(s.Cmd)) }

var (
	marker  = regexp.MustCompile(`^<!--\s*tour:\s*([a-z0-9-]+)\s*-->\s*$`)
	heredoc = regexp.MustCompile(`<<-?\s*'?"?([A-Za-z_]+)'?"?`)
)

// Tour returns the steps of the tour named name in the Markdown text md.
func Tour(md []byte, name string) ([]Step, error) {
	lines := strings.Split(string(md), "\n")
	start := -1
	for i, l := range lines {
		if m := marker.FindStringSubmatch(strings.TrimSpace(l)); len(m) == 2 && m[1] == name {
			if start >= 0 {
				return nil, fmt.Errorf("tour %q is marked twice (lines %d and %d)", name, start+1, i+1)
			}
			start = i
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("no tour %q (a <!-- tour: %s --> line before a ```sh block)", name, name)
	}
	i := start + 1
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i >= len(lines) || strings.TrimSpace(lines[i]) != "```sh" {
		return nil, fmt.Errorf("line %d: the tour %q marker must be followed by a ```sh block", start+1, name)
	}
	var steps []Step
	for i++; ; i++ {
		if i >= len(lines) {
			return nil, fmt.Errorf("tour %q: its block is not closed", name)
		}
		l := lines[i]
		t := strings.TrimSpace(l)
		switch {
		case t == "```":
			if len(steps) == 0 {
				return nil, fmt.Errorf("tour %q has no commands", name)
			}
			return steps, nil
		case t == "":
		case strings.HasPrefix(t, "# {"):
			if len(steps) == 0 || steps[len(steps)-1].Shape != "" {
				return nil, fmt.Errorf("line %d: an answer that follows no command", i+1)
			}
			steps[len(steps)-1].Shape = strings.TrimSpace(strings.TrimPrefix(t, "#"))
		case strings.HasPrefix(t, "#"):
		default:
			step := Step{Line: i + 1, Cmd: l}
			if m := heredoc.FindStringSubmatch(stripComment(l)); m != nil {
				for i++; i < len(lines) && strings.TrimSpace(lines[i]) != m[1]; i++ {
					step.Cmd += "\n" + lines[i]
				}
				if i >= len(lines) {
					return nil, fmt.Errorf("line %d: heredoc %s is not closed", step.Line, m[1])
				}
				step.Cmd += "\n" + lines[i]
			}
			steps = append(steps, step)
		}
	}
}

// Fill replaces each placeholder in cmd (a key of values, such as "ST…")
// with its value, longest placeholder first.
func Fill(cmd string, values map[string]string) string {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		cmd = strings.ReplaceAll(cmd, k, values[k])
	}
	return cmd
}

// Placeholders lists the …-placeholders left in cmd (words ending in …).
func Placeholders(cmd string) []string {
	return placeholder.FindAllString(stripComment(cmd), -1)
}

var placeholder = regexp.MustCompile(`[A-Za-z0-9]*…`)

// stripComment drops a trailing `# …` comment outside quotes.
func stripComment(l string) string {
	var q rune
	for i, r := range l {
		switch {
		case q != 0:
			if r == q {
				q = 0
			}
		case r == '\'' || r == '"':
			q = r
		case r == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// Markers that stand for … once a shape is turned into JSON.
const (
	anyValue = "\x00any"  // any value
	rest     = "\x00rest" // any further members or elements
)

// MatchShape checks got (a JSON answer) against shape, the answer a tour
// documents, with trailing prose after it allowed. In shape, a bare … is
// any value; … as the last member of an object or element of an array
// allows more; a string with … in it matches any string with the text
// before … as its prefix and the text after as its suffix. Without …, an
// object must have exactly the members shown.
func MatchShape(shape string, got []byte) error {
	want, err := parseShape(shape)
	if err != nil {
		return err
	}
	var have any
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.UseNumber()
	if err := dec.Decode(&have); err != nil {
		return fmt.Errorf("the answer is not JSON (%w): %s", err, clip(got))
	}
	if err := match("$", want, have); err != nil {
		return fmt.Errorf("%w\n  documented: %s\n  answered:   %s", err, shape, clip(got))
	}
	return nil
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// parseShape turns the leading JSON value of s, written with …, into a
// decoded value with the markers above.
func parseShape(s string) (any, error) {
	var b strings.Builder
	var stack []byte // '{' or '['
	inStr, esc, done := false, false, false
	rs := []rune(s)
	for i := 0; i < len(rs) && !done; i++ {
		r := rs[i]
		if inStr {
			b.WriteRune(r)
			switch {
			case esc:
				esc = false
			case r == '\\':
				esc = true
			case r == '"':
				inStr = false
			}
			continue
		}
		switch r {
		case '"':
			inStr = true
			b.WriteRune(r)
		case '{', '[':
			stack = append(stack, byte(r))
			b.WriteRune(r)
		case '}', ']':
			if len(stack) == 0 {
				return nil, fmt.Errorf("shape %q: unbalanced %c", s, r)
			}
			stack = stack[:len(stack)-1]
			b.WriteRune(r)
			done = len(stack) == 0
		case '…':
			prev := strings.TrimSpace(b.String())
			inObject := len(stack) > 0 && stack[len(stack)-1] == '{'
			member := inObject && (strings.HasSuffix(prev, ",") || strings.HasSuffix(prev, "{"))
			switch {
			case member:
				b.WriteString(quoted(rest) + `:true`)
			case len(stack) > 0 && stack[len(stack)-1] == '[' && (strings.HasSuffix(prev, ",") || strings.HasSuffix(prev, "[")):
				b.WriteString(quoted(rest))
			default:
				b.WriteString(quoted(anyValue))
			}
		default:
			b.WriteRune(r)
		}
	}
	if !done {
		return nil, fmt.Errorf("shape %q: no complete JSON object or array", s)
	}
	dec := json.NewDecoder(strings.NewReader(b.String()))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("shape %q: %w", s, err)
	}
	return v, nil
}

// quoted is s as a JSON string (the markers' NUL escaped).
func quoted(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func match(path string, want, have any) error {
	switch w := want.(type) {
	case string:
		if w == anyValue {
			return nil
		}
		h, ok := have.(string)
		if !ok {
			return fmt.Errorf("%s: want a string %q, got %v", path, w, have)
		}
		if pre, post, cut := strings.Cut(w, "…"); cut {
			if !strings.HasPrefix(h, pre) || !strings.HasSuffix(h[len(pre):], post) {
				return fmt.Errorf("%s: %q does not match %q", path, h, w)
			}
			return nil
		}
		if h != w {
			return fmt.Errorf("%s: got %q, want %q", path, h, w)
		}
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: want an object, got %v", path, have)
		}
		_, open := w[rest]
		for k, wv := range w {
			if k == rest {
				continue
			}
			hv, ok := h[k]
			if !ok {
				return fmt.Errorf("%s: no %q", path, k)
			}
			if err := match(path+"."+k, wv, hv); err != nil {
				return err
			}
		}
		if !open {
			for k := range h {
				if _, ok := w[k]; !ok {
					return fmt.Errorf("%s: %q is not documented (end the object with … to allow more)", path, k)
				}
			}
		}
	case []any:
		h, ok := have.([]any)
		if !ok {
			return fmt.Errorf("%s: want an array, got %v", path, have)
		}
		open := len(w) > 0 && w[len(w)-1] == rest
		if open {
			w = w[:len(w)-1]
		}
		if len(h) < len(w) || (!open && len(h) != len(w)) {
			return fmt.Errorf("%s: %d elements, want %d", path, len(h), len(w))
		}
		for i := range w {
			if err := match(fmt.Sprintf("%s[%d]", path, i), w[i], h[i]); err != nil {
				return err
			}
		}
	default: // numbers, booleans, null
		if fmt.Sprint(w) != fmt.Sprint(have) {
			return fmt.Errorf("%s: got %v, want %v", path, have, w)
		}
	}
	return nil
}

// Lines splits output into its lines, for logs.
func Lines(b []byte) []string {
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}
