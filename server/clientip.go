package server

import (
	"net/http"
	"net/netip"
	"strings"
)

// clientIP returns the address the per-IP rate limit is keyed on.
//
// With hops = 0 it is the TCP peer (RemoteAddr) and X-Forwarded-For is
// ignored: without a trusted proxy every entry of that header is written by
// the client.
//
// With hops = N, N reverse proxies of ours stand in front of the server and
// each appends the address of the peer it saw. The last one is the TCP peer;
// the first one appended the real client's address, which therefore sits N
// entries from the right: XFF[len-N]. Everything further left was sent by the
// client and can be forged; the N-1 entries to its right are our own proxies.
// (This is the "trusted proxy count" rule of MDN, Express and others.)
//
// When the header has fewer than N entries the request passed through fewer
// proxies than configured (for example an in-cluster caller talking to an
// inner proxy). Every entry present was then appended by a trusted proxy, so
// the leftmost is the furthest peer we know of and is used. An entry that is
// not an IP address falls back to RemoteAddr: a proxy that writes garbage is
// misconfigured, and guessing another entry could pick a forged one.
func clientIP(r *http.Request, hops int) netip.Addr {
	peer := parseIP(r.RemoteAddr)
	if hops <= 0 {
		return peer
	}
	var entries []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		// Several header lines form one list, in order (RFC 9110 §5.3).
		for e := range strings.SplitSeq(v, ",") {
			entries = append(entries, strings.TrimSpace(e))
		}
	}
	if len(entries) == 0 {
		return peer
	}
	i := max(len(entries)-hops, 0)
	if ip := parseIP(entries[i]); ip.IsValid() {
		return ip
	}
	return peer
}

// parseIP reads "ip", "ip:port", "[ipv6]" or "[ipv6]:port" (some proxies add
// ports to X-Forwarded-For). Zones are dropped and IPv4-mapped IPv6 is
// unmapped so one client has one key. It returns the zero Addr on failure.
func parseIP(s string) netip.Addr {
	s = strings.TrimSpace(s)
	ip, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
				ip, err = netip.ParseAddr(s[1 : len(s)-1])
			}
			if err != nil {
				return netip.Addr{}
			}
		} else {
			ip = ap.Addr()
		}
	}
	return ip.WithZone("").Unmap()
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
