package charttest

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// devnetValues is the value set of the in-cluster devnet.
var devnetValues = []string{"-f", "hack/charttest/testdata/values-devnet.yaml"}

// TestRenderDevnet: devnet.enabled renders config/samples/devnet's devnet
// (the chains' pod and Service, the published keys, a FaucetServer on
// them) under the devnet's names, in its namespace; off, nothing of it.
func TestRenderDevnet(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		for _, o := range render(t) {
			if o.GetKind() == "FaucetServer" || o.GetLabels()["app.kubernetes.io/name"] == "faucet-devnet" {
				t.Errorf("the default values render %s %s", o.GetKind(), o.GetName())
			}
		}
	})

	objs := render(t, devnetValues...)
	sample := sampleObjects(t)
	// The sample's names, as the chart names them for devnet.name devnet.
	chartName := map[string]string{
		"Secret/faucet-keys": "devnet-keys", "Secret/faucet-btc": "devnet-btc", "Secret/faucet-btc-rpc": "devnet-btc-rpc",
		"Deployment/devnet": "devnet-node", "Service/devnet": "devnet-node", "FaucetServer/faucet": "devnet",
	}
	got := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetNamespace() == "faucet-devnet" && o.GetLabels()["app.kubernetes.io/name"] != "faucet-operator" { // not the manager's Role
			got[o.GetKind()+"/"+o.GetName()] = o
		}
	}
	if len(got) != len(chartName) {
		t.Fatalf("objects in faucet-devnet: %v, want the six of the sample", slices.Sorted(maps.Keys(got)))
	}
	for sampleKey, name := range chartName {
		kind, _, _ := strings.Cut(sampleKey, "/")
		o, want := got[kind+"/"+name], sample[sampleKey]
		if o == nil || want == nil {
			t.Fatalf("%s/%s rendered: %v; %s in the sample: %v", kind, name, o != nil, sampleKey, want != nil)
		}
		if l := o.GetLabels(); l["app.kubernetes.io/name"] != "faucet-devnet" || l["app.kubernetes.io/instance"] != "devnet" {
			t.Errorf("%s/%s labels %v: want the devnet's, never the manager's selector labels", kind, name, l)
		}
		switch kind {
		case "Secret":
			if !reflect.DeepEqual(o.Object["stringData"], want.Object["stringData"]) {
				t.Errorf("Secret %s holds %v, the sample's %s %v", name, o.Object["stringData"], sampleKey, want.Object["stringData"])
			}
		case "Deployment":
			checkDevnetPod(t, o, want)
		case "Service":
			if !reflect.DeepEqual(nested(t, o, "spec", "ports"), nested(t, want, "spec", "ports")) {
				t.Errorf("Service %s: %v, want the sample's ports", name, o.Object["spec"])
			}
			if !reflect.DeepEqual(nested(t, o, "spec", "selector"), nested(t, got["Deployment/devnet-node"], "spec", "selector", "matchLabels")) {
				t.Errorf("Service %s selects %v, not the devnet's pod", name, nested(t, o, "spec", "selector"))
			}
		case "FaucetServer":
			// The sample's spec with the chart's names.
			b, _ := json.Marshal(want.Object["spec"])
			spec := strings.NewReplacer(`"faucet-keys"`, `"devnet-keys"`, `"faucet-btc-rpc"`, `"devnet-btc-rpc"`, `"faucet-btc"`, `"devnet-btc"`,
				"//devnet.faucet-devnet.svc:", "//devnet-node.faucet-devnet.svc:").Replace(string(b))
			var wantSpec map[string]any
			if err := json.Unmarshal([]byte(spec), &wantSpec); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.Object["spec"], wantSpec) {
				t.Errorf("FaucetServer spec\n%v\nwant the sample's\n%v", o.Object["spec"], wantSpec)
			}
		}
	}

	t.Run("in the release namespace, under another name", func(t *testing.T) {
		objs := render(t, "--set", "devnet.enabled=true", "--set", "devnet.name=chains", "--set", "devnet.blockTime=500ms")
		byKind := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			if o.GetLabels()["app.kubernetes.io/instance"] == "chains" {
				byKind[o.GetKind()] = o
				if o.GetNamespace() != releaseNamespace {
					t.Errorf("%s %s in %q, want the release namespace", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
		}
		fs, svc, d := byKind["FaucetServer"], byKind["Service"], byKind["Deployment"]
		if fs == nil || svc == nil || d == nil {
			t.Fatalf("rendered %v", slices.Sorted(maps.Keys(byKind)))
		}
		if u := nested(t, fs, "spec", "node", "url"); u != "http://chains-node.faucet-system.svc:20443" {
			t.Errorf("node.url %v", u)
		}
		btc := fs.Object["spec"].(map[string]any)["assets"].([]any)[1].(map[string]any)["btc"].(map[string]any)
		if u := dig(btc, "rpc", "url"); u != "http://chains-node.faucet-system.svc:18443" {
			t.Errorf("btc rpc.url %v", u)
		}
		if args := containerArgs(t, d); !hasPrefix(args, "--block-time=500ms") || !hasPrefix(args, "--fund-key-file=") {
			t.Errorf("devnet args %v", args)
		}
	})
}

// checkDevnetPod compares the chart's devnet pod with the sample's: the
// same arguments, files, probe and security settings.
func checkDevnetPod(t *testing.T, d, sample *unstructured.Unstructured) {
	t.Helper()
	pod := func(o *unstructured.Unstructured) map[string]any {
		return nested(t, o, "spec", "template", "spec").(map[string]any)
	}
	got, want := pod(d), pod(sample)
	for _, field := range []string{"securityContext", "automountServiceAccountToken", "enableServiceLinks"} {
		if !reflect.DeepEqual(got[field], want[field]) {
			t.Errorf("devnet pod %s %v, the sample's %v", field, got[field], want[field])
		}
	}
	c, wc := got["containers"].([]any)[0].(map[string]any), want["containers"].([]any)[0].(map[string]any)
	for _, field := range []string{"args", "ports", "readinessProbe", "securityContext", "volumeMounts", "resources"} {
		if !reflect.DeepEqual(c[field], wc[field]) {
			t.Errorf("devnet container %s %v, the sample's %v", field, c[field], wc[field])
		}
	}
	if c["image"] != "ghcr.io/stxfaucet/faucet-operator:"+chartAppVersion(t) {
		t.Errorf("devnet image %v, want the faucet pods' default image", c["image"])
	}
	if n := nested(t, d, "spec", "replicas"); n != float64(1) && n != int64(1) {
		t.Errorf("devnet replicas %v, want 1: two pods would be two chains", n)
	}
	if s := nested(t, d, "spec", "strategy", "type"); s != "Recreate" {
		t.Errorf("devnet strategy %v, want Recreate", s)
	}
}

// sampleObjects are config/samples/devnet's objects by kind/name.
func sampleObjects(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	files, err := filepath.Glob(filepath.Join(repoRoot, "config", "samples", "devnet", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("config/samples/devnet: %v", err)
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := parseObjects(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			out[o.GetKind()+"/"+o.GetName()] = o
		}
	}
	return out
}
