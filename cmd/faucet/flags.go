package main

import (
	"encoding"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stxfaucet/faucet-operator/server/options"
)

// envPrefix: every flag --some-name can also be set as FAUCET_SOME_NAME.
const envPrefix = "FAUCET_"

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseWithEnv parses args; flags not given on the command line take their
// environment variable when set. Command-line flags win. Errors are
// *usageError and -h is a *helpRequest, for run to print (parseFlags).
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	return parseFlags(fs, args, true)
}

// parseFlags parses args, and with env the FAUCET_ variables. The flag
// package would print its error and the whole usage to stderr; instead a
// mistake comes back as one *usageError naming the flag as --name, and -h
// as a *helpRequest holding fs.Usage's text, which run prints to stdout.
func parseFlags(fs *flag.FlagSet, args []string, env bool) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	failed, restore := checkValues(fs)
	err := fs.Parse(args)
	if err == nil && env {
		err = setFromEnv(fs, failed)
	}
	restore()
	fs.Usage = usage
	fs.SetOutput(out)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return &helpRequest{text: helpText(fs)}
	case *failed != nil:
		return flagError(fs, *failed)
	case err != nil:
		return flagError(fs, rewordFlagError(err))
	case fs.NArg() > 0:
		return flagError(fs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	return nil
}

// setFromEnv sets each flag not given on the command line from its
// environment variable.
func setFromEnv(fs *flag.FlagSet, failed **flagValueError) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err = fs.Set(f.Name, v); err != nil && *failed != nil {
				(*failed).env = envName(f.Name)
			}
		}
	})
	return err
}

// helpText is what fs.Usage writes.
func helpText(fs *flag.FlagSet) string {
	out := fs.Output()
	var b strings.Builder
	fs.SetOutput(&b)
	fs.Usage()
	fs.SetOutput(out)
	return b.String()
}

// flagValueError is a value a flag refused.
type flagValueError struct {
	flag, value string
	env         string // the variable it came from; "" for the command line
	err         error
}

func (e *flagValueError) Error() string {
	if e.env != "" {
		return fmt.Sprintf("invalid value %q in %s for %s: %v", e.value, e.env, dashed(e.flag), e.err)
	}
	return fmt.Sprintf("invalid value %q for %s: %v", e.value, dashed(e.flag), e.err)
}

func (e *flagValueError) Unwrap() error { return e.err }

// checkedValue stands in for a flag's Value while parsing: the flag
// package turns a Set error into a bare string ("invalid value … for flag
// -x: parse error"), so the first failure is kept here, with its flag
// and a cause that says what was wanted.
type checkedValue struct {
	flag.Value
	name   string
	failed **flagValueError
}

// IsBoolFlag keeps a bool flag usable without a value.
func (v *checkedValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (v *checkedValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		e := &flagValueError{flag: v.name, value: s, err: explainValueError(v.Value, s, err)}
		if *v.failed == nil {
			*v.failed = e
		}
		return e
	}
	return nil
}

// checkValues puts a checkedValue in front of every flag of fs; restore
// puts the flags' own values back.
func checkValues(fs *flag.FlagSet) (failed **flagValueError, restore func()) {
	failed = new(*flagValueError)
	orig := map[*flag.Flag]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) {
		orig[f] = f.Value
		f.Value = &checkedValue{Value: f.Value, name: f.Name, failed: failed}
	})
	return failed, func() {
		for f, v := range orig {
			f.Value = v
		}
	}
}

// explainValueError replaces the flag package's "parse error" for its own
// value types with what the flag wants.
func explainValueError(v flag.Value, s string, err error) error {
	g, ok := v.(flag.Getter)
	if !ok || err.Error() != "parse error" {
		return err
	}
	switch g.Get().(type) {
	case time.Duration:
		return options.DurationError(s)
	case bool:
		return errors.New("want true or false")
	case int, int64:
		return errors.New("want a whole number")
	case uint, uint64:
		return errors.New("want a whole number, 0 or more")
	case float64:
		return errors.New("want a number")
	}
	return err
}

// rewordFlagError writes the flag package's other errors with --name.
func rewordFlagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Errorf("unknown flag %s", dashed(name))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("%s needs a value", dashed(name))
	}
	return err
}

// dashed is a flag as docs/ writes it: --name, or -n for one letter.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagGroup is one section of a command's -h: a title and its flags, in
// the order shown.
type flagGroup struct {
	title string
	names []string
}

// usageFunc is a FlagSet.Usage: header, then the flags by group. Flags
// in no group follow under "other flags" (all under "flags" without
// groups), so a new flag never goes missing from -h.
func usageFunc(fs *flag.FlagSet, header string, groups ...flagGroup) func() {
	return func() {
		w := fs.Output()
		fmt.Fprint(w, header)
		printFlags(w, fs, groups)
	}
}

// printFlags writes the flags as docs/serve-flags.md does, --name (the flag
// package's PrintDefaults writes -name), each with its usage and default.
func printFlags(w io.Writer, fs *flag.FlagSet, groups []flagGroup) {
	for _, sec := range flagSections(fs, groups) {
		fmt.Fprintf(w, "\n%s:\n", sec.title)
		for _, f := range sec.flags {
			printFlag(w, f)
		}
	}
}

// usageWidth is where a flag's usage text wraps.
const usageWidth = 78

func printFlag(w io.Writer, f *flag.Flag) {
	arg := argName(f.Value)
	head := "  " + dashed(f.Name)
	if arg != "" {
		head += " " + arg
	}
	text := f.Usage
	if !isZeroDefault(f) {
		def := f.DefValue
		if arg == "string" {
			def = strconv.Quote(def)
		}
		text += " (default " + def + ")"
	}
	fmt.Fprintln(w, head)
	const indent = "      "
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > usageWidth {
			fmt.Fprintln(w, line)
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}

// argName is the placeholder after --name: none for a bool flag.
func argName(v flag.Value) string {
	if a, ok := v.(interface{ ArgName() string }); ok {
		return a.ArgName()
	}
	if b, ok := v.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	g, ok := v.(flag.Getter)
	if !ok {
		return "value"
	}
	switch g.Get().(type) {
	case time.Duration:
		return "duration"
	case int, int64:
		return "int"
	case uint, uint64:
		return "uint"
	case float64:
		return "float"
	case string, encoding.TextUnmarshaler:
		return "string"
	}
	return "value"
}

// isZeroDefault reports whether f's default is its type's zero value, which
// -h leaves out, as the flag package does.
func isZeroDefault(f *flag.Flag) (zero bool) {
	typ := reflect.TypeOf(f.Value)
	var z reflect.Value
	if typ.Kind() == reflect.Pointer {
		z = reflect.New(typ.Elem())
	} else {
		z = reflect.Zero(typ)
	}
	// A value type whose String needs state it lacks: show the default.
	defer func() {
		if recover() != nil {
			zero = false
		}
	}()
	return f.DefValue == z.Interface().(flag.Value).String()
}
