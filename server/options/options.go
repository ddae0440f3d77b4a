// Package options holds the settings of `faucet serve`, one struct per
// concern. Each struct binds its own flags (BindFlags, the one place a
// flag's name, default and meaning are written), validates itself, and
// builds the engine's configuration it is about. The operator fills the
// same structs from a FaucetServer and renders them as the faucet pod's
// arguments (Args), so a new setting touches the API type, its struct
// here and the code that uses it, and nothing else.
package options

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/settings"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// Serve is every setting of `faucet serve`.
type Serve struct {
	Node     Node
	Keys     Keys
	Amounts  Amounts
	Fees     Fees
	Sending  Sending
	Batching Batching
	Limits   Limits
	Abuse    Abuse
	Budgets  Budgets
	SignIn   SignIn
	Assets   Assets
	BTC      BTC
	Store    Store
	HTTP     HTTP
	Log      Log
	Devnet   Devnet
}

// Defaults are serve's settings when no flag is given: the one definition
// the flags, their reference (docs/serve-flags.md) and the operator's
// arguments read.
func Defaults() Serve {
	return Serve{
		Node: defaultNode(), Amounts: defaultAmounts(), Fees: defaultFees(), Sending: defaultSending(),
		Batching: defaultBatching(), Limits: defaultLimits(), Abuse: defaultAbuse(), SignIn: defaultSignIn(), Assets: defaultAssets(),
		BTC: defaultBTC(), Store: defaultStore(), HTTP: defaultHTTP(), Log: defaultLog(), Devnet: defaultDevnet(),
	}
}

// binder is a concern's flags.
type binder interface{ BindFlags(fs *Flags) }

// group is one section of `faucet serve -h` and of its reference.
type group struct {
	title string
	parts []binder
}

// groups are o's concerns in the order -h shows them.
func (o *Serve) groups() []group {
	return []group{
		{"node and keys", []binder{&o.Node, &o.Keys}},
		{"amounts and fees", []binder{&o.Amounts, &o.Fees}},
		{"sending and batching", []binder{&o.Sending, &o.Batching}},
		{"limits and abuse", []binder{&o.Limits, &o.Abuse}},
		{"budget and reserve", []binder{&o.Budgets}},
		{"sign-in and tiers", []binder{&o.SignIn}},
		{"assets", []binder{&o.Assets}},
		{"BTC", []binder{&o.BTC}},
		{"store", []binder{&o.Store}},
		{"HTTP server and page", []binder{&o.HTTP}},
		{"logging", []binder{&o.Log}},
		{"devnet", []binder{&o.Devnet}},
	}
}

// BindFlags binds every flag of serve to o; o's values are the flags'
// defaults.
func (o *Serve) BindFlags(fs *Flags) {
	for _, g := range o.groups() {
		for _, p := range g.parts {
			p.BindFlags(fs)
		}
	}
}

// FlagGroup names the flags of one section of -h, in their order.
type FlagGroup struct {
	Title string
	Names []string
}

// FlagGroups lists serve's flags by concern, as the bindings name them.
func FlagGroups() []FlagGroup {
	o := Defaults()
	var out []FlagGroup
	for _, g := range o.groups() {
		fs := NewFlags(flag.NewFlagSet(g.title, flag.ContinueOnError))
		for _, p := range g.parts {
			p.BindFlags(fs)
		}
		out = append(out, FlagGroup{Title: g.title, Names: fs.Names()})
	}
	return out
}

// Args renders o as serve's command-line arguments: every flag whose
// value differs from its default, and the flags named in always, as
// --name=value, in the order -h lists them. Parsing them gives o back.
// (The operator names the flags its pod depends on whatever the image's
// defaults: where it listens and logs.)
func (o Serve) Args(always ...string) []string {
	def := Defaults()
	defs := NewFlags(flag.NewFlagSet("defaults", flag.ContinueOnError))
	def.BindFlags(defs)
	cur := NewFlags(flag.NewFlagSet("current", flag.ContinueOnError))
	o.BindFlags(cur)
	var args []string
	for _, name := range cur.Names() {
		v := cur.Std().Lookup(name).Value.String()
		if v != defs.Std().Lookup(name).Value.String() || slices.Contains(always, name) {
			args = append(args, "--"+name+"="+v)
		}
	}
	return args
}

// Validate checks the settings against each other before anything
// starts; errors name the flags.
func (o *Serve) Validate() error {
	checks := []func() error{
		o.Node.validate, o.Amounts.validate, o.Batching.validate,
		func() error { return o.Keys.validate(o.Keys.hasTreasury(o.Devnet), o.Amounts, o.Fees) },
		func() error { return o.Assets.validate(o.Devnet.On, o.Keys.hasTreasury(o.Devnet)) },
		func() error { return checkTokens(o.TokenList(), o.Keys.hasTreasury(o.Devnet)) },
		func() error { return o.BTC.validate(o.Devnet.On) },
		o.HTTP.validate, o.Store.validate, o.Log.validate, o.devnetValidate, o.suspendValidate,
		func() error { return o.Budgets.validate(o.assetNames()) }, o.SignIn.validate,
	}
	for _, c := range checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

// suspendValidate checks that --suspend-asset and --disable-asset name
// assets the faucet knows: a typo would otherwise leave the asset it meant
// on. A switches file must parse; names in it that this faucet does not
// drip are only warned of when it is applied (the operator may write a
// switch for an asset before the pods that drip it roll out, and a pod
// that refused to start, or a running one that ignored the whole file,
// would miss a suspension that matters).
func (o *Serve) suspendValidate() error {
	st := o.Abuse.Switches()
	if o.Abuse.SwitchesFile == "" {
		return o.CheckSwitches(st)
	}
	if st.Suspend || len(st.SuspendedAssets) > 0 || len(st.DisabledAssets) > 0 {
		return errors.New("--switches-file replaces --suspend, --suspend-asset and --disable-asset: set the switches in the file")
	}
	if _, err := switches.ReadFile(o.Abuse.SwitchesFile); err != nil {
		return fmt.Errorf("--switches-file: %w", err)
	}
	return nil
}

// CheckSwitches checks that st names only assets the faucet knows: those
// it drips, and for --disable-asset also the incumbent's sbtc and btc,
// which are off unless configured anyway.
func (o *Serve) CheckSwitches(st switches.State) error {
	known := o.assetNames()
	for _, n := range st.SuspendedAssets {
		if !slices.Contains(known, n) {
			return fmt.Errorf("--suspend-asset %s: the faucet drips no such asset; it drips %s", n, strings.Join(known, ", "))
		}
	}
	offable := append(slices.Clone(known), "sbtc", "btc")
	for _, n := range st.DisabledAssets {
		if !slices.Contains(offable, n) {
			return fmt.Errorf("--disable-asset %s: the faucet knows no such asset; it drips %s", n, strings.Join(known, ", "))
		}
	}
	return nil
}

// assetNames lists the assets the faucet drips: stx, its tokens, btc.
func (o *Serve) assetNames() []string {
	known := []string{settings.AssetSTX}
	for _, t := range o.TokenList() {
		known = append(known, t.Name)
	}
	if o.btcOn() {
		known = append(known, settings.AssetBTC)
	}
	return known
}

// btcOn reports whether the faucet drips BTC.
func (o *Serve) btcOn() bool { return o.BTC.On() || (o.Devnet.On && o.Devnet.BTC) }

// devnetValidate checks what --devnet changes.
func (o *Serve) devnetValidate() error {
	d := o.Devnet
	switch {
	case d.On:
		if len(o.Node.URLs) > 0 || o.Keys.File != "" || o.Keys.TreasuryFile != "" {
			return errors.New("--devnet runs its own node and keys; drop --node-url, --key-file and --treasury-key-file (--devnet-treasury generates a treasury)")
		}
		if d.Keys < 1 || d.Keys > 100 {
			return fmt.Errorf("--devnet-keys must be 1..100, got %d", d.Keys)
		}
		if d.BlockTime <= 0 {
			return fmt.Errorf("--block-time must be positive, got %s", d.BlockTime)
		}
		if d.BTC && d.BTCBlockTime <= 0 {
			return fmt.Errorf("%w, got %s", errBTCBlockTime, d.BTCBlockTime)
		}
	case len(o.Node.URLs) == 0 || o.Keys.File == "":
		return errors.New("--node-url and --key-file are required (or use --devnet)")
	case d.Treasury:
		return errors.New("--devnet-treasury needs --devnet (use --treasury-key-file with a real node)")
	}
	return nil
}

// needScheme catches a URL given without http://, which url.Parse reads
// as an error ("127.0.0.1:20443") or as the scheme "localhost". The
// userinfo is left out: it may hold a password.
func needScheme(flagName, v string) error {
	if v == "" || strings.Contains(v, "://") {
		return nil
	}
	shown := v
	if i := strings.LastIndex(v, "@"); i >= 0 {
		shown = "…" + v[i:]
	}
	return fmt.Errorf("%s %s: needs a scheme: http://%s", flagName, shown, shown)
}
