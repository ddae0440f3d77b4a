package options_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/options"
)

// --stall-after: 30m unless given, 0 turns stall reports off, a negative
// duration is refused naming the flag, and the operator's Args writes it
// only when it differs from the default.
func TestStallAfterFlag(t *testing.T) {
	if d := options.Defaults().HTTP.StallAfter; d != 30*time.Minute {
		t.Errorf("default --stall-after %s, want 30m", d)
	}
	o := parse(t, "--stall-after=1h")
	if o.HTTP.StallAfter != time.Hour {
		t.Errorf("--stall-after=1h parses to %s", o.HTTP.StallAfter)
	}
	if got, want := o.Args(), []string{"--stall-after=1h0m0s"}; !slices.Equal(got, want) {
		t.Errorf("Args() = %q, want %q", got, want)
	}
	for name, tc := range map[string]struct {
		arg  string
		want string // "" = valid
	}{
		"the default": {arg: "--stall-after=30m"},
		"never":       {arg: "--stall-after=0"},
		"a minute":    {arg: "--stall-after=1m"},
		"negative":    {arg: "--stall-after=-5m", want: "--stall-after must not be negative (0 = never report a stall), got -5m0s"},
	} {
		t.Run(name, func(t *testing.T) {
			o := parse(t, "--devnet", tc.arg)
			checkValidate(t, o.Validate(), tc.want)
		})
	}
}
