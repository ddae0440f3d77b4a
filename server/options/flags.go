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

// String binds a string flag; its default is *p.
func (f *Flags) String(p *string, name, usage string) {
	f.fs.StringVar(p, name, *p, usage)
	f.add(name)
}

// Bool binds a bool flag; its default is *p.
func (f *Flags) Bool(p *bool, name, usage string) {
	f.fs.BoolVar(p, name, *p, usage)
	f.add(name)
}

// Int binds an int flag; its default is *p.
func (f *Flags) Int(p *int, name, usage string) {
	f.fs.IntVar(p, name, *p, usage)
	f.add(name)
}

// Int64 binds an int64 flag; its default is *p.
func (f *Flags) Int64(p *int64, name, usage string) {
	f.fs.Int64Var(p, name, *p, usage)
	f.add(name)
}

// Uint binds a uint flag; its default is *p.
func (f *Flags) Uint(p *uint, name, usage string) {
	f.fs.UintVar(p, name, *p, usage)
	f.add(name)
}

// Uint64 binds a uint64 flag; its default is *p.
func (f *Flags) Uint64(p *uint64, name, usage string) {
	f.fs.Uint64Var(p, name, *p, usage)
	f.add(name)
}

// Duration binds a duration flag; its default is *p.
func (f *Flags) Duration(p *time.Duration, name, usage string) {
	f.fs.DurationVar(p, name, *p, usage)
	f.add(name)
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
