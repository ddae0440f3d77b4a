package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDropCodeSpans(t *testing.T) {
	for in, want := range map[string]string{
		"a `[x](y)` b":         "a  b",
		"a ``x ` [y](z)`` b":   "a  b",
		"a `unclosed [x](y)":   "a `unclosed [x](y)",
		"[x](y) `c` [z](w)":    "[x](y)  [z](w)",
		"no code":              "no code",
		"``` not a span ` end": "``` not a span ` end",
	} {
		if got := dropCodeSpans(in); got != want {
			t.Errorf("dropCodeSpans(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.md", "# Title\n\n## Part\n\n## Part\n\n```\n## Not a heading\n```\n")
	write("a.md", strings.Join([]string{
		"[ok](b.md) [ok](b.md#part) [ok](b.md#part-1) [ok](#here) [web](https://example.com/x.md)",
		"[gone](c.md) [bad](b.md#not-a-heading) `[code](c.md)`",
		"```", "[fenced](c.md)", "```",
		"## Here",
	}, "\n"))
	problems, err := check(filepath.Join(dir, "a.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "c.md: no such file") || !strings.Contains(problems[1], "#not-a-heading") {
		t.Fatalf("problems: %q", problems)
	}
}
