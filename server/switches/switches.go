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
package switches

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
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
	b, err := os.ReadFile(path)
	if err != nil {
		return State{}, fmt.Errorf("read switches file: %w", err)
	}
	return Parse(b)
}

// Parse reads a state from its JSON form. An empty document is every
// switch off (every asset on).
func Parse(b []byte) (State, error) {
	var st State
	if len(b) > maxFileBytes {
		return st, fmt.Errorf("switches: %d bytes is more than a few asset names", len(b))
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return st, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return State{}, fmt.Errorf("switches: %w", err)
	}
	return st, nil
}

// Follow reads path every interval of clk (nil: the real clock) and puts
// what it holds in force, until ctx ends. A file that cannot be read or
// parsed keeps the state in force (a half-written file must not turn
// assets on or off) and is logged once per distinct error; check vets a
// state first (unknown asset names) and may be nil.
func (s *Set) Follow(ctx context.Context, clk clock.WithTicker, path string, interval time.Duration, check func(State) error, log *slog.Logger) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	var lastErr string
	for {
		st, err := ReadFile(path)
		if err == nil && check != nil {
			err = check(st)
		}
		switch {
		case err != nil:
			if err.Error() != lastErr {
				log.Warn("switches file not applied; the switches in force stay", "path", path, "err", err)
				lastErr = err.Error()
			}
		default:
			lastErr = ""
			if cur := s.Load(); !cur.Equal(st) {
				log.Info("switches changed", "suspend", st.Suspend, "suspended_assets", st.SuspendedAssets, "disabled_assets", st.DisabledAssets)
				s.Store(st)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}
