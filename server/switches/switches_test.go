package switches

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/internal/logtest"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want State
		err  string
	}{
		{in: "{}", want: State{}},
		{in: " {}\n", want: State{}},
		{in: `{"suspend":false,"suspendedAssets":[],"disabledAssets":[]}`, want: State{}},
		// Only a complete object changes anything: not an empty file, nor
		// one cut short, nor another JSON value, nor more than one.
		{in: "", err: "the document is empty"},
		{in: " \n\t\r\n", err: "the document is empty"},
		{in: `{"disabledAssets":["st`, err: "cut short"},
		{in: `{`, err: "cut short"},
		{in: `[]`, err: "not a JSON object"},
		{in: `null`, err: "not a JSON object"},
		{in: `"stx"`, err: "not a JSON object"},
		{in: `{"suspend":true} {}`, err: "more follows the JSON object"},
		{in: `{"suspend":true}x`, err: "more follows the JSON object"},
		{in: `{"suspend":true,}`, err: "invalid character"},
		{in: `{"suspend":true,"suspendedAssets":["btc"],"disabledAssets":["stx","sbtc"]}`,
			want: State{Suspend: true, SuspendedAssets: []string{"btc"}, DisabledAssets: []string{"stx", "sbtc"}}},
		{in: `{"disabledAsset":["stx"]}`, err: `unknown field "disabledAsset"`},
		{in: `{"suspend":"yes"}`, err: "cannot unmarshal"},
		{in: strings.Repeat(" ", maxFileBytes+1), err: "more than a few asset names"},
	} {
		got, err := Parse([]byte(c.in))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%.40q: %v, want an error containing %q", c.in, err, c.err)
		case c.err == "" && (err != nil || !got.Equal(c.want)):
			t.Errorf("%.40q: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
}

func TestStateQueries(t *testing.T) {
	var none *Set
	if st := none.Load(); st.Suspended("stx") || st.Off("stx") {
		t.Fatal("a nil Set is not every asset on")
	}
	st := State{SuspendedAssets: []string{"btc"}, DisabledAssets: []string{"sbtc"}}
	if !st.Suspended("btc") || st.Suspended("stx") || !st.Off("sbtc") || st.Off("btc") {
		t.Fatalf("%+v", st)
	}
	if st.Suspend = true; !st.Suspended("stx") {
		t.Fatal("suspend does not suspend stx")
	}
	if !(State{DisabledAssets: []string{"a", "b", "a"}}).Equal(State{DisabledAssets: []string{"b", "a"}}) {
		t.Fatal("order or repeats make states differ")
	}
}

// Follow applies each valid version of the file, keeps the state in force
// through an empty, broken or vetoed one, and tells OnChange of real
// changes only.
func TestFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switches.json")
	write := func(s string) {
		t.Helper()
		// As the kubelet does: a new file renamed into place.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(`{}`)
	set := New(State{})
	var changes atomic.Int32
	set.OnChange(func(State) { changes.Add(1) })
	logs := &logtest.Buffer{}
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		set.Follow(ctx, clk, path, time.Minute, func(st State) error {
			if st.Off("nope") {
				return os.ErrInvalid
			}
			return nil
		}, slog.New(slog.NewTextHandler(logs, nil)))
	}()
	defer func() { cancel(); <-done }()
	// Follow's ticker is the clock's only waiter: a step before it exists
	// would tick nothing.
	eventually.True(t, 5*time.Second, "Follow's ticker", clk.HasWaiters)
	// next lets one interval pass, so the file is read again, and waits
	// for what that read does.
	next := func(what string, ok func() bool) {
		t.Helper()
		clk.Step(time.Minute)
		if err := eventually.Wait(t, 5*time.Second, ok); err != nil {
			t.Fatalf("%s: %v; state %+v\n%s", what, err, set.Load(), logs.String())
		}
	}
	warnings := func() int { return strings.Count(logs.String(), "switches file not applied") }
	write(`{"disabledAssets":["stx"]}`)
	next("stx off", func() bool { return set.Load().Off("stx") })
	write(``)
	next("the empty file's warning", func() bool { return warnings() == 1 })
	write(`{"disabledAssets":[`)
	next("the broken file's warning", func() bool { return warnings() == 2 })
	write(`{"disabledAssets":["nope"]}`)
	next("the vetoed file's warning", func() bool { return warnings() == 3 })
	if st := set.Load(); !st.Off("stx") || st.Off("nope") {
		t.Fatalf("a broken or vetoed file changed the state: %+v", st)
	}
	write(`{"suspend":true}`)
	next("suspended, stx on", func() bool { s := set.Load(); return s.Suspend && !s.Off("stx") })
	if n := changes.Load(); n != 2 {
		t.Fatalf("%d changes told, want 2", n)
	}
}

// TestEmptyOrCutShortChangesNothing: STX off, then the file truncated (a
// writer that empties it before writing), left whitespace, cut short or
// holding another JSON value: STX stays off through each, each distinct
// content is warned of once however often it is read, and only a
// complete {} turns every asset on.
func TestEmptyOrCutShortChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "switches.json")
	write := func(s string) {
		t.Helper()
		// In place, as a writer that truncates first leaves it.
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	set := New(State{})
	var changes []State
	set.OnChange(func(st State) { changes = append(changes, st) })
	logs := &logtest.Buffer{}
	f := follower{set: set, path: path, log: slog.New(slog.NewTextHandler(logs, nil))}
	warnings := func() int { return strings.Count(logs.String(), "switches file not applied") }

	write(`{"disabledAssets":["stx"]}`)
	f.poll()
	if !set.Load().Off("stx") {
		t.Fatalf("stx not off: %+v", set.Load())
	}
	for i, bad := range []struct{ content, why string }{
		{"", "the document is empty"},
		{" \n\t\n", "the document is empty"},
		{`{"disabledAssets":["st`, "cut short"},
		{`[]`, "not a JSON object"},
		{`null`, "not a JSON object"},
		{"", "the document is empty"}, // emptied again after a bad file: warned again
	} {
		write(bad.content)
		for range 3 { // three polls of the same content: one warning
			f.poll()
		}
		if st := set.Load(); !st.Off("stx") || st.Suspend || len(st.SuspendedAssets) > 0 {
			t.Fatalf("%q changed the state to %+v", bad.content, st)
		}
		if n := warnings(); n != i+1 {
			t.Fatalf("after %q: %d warnings, want %d\n%s", bad.content, n, i+1, logs.String())
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, bad.why) || !strings.Contains(last, "level=WARN") {
			t.Fatalf("after %q: the warning %q does not say %q", bad.content, last, bad.why)
		}
	}
	write(`{}`)
	f.poll()
	if st := set.Load(); st.Off("stx") || !st.Equal(State{}) {
		t.Fatalf("{} left %+v, want every asset on", st)
	}
	if len(changes) != 2 || !changes[0].Off("stx") || !changes[1].Equal(State{}) {
		t.Fatalf("changes told %+v, want stx off then every asset on", changes)
	}
	if n := warnings(); n != 6 {
		t.Fatalf("%d warnings, want 6", n)
	}
}
