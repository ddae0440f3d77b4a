package rpcclient

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/stxfaucet/faucet-operator/server/internal/boundedfile"
)

// MaxHeadersFileBytes bounds a headers file: a few API keys, not a
// document.
const MaxHeadersFileBytes = 16 << 10

// reservedHeaders are set by the client itself or by net/http; a headers
// file naming one is refused rather than silently overridden.
var reservedHeaders = map[string]bool{
	"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true, "User-Agent": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true,
	// Set by hand, it turns off the transport's gzip decoding.
	"Accept-Encoding": true,
}

// ParseHeaders reads header lines "Name: value" (for example
// "x-api-key: …", how Hiro's API takes its keys), each name once. Blank
// lines and lines starting with '#' are skipped. Errors name the line,
// and a header only when it is one the client sets itself: on a mistyped
// line the "name" may be the secret.
func ParseHeaders(text string) (http.Header, error) {
	h, seen := http.Header{}, map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d: want \"Name: value\"", i+1)
		case !httpguts.ValidHeaderFieldName(name):
			// Not quoted: on a mistyped line the "name" may hold the secret.
			return nil, fmt.Errorf("line %d: the header name is not valid (letters, digits and !#$%%&'*+-.^_`|~ only)", i+1)
		case reservedHeaders[http.CanonicalHeaderKey(name)]:
			return nil, fmt.Errorf("line %d: %s is set by the faucet itself and cannot be given", i+1, http.CanonicalHeaderKey(name))
		case value == "":
			return nil, fmt.Errorf("line %d: the header has no value", i+1)
		case !httpguts.ValidHeaderFieldValue(value):
			return nil, fmt.Errorf("line %d: the value has characters a header cannot carry", i+1)
		case h.Get(name) != "":
			return nil, fmt.Errorf("line %d: the same header as line %d", i+1, seen[http.CanonicalHeaderKey(name)])
		}
		h.Set(name, value)
		seen[http.CanonicalHeaderKey(name)] = i + 1
	}
	if len(h) == 0 {
		return nil, errors.New("no header lines (want \"Name: value\", e.g. \"x-api-key: …\")")
	}
	return h, nil
}

// ReadHeadersFile reads and parses a headers file (ParseHeaders).
func ReadHeadersFile(path string) (http.Header, error) {
	data, err := boundedfile.Read(path, MaxHeadersFileBytes)
	if err != nil {
		return nil, fmt.Errorf("headers file: %w", err)
	}
	h, err := ParseHeaders(string(data))
	if err != nil {
		return nil, fmt.Errorf("headers file %s: %w", path, err)
	}
	return h, nil
}

// WithHeader adds h to every request, after the client's own headers
// (which h may not name: ParseHeaders refuses them). Its values count as
// secrets: Response.Redact removes them from what the node sends back.
func WithHeader(h http.Header) Option {
	return func(s *Settings) { s.Header = h.Clone() }
}
