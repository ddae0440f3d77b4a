package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// Every request the devnet banner prints works as pasted: the drips of
// STX and each token on v1 and v3, the status, and the recipient's
// balances on the node, sBTC's (found in /v2/pox) included, which then
// show exactly the two drips of each asset.
func TestDevnetBannerRequestsWork(t *testing.T) {
	banner, _ := startBannerDevnet(t)
	for _, want := range []string{"faucet addresses: ST", "node RPC:         http://127.0.0.1:", "BTC: off (--devnet-btc=false)"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	sections := bannerSections(banner)
	waitAssetsReady(t, sections, "stx", "sbtc", "tusd")
	var to string
	for _, asset := range []string{"stx", "sbtc", "tusd"} {
		for _, v := range []string{"v1", "v3"} {
			line := sections.drip(t, asset, v)
			code, body := runCurl(t, line)
			if code != http.StatusOK {
				t.Fatalf("%s\n→ %d %s", line, code, body)
			}
			if m := regexp.MustCompile(`address[=":]+(ST[0-9A-Z]+)`).FindStringSubmatch(line); m != nil {
				if to != "" && m[1] != to {
					t.Fatalf("the banner's requests name two recipients, %s and %s", to, m[1])
				}
				to = m[1]
			}
		}
	}
	if code, body := runCurl(t, sections.find(t, "/extended/v1/status'")); code != http.StatusOK || !strings.Contains(body, `"status":"ready"`) {
		t.Errorf("status: %d %s", code, body)
	}
	// Each asset's balance line reads what its two drips paid, once mined
	// (the devnet mines every 200 ms).
	for asset, want := range map[string]uint64{"stx": 2 * 500_000_000, "sbtc": 2 * options.DevnetSBTCAmount, "tusd": 2 * options.DevnetTestTokenAmount} {
		line := sections.balance(t, asset)
		if !strings.Contains(line, to) {
			t.Errorf("%s balance line names another recipient than %s: %s", asset, to, line)
		}
		var got uint64
		var err error
		if werr := eventually.Wait(t, 20*time.Second, func() bool {
			got, err = readBalance(t, asset, line)
			return err == nil && got == want
		}); werr != nil {
			t.Errorf("%s balance by the banner's command:\n%s\n→ %d (%v), want %d", asset, line, got, err, want)
		}
	}
}

// An asset turned off at start is named as off in the banner, with none
// of its requests, and in the start-up log; the others' requests work.
func TestDevnetBannerAssetsOff(t *testing.T) {
	banner, logs := startBannerDevnet(t, "--disable-asset", "stx,sbtc")
	for _, want := range []string{"  STX: off: turned off by its operator", "\nsbtc: off: turned off by its operator"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	for _, off := range []string{"/faucets/stx", "/faucets/sbtc", "/v2/accounts/"} {
		if strings.Contains(banner, off) {
			t.Errorf("banner has a request of an asset that is off (%s):\n%s", off, banner)
		}
	}
	waitAssetsReady(t, bannerSections(banner), "tusd")
	for _, line := range strings.Split(banner, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "curl ") {
			if code, body := runCurl(t, line); code != http.StatusOK {
				t.Errorf("%s\n→ %d %s", line, code, body)
			}
		}
	}
	log := logs.String()
	for _, want := range []string{`msg="STX faucet off"`, `msg="token faucet off" why="turned off by its operator`, `msg="token faucet on" asset=tusd`} {
		if !strings.Contains(log, want) {
			t.Errorf("start-up log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, `msg="token faucet on" asset=sbtc`) {
		t.Errorf("the log says sBTC is on:\n%s", log)
	}
}

// startBannerDevnet runs `faucet serve --devnet` without BTC, as a
// process of its own (its log goes to its stderr), until the test ends
// and returns its banner, once whole, and its log.
func startBannerDevnet(t *testing.T, args ...string) (string, *lockedBuffer) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the faucet as a process")
	}
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--devnet", "--devnet-btc=false", "--listen", "127.0.0.1:0",
		"--block-time", "200ms", "--log-level", "info", "--log-format", "text"}, args...)...)
	cmd.Env = append(os.Environ(), asFaucetEnv+"=1")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	// The BTC section comes last but for the treasury, which this run has
	// none of.
	if err := eventually.Wait(t, 30*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		return strings.Contains(stdout.String(), "\nBTC: ")
	}); err != nil || !strings.Contains(stdout.String(), "\nBTC: ") {
		select {
		case <-exited:
			err = exitErr
		default:
		}
		t.Fatalf("no whole banner (%v):\n%s\n%s", err, stdout, stderr)
	}
	return stdout.String(), stderr
}

// waitAssetsReady waits until the faucet of the banner reports every
// asset ready: sBTC once the faucet has read /v2/pox, all once it has
// read its keys' balances.
func waitAssetsReady(t *testing.T, s sections, assets ...string) {
	t.Helper()
	api := strings.TrimSpace(strings.TrimPrefix(s.find(t, "faucet API:"), "faucet API:"))
	var info struct {
		Assets []struct {
			Asset string `json:"asset"`
			State string `json:"state"`
		} `json:"assets"`
	}
	if err := eventually.Wait(t, 30*time.Second, func() bool {
		getJSON(t, api+"/faucet/v1/info", &info)
		ready := 0
		for _, a := range info.Assets {
			if slices.Contains(assets, a.Asset) && a.State == "ready" {
				ready++
			}
		}
		return ready == len(assets)
	}); err != nil {
		t.Fatalf("assets not ready: %+v", info.Assets)
	}
}

// sections are the banner's lines by the asset they belong to.
type sections struct{ lines []string }

func bannerSections(banner string) sections { return sections{strings.Split(banner, "\n")} }

// find is the one banner line containing s, trimmed.
func (s sections) find(t *testing.T, s2 string) string {
	t.Helper()
	var out []string
	for _, l := range s.lines {
		if strings.Contains(l, s2) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d banner lines contain %q, want one:\n%s", len(out), s2, strings.Join(s.lines, "\n"))
	}
	return out[0]
}

// drip is asset's drip request of API version v.
func (s sections) drip(t *testing.T, asset, v string) string {
	t.Helper()
	suffix := "/extended/" + v + "/faucets/" + asset + "'"
	if v == "v1" {
		suffix = "/extended/v1/faucets/" + asset + "?address="
	}
	return s.find(t, suffix)
}

// balance is the request reading the example recipient's balance of asset.
func (s sections) balance(t *testing.T, asset string) string {
	t.Helper()
	if asset == "stx" {
		return s.find(t, "/v2/accounts/")
	}
	// The call-read line follows the asset's comment line.
	for i, l := range s.lines {
		if strings.HasPrefix(strings.TrimSpace(l), "# ") && strings.Contains(l, "'s "+asset+" balance") && i+1 < len(s.lines) {
			return strings.TrimSpace(s.lines[i+1])
		}
	}
	t.Fatalf("no %s balance line in the banner:\n%s", asset, strings.Join(s.lines, "\n"))
	return ""
}

// readBalance runs a balance line and reads the amount it answers: STX's
// account balance, or a token's get-balance result, (ok uN).
func readBalance(t *testing.T, asset, line string) (uint64, error) {
	t.Helper()
	code, body := runCurl(t, line)
	if code != http.StatusOK {
		return 0, errors.New("HTTP " + strconv.Itoa(code) + ": " + body)
	}
	var v struct {
		Balance string `json:"balance"`
		Okay    bool   `json:"okay"`
		Result  string `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return 0, err
	}
	hexAmount := strings.TrimPrefix(v.Balance, "0x")
	if asset != "stx" {
		if !v.Okay || !strings.HasPrefix(v.Result, "0x0701") || len(v.Result) != 6+32 {
			return 0, errors.New("not (ok uint): " + body)
		}
		hexAmount = v.Result[6:]
	}
	if len(hexAmount) > 16 && strings.Trim(hexAmount[:len(hexAmount)-16], "0") != "" {
		return 0, errors.New("more than 64 bits: " + body)
	}
	return strconv.ParseUint(hexAmount[max(0, len(hexAmount)-16):], 16, 64)
}

// runCurl runs a curl line of the banner as curl would, after splitting
// it into words as a POSIX shell does (the banner quotes with single
// quotes only): -s, -X, -H and -d, and one URL.
func runCurl(t *testing.T, line string) (int, string) {
	t.Helper()
	words, err := shellWords(line)
	if err != nil || len(words) == 0 || words[0] != "curl" {
		t.Fatalf("not a curl command line (%v): %s", err, line)
	}
	method, url, data := http.MethodGet, "", ""
	header := http.Header{}
	for i := 1; i < len(words); i++ {
		w := words[i]
		next := func() string {
			i++
			if i >= len(words) {
				t.Fatalf("%s takes a value: %s", w, line)
			}
			return words[i]
		}
		switch {
		case w == "-s":
		case w == "-X", w == "-sX":
			method = next()
		case w == "-H":
			k, v, ok := strings.Cut(next(), ":")
			if !ok {
				t.Fatalf("bad header in %s", line)
			}
			header.Set(k, strings.TrimSpace(v))
		case w == "-d":
			data = next()
			if method == http.MethodGet {
				method = http.MethodPost
			}
		case strings.HasPrefix(w, "-"):
			t.Fatalf("a curl option this test does not know, %s: %s", w, line)
		default:
			if url != "" {
				t.Fatalf("two URLs in %s", line)
			}
			url = w
		}
	}
	req, err := http.NewRequest(method, url, strings.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	req.Header = header
	if data != "" && header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // curl -d's default
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// shellWords splits line as a POSIX shell splits a command of plain words
// and single-quoted strings; anything else a shell would read otherwise
// (double quotes, escapes, expansions, operators) is refused.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, c := range line {
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case strings.ContainsRune("\"\\$`&|;<>()*?[]#~{}!", c):
			return nil, errors.New("unquoted " + string(c))
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quoted {
		return nil, errors.New("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
