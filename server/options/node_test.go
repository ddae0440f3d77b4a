package options_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/options"
)

// A secret that must never show in an error.
const apiKey = "hiro-key-5f0c9a1e"

// --node-headers-file is read and checked at start-up: a good file gives
// its headers, a bad one stops the start with an error naming the flag,
// the file and the line, and quoting no value.
func TestNodeHeadersFile(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		text string
		want string // "" = valid
	}{
		"an api key":         {text: "# Hiro\n\nx-api-key: " + apiKey + "\n"},
		"no colon":           {text: "# Hiro\nx-api-key " + apiKey + "\n", want: "line 2: want \"Name: value\""},
		"a reserved name":    {text: "x-api-key: " + apiKey + "\nUser-Agent: " + apiKey + "\n", want: "line 2: User-Agent is set by the faucet itself"},
		"an empty value":     {text: "x-api-key:   \n", want: "line 1: the header has no value"},
		"a value with a NUL": {text: "x-api-key: " + apiKey + "\x00\n", want: "line 1: the value has characters"},
		"no header at all":   {text: "# nothing yet\n", want: "no header lines"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			o := options.Defaults()
			o.Node.URLs, o.Keys.File, o.Node.HeadersFile = options.URLList{"https://api.testnet.hiro.so"}, "/keys", path
			err := o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				h, err := o.Node.Headers()
				if err != nil || h.Get("X-Api-Key") != apiKey || len(h) != 1 {
					t.Fatalf("Headers = %v, %v", h, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted %q", tc.text)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "--node-headers-file: ") || !strings.Contains(msg, path) || !strings.Contains(msg, tc.want) {
				t.Errorf("Validate: %q, want --node-headers-file, %s and %q", msg, path, tc.want)
			}
			if strings.Contains(msg, apiKey) {
				t.Errorf("Validate's error quotes the secret: %q", msg)
			}
		})
	}
}

// A missing file stops the start; no file means no headers.
func TestNodeHeadersFileMissing(t *testing.T) {
	o := options.Defaults()
	o.Node.URLs, o.Keys.File = options.URLList{"https://api.testnet.hiro.so"}, "/keys"
	if h, err := o.Node.Headers(); h != nil || err != nil {
		t.Errorf("no file: Headers = %v, %v", h, err)
	}
	o.Node.HeadersFile = filepath.Join(t.TempDir(), "absent")
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--node-headers-file") || !strings.Contains(err.Error(), "absent") {
		t.Errorf("Validate: %v, want an error naming --node-headers-file and the file", err)
	}
	// The flag parses to the field (TestArgsRoundTrip renders it back).
	if got := parse(t, "--node-headers-file", "/etc/h").Node.HeadersFile; got != "/etc/h" {
		t.Errorf("--node-headers-file parses to %q", got)
	}
}
