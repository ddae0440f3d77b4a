package server

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/guard"
)

func TestClientIP(t *testing.T) {
	const peer = "10.0.0.9:4321" // the last proxy, or the client when hops = 0
	cases := map[string]struct {
		hops   int
		remote string
		xff    []string // header lines
		want   string   // "" = invalid Addr
	}{
		"no proxy: peer":                      {hops: 0, want: "10.0.0.9"},
		"no proxy: XFF ignored":               {hops: 0, xff: []string{"203.0.113.5"}, want: "10.0.0.9"},
		"one proxy: rightmost":                {hops: 1, xff: []string{"203.0.113.5"}, want: "203.0.113.5"},
		"one proxy: forged left entries":      {hops: 1, xff: []string{"1.1.1.1, 2.2.2.2, 203.0.113.5"}, want: "203.0.113.5"},
		"two proxies: second from right":      {hops: 2, xff: []string{"1.1.1.1, 203.0.113.5, 10.0.0.2"}, want: "203.0.113.5"},
		"two proxies over two header lines":   {hops: 2, xff: []string{"1.1.1.1, 203.0.113.5", "10.0.0.2"}, want: "203.0.113.5"},
		"three proxies":                       {hops: 3, xff: []string{"9.9.9.9,203.0.113.5,10.0.0.1,10.0.0.2"}, want: "203.0.113.5"},
		"fewer entries than hops: leftmost":   {hops: 3, xff: []string{"203.0.113.5, 10.0.0.2"}, want: "203.0.113.5"},
		"no header with hops: peer":           {hops: 2, want: "10.0.0.9"},
		"empty header: peer":                  {hops: 1, xff: []string{""}, want: "10.0.0.9"},
		"garbage entry: peer":                 {hops: 1, xff: []string{"1.1.1.1, unknown"}, want: "10.0.0.9"},
		"chosen entry garbage, not neighbour": {hops: 2, xff: []string{"1.1.1.1, _hidden, 10.0.0.2"}, want: "10.0.0.9"},
		"ipv4 with port":                      {hops: 1, xff: []string{"203.0.113.5:8080"}, want: "203.0.113.5"},
		"ipv6":                                {hops: 1, xff: []string{"2001:db8::1"}, want: "2001:db8::1"},
		"bracketed ipv6":                      {hops: 1, xff: []string{"[2001:db8::1]"}, want: "2001:db8::1"},
		"bracketed ipv6 with port":            {hops: 1, xff: []string{"[2001:db8::1]:443"}, want: "2001:db8::1"},
		"ipv6 zone dropped":                   {hops: 1, xff: []string{"fe80::1%eth0"}, want: "fe80::1"},
		"ipv4-mapped unmapped":                {hops: 1, xff: []string{"::ffff:203.0.113.5"}, want: "203.0.113.5"},
		"ipv6 peer":                           {hops: 0, remote: "[2001:db8::7]:1", want: "2001:db8::7"},
		"unparseable peer":                    {hops: 0, remote: "@", want: ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = peer
			if c.remote != "" {
				r.RemoteAddr = c.remote
			}
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got := clientIP(r, c.hops)
			var want netip.Addr
			if c.want != "" {
				want = netip.MustParseAddr(c.want)
			}
			if got != want {
				t.Errorf("clientIP = %v, want %v", got, want)
			}
		})
	}
}

// TestClientIPReachesEngine: the per-IP limit follows the trusted XFF entry,
// so a forged left entry cannot dodge it.
func TestClientIPReachesEngine(t *testing.T) {
	h := newHarness(t, options{hops: 1, limits: guard.Limits{
		PerIP: guard.Limit{Requests: 1, Window: time.Hour},
	}})
	drip := func(xff string) int {
		return h.do(http.MethodPost, "/extended/v1/faucets/stx?address="+newRecipient(t), nil, map[string]string{
			"X-Forwarded-For": xff,
			"RemoteAddr":      "10.0.0.9:1",
		}).Code
	}
	if c := drip("203.0.113.5"); c != http.StatusOK {
		t.Fatalf("first drip: %d", c)
	}
	if c := drip("6.6.6.6, 203.0.113.5"); c != http.StatusTooManyRequests {
		t.Errorf("same client behind a forged entry: %d, want 429", c)
	}
	if c := drip("203.0.113.6"); c != http.StatusOK {
		t.Errorf("another client: %d, want 200", c)
	}
}
