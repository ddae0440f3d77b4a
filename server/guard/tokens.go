package guard

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/internal/boundedfile"
)

const (
	minTokenLen       = 16
	maxTokenLen       = 1024
	maxTokenNameLen   = 64
	maxTokensFileSize = 4 << 20
	maxQuotaRequests  = 1_000_000_000
	hashedTokenPrefix = "sha256:"
)

// tokenSet is an immutable set of API tokens, swapped whole on reload.
type tokenSet struct {
	entries []tokenEntry
}

type tokenEntry struct {
	hash  [32]byte
	quota TokenQuota
}

// lookupAuthorization parses "Bearer <token>" and finds the token's quota;
// the returned quota is a copy the caller may keep.
func (c *Chain) lookupAuthorization(header string) (*TokenQuota, bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, false
	}
	token := strings.TrimSpace(rest)
	if token == "" || len(token) > maxTokenLen || strings.ContainsAny(token, " \t") {
		return nil, false
	}
	set := c.tokens.Load()
	i, found, _ := set.lookup(token)
	if !found {
		return nil, false
	}
	q := set.entries[i].quota
	return &q, true
}

// lookup compares the token's hash with every entry in constant time, with
// no early exit, so timing reveals neither whether nor where it matched. It
// also reports how many entries it compared (for tests of that property).
func (s *tokenSet) lookup(token string) (index int, found bool, compared int) {
	h := sha256.Sum256([]byte(token))
	match := 0
	for i := range s.entries {
		eq := subtle.ConstantTimeCompare(h[:], s.entries[i].hash[:])
		index = subtle.ConstantTimeSelect(eq, i, index)
		match |= eq
		compared++
	}
	return index, match == 1, compared
}

// contentSum identifies a file's content, to reload only on change.
func contentSum(data []byte) [32]byte { return sha256.Sum256(data) }

func readTokensFile(path string) ([]byte, error) {
	data, err := boundedfile.Read(path, maxTokensFileSize)
	if err != nil {
		return nil, fmt.Errorf("tokens file: %w", err)
	}
	return data, nil
}

func loadTokensFile(path string) (*tokenSet, [32]byte, error) {
	data, err := readTokensFile(path)
	if err != nil {
		return nil, [32]byte{}, err
	}
	set, err := parseTokens(path, data)
	if err != nil {
		return nil, [32]byte{}, err
	}
	return set, contentSum(data), nil
}

// errTokenLine marks a bad line; the wrapping error names file and line.
// Messages never quote a field: a misplaced token could be any of them.
var errTokenLine = errors.New("bad tokens file line")

// parseTokens parses the tokens file format described in the package doc.
func parseTokens(path string, data []byte) (*tokenSet, error) {
	set := &tokenSet{}
	nameLine := map[string]int{}
	hashLine := map[[32]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxTokensFileSize)
	for n := 1; sc.Scan(); n++ {
		e, ok, err := parseTokenLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("tokens file %s line %d: %w", path, n, err)
		}
		if !ok {
			continue
		}
		if first, dup := nameLine[e.quota.Name]; dup {
			return nil, fmt.Errorf("tokens file %s line %d: %w: name already used on line %d", path, n, errTokenLine, first)
		}
		if first, dup := hashLine[e.hash]; dup {
			return nil, fmt.Errorf("tokens file %s line %d: %w: token already used on line %d", path, n, errTokenLine, first)
		}
		nameLine[e.quota.Name], hashLine[e.hash] = n, n
		set.entries = append(set.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return set, nil
}

// parseTokenLine parses one line; ok is false for blank and comment lines.
func parseTokenLine(line string) (e tokenEntry, ok bool, err error) {
	fields := strings.Fields(line)
	if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
		return e, false, nil
	}
	for i := 3; i < len(fields); i++ {
		if strings.HasPrefix(fields[i], "#") {
			fields = fields[:i]
			break
		}
	}
	if len(fields) < 3 {
		return e, false, fmt.Errorf("%w: %d fields, want NAME TOKEN QUOTA [PER_ADDRESS] [from=TIME] [until=TIME]", errTokenLine, len(fields))
	}
	fields, from, until, err := tokenWindow(fields)
	if err != nil {
		return e, false, err
	}
	if len(fields) > 4 {
		return e, false, fmt.Errorf("%w: %d fields, want NAME TOKEN QUOTA [PER_ADDRESS] [from=TIME] [until=TIME]", errTokenLine, len(fields))
	}
	name, token := fields[0], fields[1]
	if !validTokenName(name) {
		return e, false, fmt.Errorf("%w: NAME must be 1 to %d characters of a-z, A-Z, 0-9, '.', '_' and '-'", errTokenLine, maxTokenNameLen)
	}
	if e.hash, err = parseTokenField(token); err != nil {
		return e, false, err
	}
	quota, err := parseQuota(fields[2])
	if err != nil {
		return e, false, fmt.Errorf("%w: QUOTA %w", errTokenLine, err)
	}
	perAddress := quota
	if len(fields) == 4 {
		if perAddress, err = parseQuota(fields[3]); err != nil {
			return e, false, fmt.Errorf("%w: PER_ADDRESS %w", errTokenLine, err)
		}
	}
	e.quota = TokenQuota{Name: name, Quota: quota, PerAddress: perAddress, From: from, Until: until}
	return e, true, nil
}

// ReasonTokenNotActive refuses a right API token outside its from=/until=
// window (403).
const ReasonTokenNotActive = "token_not_active"

// tokenWindowText tells the holder of q, at now, when it is accepted:
// before it opens, or after it closed.
func tokenWindowText(q *TokenQuota, now time.Time) string {
	const layout = "2 Jan 2006 15:04 UTC"
	if !q.From.IsZero() && now.Before(q.From) {
		return "The API token " + q.Name + " is accepted from " + q.From.UTC().Format(layout) + "."
	}
	return "The API token " + q.Name + " expired at " + q.Until.UTC().Format(layout) + "."
}

// tokenWindow takes the optional from=TIME and until=TIME fields (RFC
// 3339, e.g. 2026-12-05T09:00:00Z) off the end of a line's fields.
func tokenWindow(fields []string) (rest []string, from, until time.Time, err error) {
	for len(fields) > 3 {
		k, v, ok := strings.Cut(fields[len(fields)-1], "=")
		if !ok {
			break
		}
		dst := &from
		switch k {
		case "from":
		case "until":
			dst = &until
		default:
			// Not quoted: a token misplaced here could hold '='.
			return nil, from, until, fmt.Errorf("%w: an unknown key=value field, want from= or until=", errTokenLine)
		}
		if !dst.IsZero() {
			return nil, from, until, fmt.Errorf("%w: %s= given twice", errTokenLine, k)
		}
		if *dst, err = time.Parse(time.RFC3339, v); err != nil {
			return nil, from, until, fmt.Errorf("%w: %s= wants an RFC 3339 time such as 2026-12-05T09:00:00Z", errTokenLine, k)
		}
		fields = fields[:len(fields)-1]
	}
	if !from.IsZero() && !until.IsZero() && !from.Before(until) {
		return nil, from, until, fmt.Errorf("%w: from= must come before until=", errTokenLine)
	}
	return fields, from, until, nil
}

func validTokenName(s string) bool {
	if len(s) == 0 || len(s) > maxTokenNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parseTokenField returns the SHA-256 of the token, given either the token
// or "sha256:<hex>".
func parseTokenField(s string) ([32]byte, error) {
	if hexSum, ok := strings.CutPrefix(s, hashedTokenPrefix); ok {
		var h [32]byte
		if len(hexSum) != 64 {
			return h, fmt.Errorf("%w: TOKEN \"sha256:\" must be followed by 64 hex digits, got %d characters", errTokenLine, len(hexSum))
		}
		if _, err := hex.Decode(h[:], []byte(hexSum)); err != nil {
			// hex errors quote the offending byte; keep it out.
			return h, fmt.Errorf("%w: TOKEN \"sha256:\" must be followed by 64 hex digits", errTokenLine)
		}
		return h, nil
	}
	if len(s) < minTokenLen || len(s) > maxTokenLen {
		return [32]byte{}, fmt.Errorf("%w: TOKEN must be %d to %d characters (or sha256:<64 hex>), got %d", errTokenLine, minTokenLen, maxTokenLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return [32]byte{}, fmt.Errorf("%w: TOKEN must be printable ASCII (it is sent in a header)", errTokenLine)
		}
	}
	return sha256.Sum256([]byte(s)), nil
}

// parseQuota parses "N/duration". Its errors never quote the input.
func parseQuota(s string) (Limit, error) {
	n, d, ok := strings.Cut(s, "/")
	if !ok {
		return Limit{}, errors.New("must look like N/duration, e.g. 100/1h")
	}
	reqs, err := strconv.Atoi(n)
	if err != nil || reqs < 1 || reqs > maxQuotaRequests {
		return Limit{}, fmt.Errorf("count must be a whole number from 1 to %d", maxQuotaRequests)
	}
	window, err := time.ParseDuration(d)
	if err != nil || window <= 0 {
		return Limit{}, errors.New("duration must be a positive Go duration, e.g. 30m, 1h or 24h")
	}
	return Limit{Requests: reqs, Window: window}, nil
}
