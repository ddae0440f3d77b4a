package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// What `make run` serves with no flags beyond --devnet: STX, sBTC found
// through the node's /v2/pox, the devnet's test token tUSD and (when btcd
// is at hand) BTC, each listed by /faucet/v1/info, each dripped on v1 and
// v3, each counted against its own limits.
func TestServeDevnetAssets(t *testing.T) {
	base, nodeURL := startServeDevnet(t)
	client, err := node.New(nodeURL)
	if err != nil {
		t.Fatal(err)
	}
	wantAssets := []string{"stx", "sbtc", "tusd"}
	if _, err := findBtcd(); err == nil {
		wantAssets = append(wantAssets, "btc")
	} else {
		t.Logf("no btcd (%v): BTC is not checked", err)
	}

	var info struct {
		Assets []struct {
			Asset    string `json:"asset"`
			Name     string `json:"name"`
			State    string `json:"state"`
			Decimals *int   `json:"decimals"`
			Amount   uint64 `json:"amount"`
			Limits   struct {
				Address *struct {
					Requests int `json:"requests"`
				} `json:"address"`
			} `json:"limits"`
		} `json:"assets"`
	}
	// sBTC is found once the devnet's first blocks are in; BTC once btcd's
	// coinbases mature: wait for every asset to be ready.
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		getJSON(t, base+"/faucet/v1/info", &info)
		got = got[:0]
		ready := true
		for _, a := range info.Assets {
			got = append(got, a.Asset)
			ready = ready && a.State == "ready"
		}
		if ready && slices.Equal(got, wantAssets) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("info lists %v (all ready: %v), want %v ready: %+v", got, ready, wantAssets, info.Assets)
		}
		time.Sleep(200 * time.Millisecond)
	}
	perAddress := map[string]int{}
	for _, a := range info.Assets {
		if a.Amount == 0 || a.Decimals == nil || a.Limits.Address == nil || a.Limits.Address.Requests < 2 {
			t.Fatalf("asset %s: amount %d, decimals %v, address limit %+v", a.Asset, a.Amount, a.Decimals, a.Limits.Address)
		}
		perAddress[a.Asset] = a.Limits.Address.Requests
	}
	if info.Assets[1].Name != "sBTC" || info.Assets[2].Name != "tUSD" {
		t.Errorf("token names %q, %q: want the contracts' symbols sBTC, tUSD", info.Assets[1].Name, info.Assets[2].Name)
	}

	// Each Stacks asset on v1 and v3; each token's recipients hold the
	// drip once it is mined, as the token contract's get-balance says.
	tokens := map[string]string{}
	for _, asset := range []string{"sbtc", "tusd"} {
		var id struct {
			Assets []struct {
				Asset string `json:"asset"`
				ID    string `json:"asset_identifier"`
			} `json:"assets"`
		}
		getJSON(t, base+"/faucet/v1/info", &id)
		for _, a := range id.Assets {
			if a.Asset == asset {
				tokens[asset] = a.ID
			}
		}
	}
	type paid struct {
		asset, to string
		amount    uint64
	}
	var drips []paid
	for i, asset := range []string{"stx", "sbtc", "tusd"} {
		to := newAddress(t)
		if code, body := post(t, base+"/extended/v1/faucets/"+asset+"?address="+to, "", ""); code != http.StatusOK ||
			!strings.Contains(body, `"success":true`) {
			t.Errorf("v1 %s: %d %s", asset, code, body)
		} else {
			drips = append(drips, paid{asset, to, info.Assets[i].Amount})
		}
		to = newAddress(t)
		code, body := post(t, base+"/extended/v3/faucets/"+asset, "application/json", `{"address":"`+to+`"}`)
		var v3 struct {
			Amount map[string]string `json:"amount"`
		}
		if err := json.Unmarshal([]byte(body), &v3); code != http.StatusOK || err != nil || v3.Amount[asset] != strconv.FormatUint(info.Assets[i].Amount, 10) {
			t.Errorf("v3 %s: %d %s", asset, code, body)
		} else {
			drips = append(drips, paid{asset, to, info.Assets[i].Amount})
		}
	}
	for _, d := range drips {
		if d.asset == "stx" {
			continue
		}
		id, err := stacks.ParseAssetID(tokens[d.asset])
		if err != nil {
			t.Fatalf("%s's asset_identifier %q: %v", d.asset, tokens[d.asset], err)
		}
		to, err := stacks.ParseAddress(d.to)
		if err != nil {
			t.Fatal(err)
		}
		var bal uint64
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if bal, err = client.TokenBalance(context.Background(), id.Contract, stacks.Principal{Address: to}); err == nil && bal == d.amount {
				break
			}
		}
		if bal != d.amount {
			t.Errorf("%s recipient %s holds %d (%v), want %d", d.asset, d.to, bal, err, d.amount)
		}
	}

	// One address drips tUSD up to its limit, then is refused with 429;
	// its sBTC is counted apart and still paid.
	to := newAddress(t)
	for i := range perAddress["tusd"] {
		if code, body := post(t, base+"/extended/v1/faucets/tusd?address="+to, "", ""); code != http.StatusOK {
			t.Fatalf("tUSD drip %d of %d: %d %s", i+1, perAddress["tusd"], code, body)
		}
	}
	if code, body := post(t, base+"/extended/v1/faucets/tusd?address="+to, "", ""); code != http.StatusTooManyRequests {
		t.Errorf("tUSD drip over the address limit: %d %s, want 429", code, body)
	}
	if code, body := post(t, base+"/extended/v1/faucets/sbtc?address="+to, "", ""); code != http.StatusOK {
		t.Errorf("sBTC to an address at its tUSD limit: %d %s, want 200", code, body)
	}
	if code, body := post(t, base+"/extended/v1/faucets/doge?address="+to, "", ""); code != http.StatusNotFound ||
		!strings.Contains(body, "unknown_asset") {
		t.Errorf("an asset the faucet does not drip: %d %s, want 404 unknown_asset", code, body)
	}
}

// startServeDevnet runs `serve --devnet` on a free port until the test ends
// and returns the faucet's base URL and its node's, read from the banner.
func startServeDevnet(t *testing.T, args ...string) (base, nodeURL string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, clock.RealClock{}, append([]string{"serve", "--devnet", "--listen", "127.0.0.1:0", "--block-time", "200ms",
			"--log-level", "error", "--log-format", "text"}, args...), pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop with its context")
		}
	})
	baseRE := regexp.MustCompile(`curl -sX POST '(http://127\.0\.0\.1:\d+)/extended/`)
	nodeRE := regexp.MustCompile(`node RPC: +(http://127\.0\.0\.1:\d+)`)
	sc := bufio.NewScanner(pr)
	var banner string
	for sc.Scan() {
		banner += sc.Text() + "\n"
		if m := nodeRE.FindStringSubmatch(sc.Text()); m != nil {
			nodeURL = m[1]
		}
		if m := baseRE.FindStringSubmatch(sc.Text()); m != nil && nodeURL != "" {
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return m[1], nodeURL
		}
	}
	t.Fatalf("no node RPC and curl command in the banner:\n%s", banner)
	return "", ""
}

func newAddress(t *testing.T) string {
	t.Helper()
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.TestnetAddress().String()
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
}

func post(t *testing.T, url, contentType, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
