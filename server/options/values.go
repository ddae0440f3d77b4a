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

func (p *PrefixList) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(*p))
	for i, x := range *p {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

// Set adds the list's entries.
func (p *PrefixList) Set(v string) error {
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			pfx, err := netip.ParsePrefix(item)
			if err != nil {
				return fmt.Errorf("%q is not a CIDR (e.g. 10.0.0.0/8 or 2001:db8::/32)", item)
			}
			*p = append(*p, pfx.Masked())
			continue
		}
		ip, err := netip.ParseAddr(item)
		if err != nil {
			return fmt.Errorf("%q is not an IP address or CIDR", item)
		}
		ip = ip.Unmap()
		*p = append(*p, netip.PrefixFrom(ip, ip.BitLen()))
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
