// Package web serves the faucet's web page: one HTML page and its assets
// (plain CSS and JavaScript modules, no build step), embedded in the binary.
//
// Mount Handler for both "GET /{$}" and "GET /assets/{file}":
//
//	h := web.Handler()
//	mux.Handle("GET /{$}", h)
//	mux.Handle("GET /assets/{file}", h)
//
// Every answer carries a strict Content-Security-Policy (same-origin
// scripts, styles and requests only), nosniff and no-referrer. Files have a
// strong ETag computed once at start-up and answer If-None-Match with 304;
// the page is revalidated on every load (no-cache) so a new release shows at
// once, the assets are cached for five minutes.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is sent with every answer of Handler.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const (
	indexFile        = "index.html"
	indexCache       = "no-cache"
	assetCache       = "public, max-age=300"
	assetsPathPrefix = "/assets/"
)

// contentTypes maps the extensions the page uses to their media types; the
// system's MIME table is not consulted, so answers do not depend on the host.
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".json":  "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".txt":   "text/plain; charset=utf-8",
	".webp":  "image/webp",
	".woff2": "font/woff2",
}

// file is one embedded asset, read once.
type file struct {
	name        string
	body        []byte
	contentType string
	etag        string
	cache       string
}

// files are the embedded assets by name (a flat directory).
var files = sync.OnceValue(func() map[string]*file {
	m := map[string]*file{}
	entries, err := fs.ReadDir(assets, "assets")
	if err != nil {
		panic("web: reading the embedded assets: " + err.Error())
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		body, err := assets.ReadFile("assets/" + e.Name())
		if err != nil {
			panic("web: reading the embedded assets: " + err.Error())
		}
		sum := sha256.Sum256(body)
		ct, ok := contentTypes[path.Ext(e.Name())]
		if !ok {
			ct = "application/octet-stream"
		}
		cache := assetCache
		if e.Name() == indexFile {
			cache = indexCache
		}
		m[e.Name()] = &file{
			name:        e.Name(),
			body:        body,
			contentType: ct,
			etag:        `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`,
			cache:       cache,
		}
	}
	if m[indexFile] == nil {
		panic("web: no assets/" + indexFile + " embedded")
	}
	return m
})

// Handler serves GET and HEAD for "/" (the page) and "/assets/<file>"; any
// other path is a JSON 404 and any other method a JSON 405.
func Handler() http.Handler {
	fm := files()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")

		f := lookup(fm, r.URL.Path)
		if f == nil {
			writeError(w, http.StatusNotFound, "not found")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		h.Set("Cache-Control", f.cache)
		h.Set("ETag", f.etag)
		if noneMatch(r.Header.Get("If-None-Match"), f.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", f.contentType)
		// ServeContent answers HEAD and byte ranges; the ETag is already set
		// and no modification time is sent (embedded files have none).
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
	})
}

// lookup maps a request path to its file: "/" is the page, "/assets/<name>"
// an asset (no subdirectories, no listing, the page only under "/").
func lookup(fm map[string]*file, p string) *file {
	if p == "/" || p == "" {
		return fm[indexFile]
	}
	name, ok := strings.CutPrefix(p, assetsPathPrefix)
	if !ok || name == "" || name == indexFile || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return nil
	}
	return fm[name]
}

// noneMatch reports whether an If-None-Match header matches etag, with the
// weak comparison RFC 9110 prescribes for it.
func noneMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

func writeError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}{false, msg})
}
