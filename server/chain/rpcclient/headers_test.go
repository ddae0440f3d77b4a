package rpcclient

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const secretKey = "hiro-key-0123456789abcdef"

func TestParseHeaders(t *testing.T) {
	h, err := ParseHeaders("# Hiro\r\n\nx-api-key: " + secretKey + "\r\nX-Extra:  two words \n")
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("X-Api-Key"); got != secretKey {
		t.Errorf("x-api-key = %q", got)
	}
	if got := h.Get("X-Extra"); got != "two words" {
		t.Errorf("X-Extra = %q", got)
	}
	for text, want := range map[string]string{
		"x-api-key " + secretKey:                   `line 1: want "Name: value"`,
		"\n\nbad name: " + secretKey:               "line 3: the header name is not valid",
		"Authorization Bearer " + secretKey + ":x": "line 1: the header name is not valid",
		"User-Agent: " + secretKey:                 "line 1: User-Agent is set by the faucet itself",
		"host: " + secretKey:                       "line 1: Host is set by the faucet itself",
		"x-api-key:   ":                            "line 1: the header has no value",
		"x-api-key: a\x00" + secretKey:             "line 1: the value has characters",
		"Accept-Encoding: gzip":                    "line 1: Accept-Encoding is set by the faucet itself",
		"x-api-key: a\nX-API-KEY: " + secretKey:    "line 2: the same header as line 1",
		secretKey + ":":                            "line 1: the header has no value",
		"# only a comment\n\n":                     "no header lines",
	} {
		_, err := ParseHeaders(text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseHeaders(%q) = %v, want an error with %q", text, err, want)
			continue
		}
		if strings.Contains(err.Error(), secretKey) {
			t.Errorf("ParseHeaders(%q): the error quotes the value: %v", text, err)
		}
	}
}

func TestReadHeadersFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "headers")
	if err := os.WriteFile(good, []byte("x-api-key: "+secretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := ReadHeadersFile(good); err != nil || h.Get("x-api-key") != secretKey {
		t.Fatalf("ReadHeadersFile = %v, %v", h, err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("x-api-key: "+strings.Repeat("k", MaxHeadersFileBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHeadersFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file over the cap: %v", err)
	}
	if _, err := ReadHeadersFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "headers file") {
		t.Errorf("a missing file: %v", err)
	}
}

// The headers go with every request, after the client's own, and a node
// (or a proxy) echoing them back gets them redacted from errors.
func TestWithHeaderSendsAndRedacts(t *testing.T) {
	h, err := ParseHeaders("x-api-key: " + secretKey)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-Api-Key")+"|"+r.UserAgent())
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("bad key " + r.Header.Get("X-Api-Key")))
	}, WithHeader(h))
	h.Set("X-Api-Key", "changed after") // the client keeps its own copy
	for range 2 {
		resp, err := c.Do(context.Background(), "ping", http.MethodGet, "/", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		he := NewHTTPError("test", "ping", resp, 64)
		if strings.Contains(he.Error(), secretKey) || !strings.Contains(he.Error(), "[redacted]") {
			t.Errorf("the error carries the key or no redaction: %v", he)
		}
	}
	want := secretKey + "|ua/1"
	if len(got) != 2 || got[0] != want || got[1] != want {
		t.Errorf("the node saw %q, want %q twice", got, want)
	}
}

func TestNewRefusesAnAuthorizationHeaderWithBasicAuth(t *testing.T) {
	h, err := ParseHeaders("Authorization: Bearer " + secretKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New("test", "http://u:p@node:20443", Settings{}, []Option{WithHeader(h)}); err == nil ||
		!strings.Contains(err.Error(), "use one") || strings.Contains(err.Error(), secretKey) {
		t.Errorf("New = %v, want a refusal naming neither secret", err)
	}
	if _, err := New("test", "http://node:20443", Settings{}, []Option{WithHeader(h)}); err != nil {
		t.Errorf("a bearer header alone: %v", err)
	}
}

// A secret across the cut of an excerpt leaves none of itself behind.
func TestExcerptRedactsBeforeItCuts(t *testing.T) {
	h, err := ParseHeaders("x-api-key: " + secretKey)
	if err != nil {
		t.Fatal(err)
	}
	r := &Response{Body: []byte("echo: " + secretKey), header: h}
	for n := 8; n < 40; n++ {
		if got := r.Excerpt(n); strings.Contains(got, secretKey[:4]) {
			t.Fatalf("Excerpt(%d) = %q: part of the key is left", n, got)
		}
	}
}
