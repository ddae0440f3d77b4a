package options_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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

// The poll cadences default to the engine's, parse to their fields and
// render back only when they differ from the defaults.
func TestNodePollIntervalFlags(t *testing.T) {
	d := options.Defaults().Node
	if d.PollInterval != time.Second || d.BusyPollInterval != 100*time.Millisecond {
		t.Errorf("defaults: poll %s, busy poll %s; want 1s and 100ms", d.PollInterval, d.BusyPollInterval)
	}
	args := []string{"--node-poll-interval=30s", "--node-busy-poll-interval=2s"}
	o := parse(t, args...)
	if o.Node.PollInterval != 30*time.Second || o.Node.BusyPollInterval != 2*time.Second {
		t.Errorf("%q parse to poll %s, busy poll %s", args, o.Node.PollInterval, o.Node.BusyPollInterval)
	}
	if got := o.Args(); !slices.Equal(got, args) {
		t.Errorf("Args() = %q, want %q", got, args)
	}
	o.Node.PollInterval, o.Node.BusyPollInterval = d.PollInterval, d.BusyPollInterval
	if got := o.Args(); len(got) != 0 {
		t.Errorf("the default cadences render as %q, want no flag", got)
	}
}

// Validate takes cadences from 50ms to 1m, the busy one no slower than
// the idle one, and refuses the rest naming the flag and the bound.
func TestNodePollIntervalBounds(t *testing.T) {
	for name, tc := range map[string]struct {
		poll, busy time.Duration
		want       string // "" = valid
	}{
		"the defaults":                 {poll: time.Second, busy: 100 * time.Millisecond},
		"a gateway's slow cadence":     {poll: 20 * time.Second, busy: 3 * time.Second},
		"both at the least":            {poll: 50 * time.Millisecond, busy: 50 * time.Millisecond},
		"both at the most":             {poll: time.Minute, busy: time.Minute},
		"busy slower than idle":        {poll: time.Second, busy: 2 * time.Second, want: "--node-busy-poll-interval 2s is above --node-poll-interval 1s"},
		"idle below the default busy":  {poll: 50 * time.Millisecond, busy: 100 * time.Millisecond, want: "--node-busy-poll-interval 100ms is above --node-poll-interval 50ms"},
		"a zero poll":                  {poll: 0, busy: 100 * time.Millisecond, want: "--node-poll-interval must be 50ms..1m0s, got 0s"},
		"a negative busy poll":         {poll: time.Second, busy: -time.Second, want: "--node-busy-poll-interval must be 50ms..1m0s, got -1s"},
		"a zero busy poll":             {poll: time.Second, busy: 0, want: "--node-busy-poll-interval must be 50ms..1m0s, got 0s"},
		"a poll faster than 50ms":      {poll: 10 * time.Millisecond, busy: 10 * time.Millisecond, want: "--node-poll-interval must be 50ms..1m0s, got 10ms"},
		"a poll slower than a minute":  {poll: time.Minute + time.Second, busy: time.Second, want: "--node-poll-interval must be 50ms..1m0s, got 1m1s"},
		"a busy poll slower than 1m":   {poll: time.Minute, busy: 2 * time.Minute, want: "--node-busy-poll-interval must be 50ms..1m0s, got 2m0s"},
		"a busy poll faster than 50ms": {poll: time.Second, busy: time.Millisecond, want: "--node-busy-poll-interval must be 50ms..1m0s, got 1ms"},
	} {
		t.Run(name, func(t *testing.T) {
			o := options.Defaults()
			o.Node.URLs, o.Keys.File = options.URLList{"https://api.testnet.hiro.so"}, "/keys"
			o.Node.PollInterval, o.Node.BusyPollInterval = tc.poll, tc.busy
			checkValidate(t, o.Validate(), tc.want)
		})
	}
}
