package web

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// get serves one request through Handler.
func get(t *testing.T, method, target string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assetNames lists the embedded files.
func assetNames(t *testing.T) []string {
	t.Helper()
	entries, err := fs.ReadDir(assets, "assets")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("assets/%s: subdirectories are not served", e.Name())
			continue
		}
		names = append(names, e.Name())
	}
	return names
}

func readAsset(t *testing.T, name string) string {
	t.Helper()
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestContentTypes(t *testing.T) {
	tests := []struct{ path, ctype, cache string }{
		{"/", "text/html; charset=utf-8", "no-cache"},
		{"/assets/app.css", "text/css; charset=utf-8", "public, max-age=300"},
		{"/assets/app.js", "text/javascript; charset=utf-8", "public, max-age=300"},
		{"/assets/c32.js", "text/javascript; charset=utf-8", "public, max-age=300"},
		{"/assets/btcaddr.js", "text/javascript; charset=utf-8", "public, max-age=300"},
		{"/assets/sha256.js", "text/javascript; charset=utf-8", "public, max-age=300"},
		{"/assets/pow-worker.js", "text/javascript; charset=utf-8", "public, max-age=300"},
		{"/assets/format.js", "text/javascript; charset=utf-8", "public, max-age=300"},
		{"/assets/eventcode.js", "text/javascript; charset=utf-8", "public, max-age=300"},
		{"/assets/favicon.svg", "image/svg+xml", "public, max-age=300"},
	}
	for _, tt := range tests {
		resp := get(t, http.MethodGet, tt.path, nil)
		b := body(t, resp)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", tt.path, resp.StatusCode, b)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tt.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tt.path, got, tt.ctype)
		}
		if got := resp.Header.Get("Cache-Control"); got != tt.cache {
			t.Errorf("GET %s: Cache-Control %q, want %q", tt.path, got, tt.cache)
		}
		if b == "" {
			t.Errorf("GET %s: empty body", tt.path)
		}
	}
}

func TestEveryAssetServed(t *testing.T) {
	for _, name := range assetNames(t) {
		target := "/assets/" + name
		if name == indexFile {
			target = "/"
		}
		resp := get(t, http.MethodGet, target, nil)
		if b := body(t, resp); resp.StatusCode != http.StatusOK || b != readAsset(t, name) {
			t.Errorf("GET %s: %d, body matches the file: %v", target, resp.StatusCode, b == readAsset(t, name))
		}
		if ct := resp.Header.Get("Content-Type"); ct == "application/octet-stream" {
			t.Errorf("GET %s: no content type known for %s; add it to contentTypes", target, path.Ext(name))
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	directives := []string{
		"default-src 'none'", "script-src 'self'", "worker-src 'self'", "style-src 'self'",
		"img-src 'self' data:", "connect-src 'self'", "base-uri 'none'", "form-action 'none'",
		"frame-ancestors 'none'",
	}
	for _, p := range []string{"/", "/assets/app.js", "/assets/missing.js"} {
		resp := get(t, http.MethodGet, p, nil)
		csp := resp.Header.Get("Content-Security-Policy")
		got := strings.Split(csp, ";")
		for i := range got {
			got[i] = strings.TrimSpace(got[i])
		}
		for _, d := range directives {
			if !slices.Contains(got, d) {
				t.Errorf("GET %s: CSP %q lacks %q", p, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: CSP allows unsafe sources: %q", p, csp)
		}
		if v := resp.Header.Get("X-Content-Type-Options"); v != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q", p, v)
		}
		if v := resp.Header.Get("Referrer-Policy"); v != "no-referrer" {
			t.Errorf("GET %s: Referrer-Policy %q", p, v)
		}
	}
}

func TestETag(t *testing.T) {
	for _, p := range []string{"/", "/assets/app.css"} {
		first := get(t, http.MethodGet, p, nil)
		full := body(t, first)
		etag := first.Header.Get("ETag")
		if !regexp.MustCompile(`^"[A-Za-z0-9_-]{16,}"$`).MatchString(etag) {
			t.Fatalf("GET %s: ETag %q is not a strong, quoted hash", p, etag)
		}
		if again := get(t, http.MethodGet, p, nil); again.Header.Get("ETag") != etag {
			t.Errorf("GET %s: ETag changed between requests", p)
		}
		for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
			resp := get(t, http.MethodGet, p, map[string]string{"If-None-Match": inm})
			if resp.StatusCode != http.StatusNotModified {
				t.Errorf("GET %s If-None-Match %s: %d, want 304", p, inm, resp.StatusCode)
			}
			if b := body(t, resp); b != "" {
				t.Errorf("GET %s: 304 with a body of %d bytes", p, len(b))
			}
			if resp.Header.Get("ETag") != etag || resp.Header.Get("Cache-Control") == "" {
				t.Errorf("GET %s: 304 without ETag or Cache-Control: %v", p, resp.Header)
			}
		}
		resp := get(t, http.MethodGet, p, map[string]string{"If-None-Match": `"stale"`})
		if resp.StatusCode != http.StatusOK || body(t, resp) != full {
			t.Errorf("GET %s with a stale ETag: %d", p, resp.StatusCode)
		}
	}
	a := get(t, http.MethodGet, "/assets/app.js", nil).Header.Get("ETag")
	b := get(t, http.MethodGet, "/assets/c32.js", nil).Header.Get("ETag")
	if a == b {
		t.Errorf("two different files share the ETag %s", a)
	}
}

func TestHead(t *testing.T) {
	for _, p := range []string{"/", "/assets/app.js"} {
		resp := get(t, http.MethodHead, p, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s: %d", p, resp.StatusCode)
		}
		if b := body(t, resp); b != "" {
			t.Errorf("HEAD %s: body of %d bytes", p, len(b))
		}
		if resp.Header.Get("Content-Length") == "" || resp.Header.Get("ETag") == "" {
			t.Errorf("HEAD %s: headers %v", p, resp.Header)
		}
	}
}

func TestNotFound(t *testing.T) {
	for _, p := range []string{
		"/assets/missing.js", "/assets/", "/assets", "/assets/index.html", "/index.html",
		"/assets/sub/app.js", "/assets/..%2fweb.go", "/assets/.hidden", "/web.go", "/favicon.ico",
	} {
		resp := get(t, http.MethodGet, p, nil)
		b := body(t, resp)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(b), &got); err != nil {
			t.Errorf("GET %s: body %q: %v", p, b, err)
			continue
		}
		if len(got) != 2 || got["success"] != false || got["error"] != "not found" {
			t.Errorf("GET %s: body %s", p, b)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	resp := get(t, http.MethodPost, "/", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestMounted serves the handler the way the server mounts it.
func TestMounted(t *testing.T) {
	mux := http.NewServeMux()
	h := Handler()
	mux.Handle("GET /{$}", h)
	mux.Handle("GET /assets/{file}", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for p, want := range map[string]int{"/": 200, "/assets/app.js": 200, "/assets/nope.css": 404} {
		resp, err := srv.Client().Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", p, resp.StatusCode, want)
		}
	}
}

var (
	// attrRef finds src and href attributes in the page.
	attrRef = regexp.MustCompile(`\b(?:src|href)="([^"]*)"`)
	// jsRef finds module imports and new URL('./x', import.meta.url) in scripts.
	jsRef = regexp.MustCompile(`(?:\bfrom\s+|\bimport\(\s*|new URL\(\s*)'(\./[^']+)'`)
	// absURL finds absolute http(s) URLs.
	absURL = regexp.MustCompile(`https?://[^\s"'<>)\x60]+`)
)

func TestReferencedFilesExist(t *testing.T) {
	names := assetNames(t)
	page := readAsset(t, indexFile)
	local := 0
	for _, m := range attrRef.FindAllStringSubmatch(page, -1) {
		ref := m[1]
		switch {
		case strings.HasPrefix(ref, "assets/"), strings.HasPrefix(ref, "/assets/"):
			local++
			resp := get(t, http.MethodGet, "/"+strings.TrimPrefix(ref, "/"), nil)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("index.html references %s: %d", ref, resp.StatusCode)
			}
		case strings.HasPrefix(ref, "#"), ref == "extended/v1/status":
		default:
			t.Errorf("index.html references %q: neither an asset nor a known API path", ref)
		}
	}
	if local < 3 {
		t.Errorf("index.html references only %d assets", local)
	}
	for _, name := range names {
		if path.Ext(name) != ".js" {
			continue
		}
		for _, m := range jsRef.FindAllStringSubmatch(readAsset(t, name), -1) {
			if !slices.Contains(names, strings.TrimPrefix(m[1], "./")) {
				t.Errorf("%s imports %s, which is not an asset", name, m[1])
			}
		}
	}
}

func TestNoThirdPartyURLs(t *testing.T) {
	// The SVG namespace is a name, never fetched. The Stacks explorer link
	// is built at run time from /faucet/v1/info's explorer_tx_url, so no
	// explorer host appears in the assets either. A BTC payout on signet or
	// testnet links mempool.space (format.js): a link the visitor may
	// follow, never loaded by the page, whose CSP allows no other origin.
	allowed := map[string]bool{"http://www.w3.org/2000/svg": true}
	linkOnly := map[string]string{"format.js": "https://mempool.space/${path}/tx/${txid}"}
	for _, name := range assetNames(t) {
		for _, u := range absURL.FindAllString(readAsset(t, name), -1) {
			if !allowed[u] && linkOnly[name] != u {
				t.Errorf("%s contains the URL %s: assets must not load or link anything off-site", name, u)
			}
		}
	}
	if strings.Contains(readAsset(t, "app.css"), "@import") || strings.Contains(readAsset(t, "app.css"), "@font-face") {
		t.Error("app.css imports a stylesheet or a font")
	}
}

func TestNoUnsafeScripting(t *testing.T) {
	forbidden := []string{"eval(", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "new Function", "setAttribute('on", "srcdoc"}
	for _, name := range assetNames(t) {
		if path.Ext(name) != ".js" {
			continue
		}
		src := readAsset(t, name)
		for _, f := range forbidden {
			if strings.Contains(src, f) {
				t.Errorf("%s uses %s", name, f)
			}
		}
	}
	page := readAsset(t, indexFile)
	// The CSP forbids inline code and styles; the page must not need them.
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(page) {
		t.Error("index.html has an inline script")
	}
	if regexp.MustCompile(`<script\b[^>]*>`).FindAllString(page, -1) == nil {
		t.Error("index.html loads no script")
	}
	for _, s := range regexp.MustCompile(`<script\b[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(s, `type="module"`) || !strings.Contains(s, `src="`) {
			t.Errorf("script tag %s: want an external module", s)
		}
	}
	if regexp.MustCompile(`<style|\sstyle="|\son[a-z]+="`).MatchString(page) {
		t.Error("index.html has inline styles or event handler attributes")
	}
}

// TestIDsUsedExist checks that every id app.js looks up is in the page:
// a renamed id would otherwise only fail in the browser.
func TestIDsUsedExist(t *testing.T) {
	page := readAsset(t, indexFile)
	used := regexp.MustCompile(`\$\('([a-z0-9-]+)'\)`).FindAllStringSubmatch(readAsset(t, "app.js"), -1)
	if len(used) < 10 {
		t.Fatalf("app.js looks up only %d ids with $('…')", len(used))
	}
	for _, m := range used {
		if !strings.Contains(page, `id="`+m[1]+`"`) {
			t.Errorf("app.js looks up #%s, which index.html lacks", m[1])
		}
	}
}

// TestNoClientStorage: the page remembers one thing across loads, the
// visitor's recent drips (localStorage under RECENT_KEY, in app.js); not
// the chosen asset nor anything else.
func TestNoClientStorage(t *testing.T) {
	recent := regexp.MustCompile(`localStorage\.(getItem|setItem)\(RECENT_KEY\b`)
	for _, name := range assetNames(t) {
		if path.Ext(name) != ".js" {
			continue
		}
		src := readAsset(t, name)
		if name == "app.js" {
			src = recent.ReplaceAllString(src, "")
		}
		for _, f := range []string{"localStorage", "sessionStorage", "indexedDB", "document.cookie"} {
			if strings.Contains(src, f) {
				t.Errorf("%s uses %s", name, f)
			}
		}
	}
}

func TestPageStructure(t *testing.T) {
	page := readAsset(t, indexFile)
	ids := []string{
		"address", "address-error", "stacking", "stacking-amount", "submit", "result", "txid",
		"tx-link", "tx-state", "pow-progress", "faucet-state", "tip-height", "message",
		// The asset choice and what follows it (app.js looks them up by id).
		// The faucet's balance and the recent drips.
		"balance-fact-row", "balance", "recent", "recent-list", "recent-clear", "recent-status",
		"page-heading", "asset-choice", "asset-options", "form-heading", "stacking-row",
		"stacking-fact-row", "token-fact-row", "token-id", "api-endpoint", "default-amount", "limits",
		// BTC's address texts, sizes and link text.
		"address-hint", "api-body", "size-row", "size-default", "size-large", "size-xlarge",
		"tip-fact-row", "lede-btc", "tx-link-text",
		// The tokens' sentence, and why the chosen asset cannot be dripped now.
		"lede-tokens", "asset-note",
		// The budget, the share of it the visitor's tier draws from, the
		// runway; sign-in; what a drip pays the visitor; a refusal's detail.
		"budget-fact-row", "budget-label", "budget", "share-fact-row", "share", "runway-fact-row", "runway", "budget-note",
		"account", "account-text", "sign-in", "sign-out", "sign-in-error", "account-status", "drip-amount", "result-detail",
		// The event code: its disclosure, the field, its hint and error.
		"event-code", "event-code-box", "event-code-error", "event-code-hint", "event-code-toggle",
	}
	for _, id := range ids {
		if n := strings.Count(page, `id="`+id+`"`); n != 1 {
			t.Errorf("id %q appears %d times in index.html, want once", id, n)
		}
	}
	if n := strings.Count(page, "<h1"); n != 1 {
		t.Errorf("%d <h1> elements, want one", n)
	}
	for _, tag := range []string{`<html lang="en">`, "<main", "<header", "<footer", `<label for="address">`, `<label for="stacking">`,
		`aria-describedby="address-hint address-error"`, `aria-live="polite"`, "autofocus", `autocomplete="off"`, `spellcheck="false"`,
		`rel="noopener noreferrer"`, `target="_blank"`, `name="viewport"`} {
		if !strings.Contains(page, tag) {
			t.Errorf("index.html lacks %s", tag)
		}
	}
	// The chooser is a named group, hidden until /faucet/v1/info lists a
	// second asset: with STX alone the page is what it always was.
	if !regexp.MustCompile(`<fieldset id="asset-choice"[^>]*\bhidden\b[^>]*>\s*<legend>[^<]+</legend>`).MatchString(page) {
		t.Error(`index.html lacks <fieldset id="asset-choice" … hidden> with a <legend> first`)
	}
	// BTC's sizes likewise: a named group, hidden until BTC is chosen.
	if !regexp.MustCompile(`<fieldset id="size-row"[^>]*\bhidden\b[^>]*>\s*<legend>[^<]+</legend>`).MatchString(page) {
		t.Error(`index.html lacks <fieldset id="size-row" … hidden> with a <legend> first`)
	}
	css := readAsset(t, "app.css")
	for _, want := range []string{"prefers-color-scheme: dark", "prefers-reduced-motion", ":focus-visible"} {
		if !strings.Contains(css, want) {
			t.Errorf("app.css lacks %s", want)
		}
	}
}

// TestAssetsAreData: the page drips every asset /faucet/v1/info lists at
// the endpoints info gives, so no asset's drip path is written in the
// assets (app.js's fallback builds it from the asset's name); the page's
// footer starts with STX's v3 route, the one asset every faucet has, until
// info is read.
func TestAssetsAreData(t *testing.T) {
	fixed := regexp.MustCompile(`faucets/([a-z][a-z0-9-]*)`)
	for _, name := range assetNames(t) {
		for _, m := range fixed.FindAllStringSubmatch(readAsset(t, name), -1) {
			if name != indexFile || m[1] != "stx" {
				t.Errorf("%s names a drip path (%s): take it from info's endpoints", name, m[0])
			}
		}
	}
}
