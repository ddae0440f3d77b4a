// Package switches holds the operator's on/off switches a running faucet
// obeys: suspend every drip, suspend one asset's, turn an asset off. They
// start from flags and may follow a file (the operator projects a
// ConfigMap), so a platform team turns an asset off or on without a
// restart: the pods keep their keys, limits and connections.
//
// Suspended and off answer alike (403) but mean different things: a
// suspended asset is the operator's temporary stop and stays listed as
// "suspended"; an asset that is off is a faucet the deployment does not
// offer, the incumbent's per-asset TESTNET_…_FAUCET_ENABLED=false.
//
// Only a complete document changes the switches: one JSON object, `{}`
// being the deliberate "every asset on". An empty or whitespace-only file,
// one cut short, `null`, an array or anything else keeps the switches in
// force, with a warning: a writer that truncates the file before writing
// it must not turn on, for a poll or two, an asset that was off. The
// operator therefore always writes a whole object, `{}` when nothing is
// off.
package switches

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/internal/boundedfile"
)

// State is one setting of every switch. Asset names are the faucet's:
// stx, a token's name, btc. The JSON form is the file's.
type State struct {
	// Suspend refuses every drip.
	Suspend bool `json:"suspend,omitempty"`
	// SuspendedAssets refuses these assets' drips alone.
	SuspendedAssets []string `json:"suspendedAssets,omitempty"`
	// DisabledAssets are off: not offered at all.
	DisabledAssets []string `json:"disabledAssets,omitempty"`
}

// Suspended reports whether asset's drips are suspended, by Suspend or by
// name.
func (s State) Suspended(asset string) bool {
	return s.Suspend || slices.Contains(s.SuspendedAssets, asset)
}

// Off reports whether asset is turned off.
func (s State) Off(asset string) bool { return slices.Contains(s.DisabledAssets, asset) }

// Equal reports whether s and o set every switch alike (order of names
// aside).
func (s State) Equal(o State) bool {
	same := func(a, b []string) bool {
		a, b = slices.Clone(a), slices.Clone(b)
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(slices.Compact(a), slices.Compact(b))
	}
	return s.Suspend == o.Suspend && same(s.SuspendedAssets, o.SuspendedAssets) && same(s.DisabledAssets, o.DisabledAssets)
}

// Set is the switches in force. Reads are lock-free: every drip asks.
// The zero Set is not usable; a nil *Set reads as everything on.
type Set struct {
	cur atomic.Pointer[State]
	mu  sync.Mutex
	fns []func(State)
}

// New returns a Set in state initial.
func New(initial State) *Set {
	s := &Set{}
	s.cur.Store(&initial)
	return s
}

// Load returns the state in force.
func (s *Set) Load() State {
	if s == nil {
		return State{}
	}
	return *s.cur.Load()
}

// Store puts st in force and tells the OnChange functions when it differs
// from what was.
func (s *Set) Store(st State) {
	old := s.cur.Swap(&st)
	if old != nil && old.Equal(st) {
		return
	}
	s.mu.Lock()
	fns := slices.Clone(s.fns)
	s.mu.Unlock()
	for _, fn := range fns {
		fn(st)
	}
}

// OnChange calls fn with every new state Store puts in force.
func (s *Set) OnChange(fn func(State)) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.fns = append(s.fns, fn)
	s.mu.Unlock()
}

// maxFileBytes bounds what is read of the switches file: a few names.
const maxFileBytes = 64 << 10

// ReadFile reads a state from a JSON file. Unknown fields are an error, so
// a misspelt switch is not silently ignored.
func ReadFile(path string) (State, error) {
	b, err := readBounded(path)
	if err != nil {
		return State{}, err
	}
	return Parse(b)
}

// readBounded reads path, at most one byte past maxFileBytes: an
// oversized file goes on to Parse, which refuses it in its own words.
func readBounded(path string) ([]byte, error) {
	b, err := boundedfile.Read(path, maxFileBytes)
	if tooLarge := (*boundedfile.TooLargeError)(nil); errors.As(err, &tooLarge) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read switches file: %w", err)
	}
	return b, nil
}

// Parse reads a state from its JSON form: exactly one complete JSON
// object, `{}` being every switch off (every asset on). Anything else is
// an error, an empty document included, so a file caught half-written
// changes nothing.
func Parse(b []byte) (State, error) {
	var st State
	if len(b) > maxFileBytes {
		return st, fmt.Errorf("switches: %d bytes is more than a few asset names", len(b))
	}
	doc := bytes.TrimSpace(b)
	switch {
	case len(doc) == 0:
		return st, fmt.Errorf("switches: the document is empty (%d bytes, none but whitespace): "+
			"not applied, as a file caught between truncating and writing would be; write {} to turn every asset on", len(b))
	case doc[0] != '{':
		return st, fmt.Errorf("switches: the document is not a JSON object (it starts %.8q); write {} to turn every asset on", doc)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); errors.Is(err, io.ErrUnexpectedEOF) {
		return State{}, fmt.Errorf("switches: the document is cut short (%d bytes, the object never closes): %w", len(b), err)
	} else if err != nil {
		return State{}, fmt.Errorf("switches: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return State{}, fmt.Errorf("switches: more follows the JSON object (offset %d): one object is the whole document", dec.InputOffset())
	}
	return st, nil
}

// Follow reads path every interval of clk (nil: the real clock) and puts
// what it holds in force, until ctx ends. A file that cannot be read or is
// not one complete document (Parse) keeps the state in force: a
// half-written file must not turn assets on or off. check vets a state
// first (unknown asset names) and may be nil.
func (s *Set) Follow(ctx context.Context, clk clock.WithTicker, path string, interval time.Duration, check func(State) error, log *slog.Logger) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	f := follower{set: s, path: path, check: check, log: log}
	for {
		f.poll()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// follower is one Follow's reading of its file.
type follower struct {
	set   *Set
	path  string
	check func(State) error
	log   *slog.Logger
	// lastBad identifies the last file not applied (its error and
	// content), so it is warned of once, not at every poll.
	lastBad string
}

// poll reads the file once and applies it if it is a complete document
// that check accepts.
func (f *follower) poll() {
	b, err := readBounded(f.path)
	var st State
	if err == nil {
		st, err = Parse(b)
	}
	if err == nil && f.check != nil {
		err = f.check(st)
	}
	if err != nil {
		sum := sha256.Sum256(b)
		if key := err.Error() + "\x00" + string(sum[:]); key != f.lastBad {
			f.log.Warn("switches file not applied; the switches in force stay", "path", f.path, "bytes", len(b), "err", err)
			f.lastBad = key
		}
		return
	}
	f.lastBad = ""
	if cur := f.set.Load(); !cur.Equal(st) {
		f.log.Info("switches changed", "suspend", st.Suspend, "suspended_assets", st.SuspendedAssets, "disabled_assets", st.DisabledAssets)
		f.set.Store(st)
	}
}
