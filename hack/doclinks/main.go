// Command doclinks fails when a relative link in the given Markdown files
// points at a file or directory that does not exist, or at a heading a
// Markdown file does not have. Links with a scheme (https:, mailto:) are
// not followed; links inside code blocks and code spans are not links.
// `make verify-docs` runs it on README.md and docs/.
//
// Usage: go run ./hack/doclinks FILE.md...
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/stxfaucet/faucet-operator/cmd/faucet/mdanchor"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: doclinks FILE.md...")
		os.Exit(2)
	}
	broken := 0
	for _, file := range os.Args[1:] {
		problems, err := check(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, p := range problems {
			fmt.Println(p)
		}
		broken += len(problems)
	}
	if broken > 0 {
		fmt.Printf("%d broken links\n", broken)
		os.Exit(1)
	}
}

var (
	// inlineLink is [text](target) or ![alt](target "title").
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refLink is a reference definition: [name]: target.
	refLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// htmlAnchor is an explicit anchor: <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// check returns file's broken links as "file:line: message".
func check(file string) ([]string, error) {
	lines, err := readLines(file)
	if err != nil {
		return nil, err
	}
	var problems []string
	anchorCache := map[string]map[string]bool{}
	for i, line := range proseLines(lines) {
		if line == "" {
			continue
		}
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if scheme.MatchString(target) {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(resolved); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", file, i+1, target))
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			anchors, ok := anchorCache[resolved]
			if !ok {
				if anchors, err = headingAnchors(resolved); err != nil {
					return nil, err
				}
				anchorCache[resolved] = anchors
			}
			if !anchors[frag] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading #%s in %s", file, i+1, target, frag, resolved))
			}
		}
	}
	return problems, nil
}

func readLines(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// proseLines is lines with fenced code blocks blanked and code spans
// removed, so neither is read as a link or a heading.
func proseLines(lines []string) []string {
	out := make([]string, len(lines))
	for i, line := range outsideFences(lines) {
		out[i] = dropCodeSpans(line)
	}
	return out
}

// outsideFences is lines with those of fenced code blocks (fences
// included) blanked.
func outsideFences(lines []string) []string {
	out := make([]string, len(lines))
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		out[i] = line
	}
	return out
}

// dropCodeSpans removes line's code spans: a run of backticks up to the
// next run of as many. An unmatched run is kept as text.
func dropCodeSpans(line string) string {
	var b strings.Builder
	for {
		start := strings.IndexByte(line, '`')
		if start < 0 {
			b.WriteString(line)
			return b.String()
		}
		n := start
		for n < len(line) && line[n] == '`' {
			n++
		}
		ticks := line[start:n]
		end := -1
		for j := n; j < len(line); {
			k := strings.Index(line[j:], ticks)
			if k < 0 {
				break
			}
			k += j
			m := k + len(ticks)
			if m == len(line) || line[m] != '`' {
				end = m
				break
			}
			for m < len(line) && line[m] == '`' {
				m++
			}
			j = m
		}
		b.WriteString(line[:start])
		if end < 0 {
			b.WriteString(ticks)
			line = line[n:]
			continue
		}
		line = line[end:]
	}
}

// headingAnchors are the fragments GitHub gives file's headings (lower
// case, punctuation dropped, spaces as hyphens, -1, -2... for repeats),
// and its explicit <a id> anchors.
func headingAnchors(file string) (map[string]bool, error) {
	lines, err := readLines(file)
	if err != nil {
		return nil, err
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range outsideFences(lines) {
		trimmed := strings.TrimLeft(line, " ")
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		text, ok := headingText(trimmed)
		if !ok {
			continue
		}
		slug := mdanchor.Heading(text)
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors, nil
}

// headingText is the text of an ATX heading ("## Title ##"), if line is one.
func headingText(line string) (string, bool) {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(line) && line[n] != ' ') {
		return "", false
	}
	text := strings.TrimSpace(line[n:])
	text = strings.TrimSpace(strings.TrimRight(text, "#"))
	return text, true
}
