package controllers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// clusterRanges hold the addresses a cluster's own pods, nodes, Services
// and load balancers typically have.
var clusterRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fc00::/7"), netip.MustParsePrefix("fe80::/10"), netip.MustParsePrefix("::1/128"),
}

// TestSamplesAvoidTheProxyTrap: no FaucetServer we ship as an example (the
// samples, those in README.md and docs/) allows an in-cluster range while it trusts
// X-Forwarded-For. With a hop count one off, every client would then carry
// the private address of a proxy (or one it wrote itself) and skip the
// proof of work and the per-IP limit; users copy examples.
func TestSamplesAvoidTheProxyTrap(t *testing.T) {
	docs := map[string][]byte{}
	files, err := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join("..", "config", "samples", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, more...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			docs[fmt.Sprintf("%s, document %d", f, i+1)] = doc
		}
	}
	pages, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append([]string{filepath.Join("..", "README.md")}, pages...) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.ToSlash(strings.TrimPrefix(page, ".."+string(filepath.Separator)))
		for i, block := range strings.Split(string(text), "```yaml\n")[1:] {
			if body, _, ok := strings.Cut(block, "```"); ok {
				docs[fmt.Sprintf("%s, yaml block %d", name, i+1)] = []byte(body)
			}
		}
	}

	checked := 0
	for name, doc := range docs {
		var fs faucetv1alpha1.FaucetServer
		if err := yaml.Unmarshal(doc, &fs); err != nil || fs.Kind != "FaucetServer" {
			continue // another kind, or a snippet
		}
		checked++
		hops := int32(0)
		if rl := fs.Spec.RateLimits; rl != nil {
			hops = ptr.Deref(rl.TrustedProxyHops, 0)
		}
		if hops == 0 || fs.Spec.Abuse == nil {
			continue
		}
		for _, entry := range fs.Spec.Abuse.IPAllow {
			p, err := netip.ParsePrefix(entry)
			if err != nil {
				a, aerr := netip.ParseAddr(entry)
				if aerr != nil {
					t.Fatalf("%s: ipAllow entry %q: %v", name, entry, err)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			for _, c := range clusterRanges {
				if p.Overlaps(c) {
					t.Errorf("%s: ipAllow %s overlaps %s, where proxies, nodes and pods live, while trustedProxyHops is %d", name, entry, c, hops)
				}
			}
		}
	}
	if checked < 3 {
		t.Fatalf("only %d FaucetServers found in config/samples, README.md and docs/", checked)
	}
}

// sampleFaucetServers are the FaucetServers of config/samples (and its
// directories), by file and document.
func sampleFaucetServers(t *testing.T) map[string]*faucetv1alpha1.FaucetServer {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join("..", "config", "samples", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*faucetv1alpha1.FaucetServer{}
	for _, f := range append(files, more...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind != "FaucetServer" {
				continue
			}
			var fs faucetv1alpha1.FaucetServer
			if err := yaml.UnmarshalStrict(doc, &fs); err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			out[fmt.Sprintf("%s, document %d", filepath.Base(f), i+1)] = &fs
		}
	}
	return out
}

// TestSamplesReachServe: every sample FaucetServer, read strictly (a
// field the API lacks fails), becomes arguments serve parses back and
// accepts; the main sample shows a budget for STX and for an asset, and
// sign-in with its Secret files and tiers.
func TestSamplesReachServe(t *testing.T) {
	samples := sampleFaucetServers(t)
	if len(samples) < 3 {
		t.Fatalf("only %d FaucetServers in config/samples", len(samples))
	}
	for name, fs := range samples {
		t.Run(name, func(t *testing.T) {
			checkArgsParseBack(t, fs)
			o := serverOptions(fs)
			o.Abuse.SwitchesFile = writeSwitchesFile(t, fs)
			if err := o.Validate(); err != nil {
				t.Errorf("serve refuses the sample: %v", err)
			}
		})
	}
	main, ok := samples["faucet_v1alpha1_faucetserver.yaml, document 1"]
	if !ok {
		t.Fatal("no FaucetServer in faucet_v1alpha1_faucetserver.yaml")
	}
	o := serverOptions(main)
	if len(o.Budgets.List) < 2 || o.Budgets.List[0].Asset != "stx" || o.Budgets.List[0].Reserve == 0 {
		t.Errorf("the main sample's budgets %+v: want STX's with a reserve, and an asset's", o.Budgets.List)
	}
	s := o.SignIn
	if !s.On() || s.ClientSecretFile == "" || s.SessionKeyFile == "" || len(s.Tiers) < 2 || s.AnonymousShare == 0 {
		t.Errorf("the main sample's sign-in %+v: want a client secret and session key file, tiers and an anonymous share", s)
	}
}
