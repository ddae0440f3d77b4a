package options

import (
	"encoding"
	"flag"
	"time"
)

// Flags is a flag set that takes each flag's default from the variable it
// binds and remembers the order flags were bound in (the order -h shows
// and Args renders).
type Flags struct {
	fs    *flag.FlagSet
	names []string
}

// NewFlags wraps fs.
func NewFlags(fs *flag.FlagSet) *Flags { return &Flags{fs: fs} }

// Std is the underlying flag set, to parse with.
func (f *Flags) Std() *flag.FlagSet { return f.fs }

// Names lists the flags in the order they were bound.
func (f *Flags) Names() []string { return append([]string(nil), f.names...) }

func (f *Flags) add(name string) { f.names = append(f.names, name) }

// bind binds p with stdVar (one of flag.FlagSet's XxxVar methods), taking
// *p as the default.
func bind[T any](f *Flags, stdVar func(p *T, name string, value T, usage string), p *T, name, usage string) {
	stdVar(p, name, *p, usage)
	f.add(name)
}

// String binds a string flag; its default is *p.
func (f *Flags) String(p *string, name, usage string) { bind(f, f.fs.StringVar, p, name, usage) }

// Bool binds a bool flag; its default is *p.
func (f *Flags) Bool(p *bool, name, usage string) { bind(f, f.fs.BoolVar, p, name, usage) }

// Int binds an int flag; its default is *p.
func (f *Flags) Int(p *int, name, usage string) { bind(f, f.fs.IntVar, p, name, usage) }

// Int64 binds an int64 flag; its default is *p.
func (f *Flags) Int64(p *int64, name, usage string) { bind(f, f.fs.Int64Var, p, name, usage) }

// Uint binds a uint flag; its default is *p.
func (f *Flags) Uint(p *uint, name, usage string) { bind(f, f.fs.UintVar, p, name, usage) }

// Uint64 binds a uint64 flag; its default is *p.
func (f *Flags) Uint64(p *uint64, name, usage string) { bind(f, f.fs.Uint64Var, p, name, usage) }

// Duration binds a duration flag; its default is *p.
func (f *Flags) Duration(p *time.Duration, name, usage string) {
	bind(f, f.fs.DurationVar, p, name, usage)
}

// Text binds a flag of a text type; its default is p's value.
func (f *Flags) Text(p interface {
	encoding.TextMarshaler
	encoding.TextUnmarshaler
}, name, usage string) {
	f.fs.TextVar(p, name, p, usage)
	f.add(name)
}

// Var binds a flag of a Value of its own; its default is v's value.
func (f *Flags) Var(v flag.Value, name, usage string) {
	f.fs.Var(v, name, usage)
	f.add(name)
}
