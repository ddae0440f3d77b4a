package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
)

// envPrefix: every flag --some-name can also be set as FAUCET_SOME_NAME.
const envPrefix = "FAUCET_"

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseWithEnv parses args; flags not given on the command line take their
// environment variable when set. Command-line flags win.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", envName(f.Name), e)
			}
		}
	})
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return err
}

// limitValue is a flag of the form N/duration ("5/5m"); "0" disables.
type limitValue struct{ l *guard.Limit }

func (v limitValue) String() string {
	if v.l == nil || v.l.Requests <= 0 {
		return "0"
	}
	return fmt.Sprintf("%d/%s", v.l.Requests, v.l.Window)
}

func (v limitValue) Set(s string) error {
	if s == "0" {
		*v.l = guard.Limit{}
		return nil
	}
	n, w, ok := strings.Cut(s, "/")
	if !ok {
		return fmt.Errorf("limit %q: want N/duration, e.g. 5/5m, or 0 to disable", s)
	}
	req, err := strconv.Atoi(n)
	if err != nil || req <= 0 {
		return fmt.Errorf("limit %q: request count must be a positive integer", s)
	}
	win, err := time.ParseDuration(w)
	if err != nil || win <= 0 {
		return fmt.Errorf("limit %q: window must be a positive duration", s)
	}
	*v.l = guard.Limit{Requests: req, Window: win}
	return nil
}

// logFlags builds a slog logger from --log-level and --log-format.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&l.format, "log-format", "json", "log format: json or text")
}

func (l *logFlags) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", l.format)
}

// prefixList is a flag of comma-separated IPs and CIDRs; a bare IP is its
// own /32 or /128. Repeating the flag adds to the list.
type prefixList []netip.Prefix

func (p *prefixList) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(*p))
	for i, x := range *p {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(v string) error {
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
