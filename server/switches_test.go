package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/faucet"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// Every combination of STX, sBTC and BTC turned off, flipped on one
// running server (as the switches file does): an asset that is off answers
// both API versions as the incumbent does when its
// TESTNET_<ASSET>_FAUCET_ENABLED is false, the others drip; the info
// document and faucet_asset_enabled follow each flip.
func TestAssetsTurnedOffAtRunTime(t *testing.T) {
	e := newBTCEnv(t, options{sbtc: &sbtcOptions{funding: 1_000 * testSBTCAmount, amount: testSBTCAmount}})
	assets := []struct{ name, label string }{{"stx", "STX"}, {"sbtc", "sBTC"}, {"btc", "BTC"}}
	recipient := func(asset string) string {
		if asset == "btc" {
			return regtestAddresses(t)["p2wpkh"]
		}
		return newRecipient(t)
	}
	etags := map[string]string{} // status ETag → the X-Faucet-Assets it came with
	for mask := range 8 {
		var off []string
		for i, a := range assets {
			if mask&(1<<i) != 0 {
				off = append(off, a.name)
			}
		}
		e.switches.Store(switches.State{DisabledAssets: off})
		info := decodeInfo(t, e.do(http.MethodGet, pathInfo, nil, nil).Body.Bytes())
		var on []string
		for _, a := range []string{"stx", "sbtc", "btc"} {
			if !slices.Contains(off, a) {
				on = append(on, a)
			}
		}
		status := e.do(http.MethodGet, "/extended/v1/status", nil, nil)
		if got, want := status.Header().Get(headerFaucets), strings.Join(on, ", "); got != want {
			t.Errorf("%v off: %s %q, want %q", off, headerFaucets, got, want)
		}
		if etag := status.Header().Get("ETag"); etags[etag] != "" && etags[etag] != status.Header().Get(headerFaucets) {
			t.Errorf("%v off: ETag %s also tagged the status listing %q", off, etag, etags[etag])
		} else {
			etags[etag] = status.Header().Get(headerFaucets)
		}
		metrics := scrape(t, e.harness)
		for i, a := range assets {
			isOff := mask&(1<<i) != 0
			v1 := e.do(http.MethodPost, "/extended/v1/faucets/"+a.name+"?address="+recipient(a.name), nil, nil)
			v3 := e.do(http.MethodPost, "/extended/v3/faucets/"+a.name, strings.NewReader(`{"address":"`+recipient(a.name)+`"}`),
				map[string]string{"Content-Type": "application/json"})
			if !deprecatedFor(v1.Header().Get("Warning"), a.name) || v3.Header().Get("Warning") != "" {
				t.Errorf("%v off, %s: Warning v1 %q v3 %q", off, a.name, v1.Header().Get("Warning"), v3.Header().Get("Warning"))
			}
			state := info[a.name]
			if !isOff {
				if v1.Code != http.StatusOK || v3.Code != http.StatusOK {
					t.Errorf("%v off, %s: v1 %d %s, v3 %d %s", off, a.name, v1.Code, v1.Body, v3.Code, v3.Body)
				}
				if state == stateOff || !strings.Contains(metrics, `faucet_asset_enabled{asset="`+a.name+`"} 1`) {
					t.Errorf("%v off, %s is on: info state %q, metrics:\n%s", off, a.name, state, grepLines(metrics, "faucet_asset_enabled"))
				}
				continue
			}
			want1 := `{"success":false,"error":"` + a.label + ` faucet is not available","reason":"disabled","detail":"the ` + a.label + ` faucet is turned off by its operator"}`
			if v1.Code != http.StatusForbidden || v1.Body.String() != want1 {
				t.Errorf("%v off, v1 %s: %d %s, want 403 %s", off, a.name, v1.Code, v1.Body, want1)
			}
			if want3 := `{"error":"` + a.label + ` faucet is not available"}`; v3.Code != http.StatusForbidden || v3.Body.String() != want3 {
				t.Errorf("%v off, v3 %s: %d %s, want 403 %s", off, a.name, v3.Code, v3.Body, want3)
			}
			if state != stateOff || !strings.Contains(metrics, `faucet_asset_enabled{asset="`+a.name+`"} 0`) {
				t.Errorf("%v off, %s: info state %q, metrics:\n%s", off, a.name, state, grepLines(metrics, "faucet_asset_enabled"))
			}
		}
	}
	// Off outranks suspended; turned back on, the suspension shows again.
	e.switches.Store(switches.State{SuspendedAssets: []string{"btc"}, DisabledAssets: []string{"btc"}})
	if w := e.dripBTC("address=" + recipient("btc")); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `"error":"BTC faucet is not available"`) {
		t.Errorf("BTC off and suspended: %d %s", w.Code, w.Body)
	}
	e.switches.Store(switches.State{SuspendedAssets: []string{"btc"}})
	if w := e.dripBTC("address=" + recipient("btc")); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `"detail":"the BTC faucet is suspended"`) {
		t.Errorf("BTC suspended: %d %s", w.Code, w.Body)
	}
	if got := decodeInfo(t, e.do(http.MethodGet, pathInfo, nil, nil).Body.Bytes())["btc"]; got != stateSuspended {
		t.Errorf("BTC suspended: info state %q", got)
	}
}

// BTC turned off without a node configured is "not available"; on but
// without a node, the incumbent's "not configured". An sBTC the faucet is
// not configured for is "not available" either way.
func TestAssetOffOrNotConfigured(t *testing.T) {
	h := newHarness(t, options{offAssets: []faucet.Asset{"btc", "sbtc"}})
	for _, c := range []struct{ path, want string }{
		{"/extended/v1/faucets/btc?address=bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", `"error":"BTC faucet is not available"`},
		{"/extended/v1/faucets/sbtc?address=" + newRecipient(t), `"error":"sBTC faucet is not available"`},
	} {
		if w := h.do(http.MethodPost, c.path, nil, nil); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: %d %s, want 403 %s", c.path, w.Code, w.Body, c.want)
		}
	}
	h.switches.Store(switches.State{})
	if w := h.do(http.MethodPost, "/extended/v3/faucets/btc", strings.NewReader(`{"address":"bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080"}`), nil); w.Code != http.StatusForbidden || w.Body.String() != `{"error":"BTC Faucet is not configured."}` {
		t.Errorf("BTC on without a node: %d %s", w.Code, w.Body)
	}
	if w := h.do(http.MethodPost, "/extended/v3/faucets/sbtc", strings.NewReader(`{"address":"`+newRecipient(t)+`"}`), nil); w.Code != http.StatusForbidden || w.Body.String() != `{"error":"sBTC faucet is not available"}` {
		t.Errorf("sBTC not configured: %d %s", w.Code, w.Body)
	}
}

// decodeInfo maps each asset of an info document to its state.
func decodeInfo(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var doc struct {
		Assets []struct{ Asset, State string } `json:"assets"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range doc.Assets {
		out[a.Asset] = a.State
	}
	return out
}
