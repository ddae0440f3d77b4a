package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// `faucet serve --switches-file`, as the operator runs it: the faucet
// starts with a file naming an asset it does not drip (a warning, not a
// refusal to start), then follows the file as it is replaced: STX off,
// then on, without a restart.
func TestServeFollowsTheSwitchesFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "switches.json")
	write := func(s string) {
		t.Helper()
		tmp := file + ".new" // replaced whole, as the kubelet does
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"suspendedAssets":["doge"]}`)
	base, _ := startServeDevnet(t, "--devnet-btc=false", "--switches-file", file)
	fresh := func() string {
		k, err := stacks.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		return k.TestnetAddress().String()
	}
	for _, step := range []struct {
		file     string
		eligible bool
		code     int
	}{{`{"disabledAssets":["stx"]}`, false, http.StatusForbidden}, {`{}`, true, http.StatusOK}} {
		write(step.file)
		// Eligibility reserves nothing: it can be asked until the switch
		// is in force without using up a limit.
		if err := eventually.Wait(t, 10*time.Second, func() bool {
			body := get(t, base+"/faucet/v1/eligibility?asset=stx&address="+fresh())
			return strings.Contains(body, `"eligible":`) && strings.Contains(body, `"eligible":true`) == step.eligible
		}); err != nil {
			t.Fatalf("%s not in force: %v", step.file, err)
		}
		if code, body := post(t, base+"/extended/v1/faucets/stx?address="+fresh(), "", ""); code != step.code {
			t.Fatalf("%s: a drip answered %d %s, want %d", step.file, code, body, step.code)
		}
	}
}
