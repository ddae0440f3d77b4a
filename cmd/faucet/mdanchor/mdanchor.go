// Package mdanchor is GitHub's rule for the anchor of a Markdown heading,
// in one place for the flag references faucet writes (cmd/faucet's
// flagDoc links its sections) and the link check that reads them
// (hack/doclinks).
package mdanchor

import (
	"regexp"
	"strings"
	"unicode"
)

// linkInHeading is a link in a heading, whose text the anchor keeps.
var linkInHeading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// Heading is the fragment GitHub gives a heading's text: lower case,
// letters, digits, '-' and '_' kept, spaces as '-', everything else
// dropped; a Markdown link counts by its text. A repeated heading's
// "-1", "-2"… is the caller's to add.
func Heading(text string) string {
	text = linkInHeading.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
