package options_test

import (
	"net"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/options"
)

func TestPeerFlagsAreChecked(t *testing.T) {
	for _, bad := range []struct{ flag, value string }{
		{"--peer-listen", "3998"},
		{"--peer-url", "10.0.0.7:3998"},
		{"--peer-url", "ftp://10.0.0.7:3998"},
	} {
		o := options.Defaults()
		o.Node.URLs = options.URLList{"http://127.0.0.1:20443"}
		o.Keys.File = "/etc/faucet/keys"
		if bad.flag == "--peer-listen" {
			o.HTTP.PeerListen = bad.value
		} else {
			o.HTTP.PeerURL = bad.value
		}
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), bad.flag) {
			t.Errorf("%s %s: %v, want an error naming the flag", bad.flag, bad.value, err)
		}
	}
}

func TestAdvertisedPeerURL(t *testing.T) {
	env := func(ip string) func(string) string {
		return func(k string) string {
			if k == options.PodIPEnv {
				return ip
			}
			return ""
		}
	}
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	for _, tt := range []struct {
		url, podIP, ln, want string
	}{
		{"http://peer.example:4000/", "", "0.0.0.0:3998", "http://peer.example:4000"},
		{"", "10.244.0.7", "[::]:3998", "http://10.244.0.7:3998"},
		{"", "fd00::7", "[::]:3998", "http://[fd00::7]:3998"},
		{"", "", "127.0.0.1:41531", "http://127.0.0.1:41531"},
	} {
		h := options.HTTP{PeerURL: tt.url, PeerListen: ":3998"}
		if got := h.AdvertisedPeerURL(env(tt.podIP), tcp(tt.ln)); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt, got, tt.want)
		}
	}
}
