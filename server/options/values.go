package options

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
)

// limitValue is a flag of the form N/window ("5/5m"); "0" disables.
type limitValue struct{ l *guard.Limit }

// ArgName is the placeholder -h shows after the flag's name.
func (limitValue) ArgName() string { return "N/window" }

func (v limitValue) String() string {
	if v.l == nil || v.l.Requests <= 0 {
		return "0"
	}
	return fmt.Sprintf("%d/%s", v.l.Requests, v.l.Window)
}

func (v limitValue) Set(s string) error {
	l, err := ParseLimit(s)
	if err != nil {
		return err
	}
	*v.l = l
	return nil
}

// ParseLimit reads N/window ("5/5m"); "0" is no limit.
func ParseLimit(s string) (guard.Limit, error) {
	if s == "0" {
		return guard.Limit{}, nil
	}
	n, w, ok := strings.Cut(s, "/")
	if !ok {
		return guard.Limit{}, errors.New("want N/window, e.g. 5/5m, or 0 to disable")
	}
	req, err := strconv.Atoi(n)
	if err != nil || req <= 0 {
		return guard.Limit{}, errors.New("the request count must be a positive whole number")
	}
	win, err := time.ParseDuration(w)
	if err != nil {
		return guard.Limit{}, fmt.Errorf("the window: %w", DurationError(w))
	}
	if win <= 0 {
		return guard.Limit{}, errors.New("the window must be a positive duration")
	}
	return guard.Limit{Requests: req, Window: win}, nil
}

// DurationError says why s is not a duration; a bare number is the usual
// slip (--node-timeout 10).
func DurationError(s string) error {
	if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		return errors.New("a duration needs a unit, e.g. 10s or 500ms")
	}
	return errors.New("want a duration such as 10s, 500ms or 1h30m")
}

// PrefixList is a flag of comma-separated IPs and CIDRs; a bare IP is its
// own /32 or /128. Repeating the flag adds to the list.
type PrefixList []netip.Prefix

// ArgName is the placeholder -h shows after the flag's name.
func (*PrefixList) ArgName() string { return "IPs/CIDRs" }

func (p *PrefixList) String() string { return joinList(p, ",", netip.Prefix.String) }

// Set adds the list's entries.
func (p *PrefixList) Set(v string) error { return addEach(p, v, ",", parsePrefix) }

// parsePrefix reads one PrefixList entry: a CIDR, or an IP as its own
// /32 or /128.
func parsePrefix(item string) (netip.Prefix, error) {
	item = strings.TrimSpace(item)
	if strings.Contains(item, "/") {
		pfx, err := netip.ParsePrefix(item)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (e.g. 10.0.0.0/8 or 2001:db8::/32)", item)
		}
		return pfx.Masked(), nil
	}
	ip, err := netip.ParseAddr(item)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR", item)
	}
	ip = ip.Unmap()
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}

// setPairs reads s, comma-separated key=value pairs with each key at most
// once, and hands each pair to set; keys lists the valid keys for the
// error, and errPrefix goes before the key in set's errors. It returns the
// keys seen, for the caller's check of required ones.
func setPairs(s, keys, errPrefix string, set func(k, v string) error) (map[string]bool, error) {
	seen := map[string]bool{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || seen[k] {
			return nil, fmt.Errorf("%q: want key=value pairs, each key once (%s)", kv, keys)
		}
		seen[k] = true
		if err := set(k, v); err != nil {
			return nil, fmt.Errorf("%s%s: %w", errPrefix, k, err)
		}
	}
	return seen, nil
}

// joinList is the String of a list flag: its items written by str and
// joined by sep; a nil list is "".
func joinList[L ~[]T, T any](l *L, sep string, str func(T) string) string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, x := range *l {
		s[i] = str(x)
	}
	return strings.Join(s, sep)
}

// addEach is the Set of a list flag: it splits v at sep, skips blank
// items and appends the rest as parse reads them, stopping at the first
// error.
func addEach[L ~[]T, T any](l *L, v, sep string, parse func(string) (T, error)) error {
	for item := range strings.SplitSeq(v, sep) {
		if strings.TrimSpace(item) == "" {
			continue
		}
		x, err := parse(item)
		if err != nil {
			return err
		}
		*l = append(*l, x)
	}
	return nil
}

// LimitString is l as a limit flag writes it: N/window, or 0.
func LimitString(l guard.Limit) string { return limitValue{&l}.String() }

// NameList is a flag of comma-separated names, each added once; repeating
// the flag adds to the list.
type NameList []string

// ArgName is the placeholder -h shows after the flag's name.
func (*NameList) ArgName() string { return "names" }

func (n *NameList) String() string {
	if n == nil {
		return ""
	}
	return strings.Join(*n, ",")
}

// Set adds the list's names.
func (n *NameList) Set(v string) error {
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item != "" && !slices.Contains(*n, item) {
			*n = append(*n, item)
		}
	}
	return nil
}

// URLList is a flag of comma-separated URLs, each added once; repeating the
// flag adds to the list.
type URLList []string

// ArgName is the placeholder -h shows after the flag's name.
func (*URLList) ArgName() string { return "urls" }

func (u *URLList) String() string { return (*NameList)(u).String() }

// Set adds the list's URLs.
func (u *URLList) Set(v string) error { return (*NameList)(u).Set(v) }
