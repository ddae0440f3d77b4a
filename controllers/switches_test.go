package controllers

import (
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// The switches (spec.suspend, spec.suspendedAssets, spec.disabledAssets)
// reach the faucet through a ConfigMap it follows while it runs, not
// through flags: switching an asset restarts nothing.

// withSwitches sets the three switches.
func withSwitches(suspend bool, suspended, disabled []string) func(*faucetv1alpha1.FaucetServer) {
	return func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.Suspend, fs.Spec.SuspendedAssets, fs.Spec.DisabledAssets = suspend, suspended, disabled
	}
}

func TestSwitchesFor(t *testing.T) {
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// want is switches.json, byte for byte
		want string
		// state is what the faucet reads from it
		state switches.State
	}{
		"no switch set: every asset on": {
			want: `{}`,
		},
		"spec.suspend alone": {
			mutate: withSwitches(true, nil, nil),
			want:   `{"suspend":true}`,
			state:  switches.State{Suspend: true},
		},
		"suspended assets in spec order": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				withAssets(tokenAsset("tusd", testnetTUSD, 1, nil))(fs)
				withSwitches(false, []string{"tusd", "stx"}, nil)(fs)
			},
			want:  `{"suspendedAssets":["tusd","stx"]}`,
			state: switches.State{SuspendedAssets: []string{"tusd", "stx"}},
		},
		"disabled assets, the incumbent's names included": {
			mutate: withSwitches(false, nil, []string{"sbtc", "btc", "stx"}),
			want:   `{"disabledAssets":["sbtc","btc","stx"]}`,
			state:  switches.State{DisabledAssets: []string{"sbtc", "btc", "stx"}},
		},
		"all three": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				withAssets(sbtcAsset(1, nil))(fs)
				withSwitches(true, []string{"stx", "sbtc"}, []string{"btc"})(fs)
			},
			want:  `{"suspend":true,"suspendedAssets":["stx","sbtc"],"disabledAssets":["btc"]}`,
			state: switches.State{Suspend: true, SuspendedAssets: []string{"stx", "sbtc"}, DisabledAssets: []string{"btc"}},
		},
		"empty lists are no switch": {
			mutate: withSwitches(false, []string{}, []string{}),
			want:   `{}`,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			before := fs.DeepCopy()
			cm := switchesFor(fs)
			if !equalJSON(before, fs) {
				t.Error("switchesFor modified its input")
			}
			if cm.Name != "faucet-switches" || cm.Name != SwitchesConfigMapName(fs) || cm.Namespace != "testnet" ||
				cm.APIVersion != "v1" || cm.Kind != "ConfigMap" {
				t.Errorf("ConfigMap %s/%s %v", cm.Namespace, cm.Name, cm.TypeMeta)
			}
			checkOwner(t, cm.OwnerReferences)
			if !equalJSON(cm.Labels, commonLabels(fs)) || cm.Labels[labelManagedBy] != FieldManager {
				t.Errorf("labels %v, want the common labels, so the manager's cache sees it", cm.Labels)
			}
			if len(cm.Data) != 1 || len(cm.BinaryData) != 0 || cm.Immutable != nil {
				t.Errorf("data %v binaryData %v immutable %v, want only switches.json, mutable", cm.Data, cm.BinaryData, cm.Immutable)
			}
			got, ok := cm.Data["switches.json"]
			if !ok || got != tt.want {
				t.Errorf("switches.json %q, want %q", got, tt.want)
			}
			st, err := switches.Parse([]byte(got))
			if err != nil {
				t.Fatalf("the faucet cannot read switches.json: %v", err)
			}
			if !reflect.DeepEqual(st, tt.state) {
				t.Errorf("the faucet reads %+v, want %+v", st, tt.state)
			}
		})
	}
}

// TestDeploymentMountsTheSwitches: the pod mounts the whole ConfigMap as a
// read-only directory (no subPath, which the kubelet would never update),
// and --switches-file names its one key there; the old flags are gone.
func TestDeploymentMountsTheSwitches(t *testing.T) {
	for name, fs := range map[string]*faucetv1alpha1.FaucetServer{
		"embedded store":                   fixture(withSwitches(true, []string{"stx"}, []string{"sbtc"})),
		"postgres store":                   fixture(postgres(3), withSwitches(true, []string{"stx"}, []string{"btc"})),
		"every Secret file, BTC suspended": fixture(everySecret, withSwitches(false, []string{"btc", "stx"}, []string{"sbtc"})),
	} {
		t.Run(name, func(t *testing.T) {
			cm := switchesFor(fs)
			pod := deploymentFor(fs, "img", secretDigests{keys: "k"}).Spec.Template.Spec
			c := pod.Containers[0]

			i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "switches" })
			if i < 0 {
				t.Fatalf("volumes %+v lack switches", pod.Volumes)
			}
			want := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name},
				DefaultMode:          ptr.To(int32(0o444)),
			}}
			if !equalJSON(pod.Volumes[i].VolumeSource, want) {
				t.Errorf("switches volume %+v, want the whole ConfigMap %s, mode 0444", pod.Volumes[i].VolumeSource, cm.Name)
			}
			var mounts []corev1.VolumeMount
			for _, m := range c.VolumeMounts {
				if m.Name == "switches" {
					mounts = append(mounts, m)
				}
			}
			wantMount := corev1.VolumeMount{Name: "switches", MountPath: "/etc/faucet/switches", ReadOnly: true}
			if len(mounts) != 1 || !equalJSON(mounts[0], wantMount) {
				t.Fatalf("switches mounts %+v, want one %+v: read-only, a directory, no subPath", mounts, wantMount)
			}

			var file []string
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--switches-file="); ok {
					file = append(file, v)
				}
				if strings.HasPrefix(a, "--suspend") || strings.HasPrefix(a, "--disable-asset") {
					t.Errorf("arg %q: the switches are in the ConfigMap, not flags", a)
				}
			}
			if len(file) != 1 {
				t.Fatalf("args %q, want one --switches-file", c.Args)
			}
			var keys []string
			for k := range cm.Data {
				keys = append(keys, path.Join(mounts[0].MountPath, k))
			}
			if !slices.Equal(keys, file) {
				t.Errorf("--switches-file=%s, but the ConfigMap projects %q", file[0], keys)
			}
		})
	}
}

// TestSwitchingRollsNothing: whatever the switches, the Deployment, its
// pod template and config hash included, is the same: the kubelet brings
// the new ConfigMap to the running pods. Only the ConfigMap changes.
func TestSwitchingRollsNothing(t *testing.T) {
	digests := secretDigests{keys: "k", store: "s"}
	base := func(fs *faucetv1alpha1.FaucetServer) {
		withAssets(sbtcAsset(1000, nil), tokenAsset("tusd", testnetTUSD, 7, nil), btcAsset(btcSpec(true)))(fs)
	}
	for _, store := range []struct {
		name string
		opt  func(*faucetv1alpha1.FaucetServer)
	}{{"embedded store", func(*faucetv1alpha1.FaucetServer) {}}, {"postgres store", postgres(3)}} {
		off := fixture(base, store.opt)
		offDeployment := deploymentFor(off, "img", digests)
		offSwitches := switchesFor(off).Data
		for name, mutate := range map[string]func(*faucetv1alpha1.FaucetServer){
			"spec.suspend":                        withSwitches(true, nil, nil),
			"spec.suspendedAssets":                withSwitches(false, []string{"stx", "tusd"}, nil),
			"spec.suspendedAssets, another order": withSwitches(false, []string{"tusd", "stx"}, nil),
			"spec.disabledAssets":                 withSwitches(false, nil, []string{"stx"}),
			"spec.disabledAssets, every asset":    withSwitches(false, nil, []string{"stx", "sbtc", "btc", "tusd"}),
			"all three":                           withSwitches(true, []string{"btc"}, []string{"sbtc", "tusd"}),
		} {
			t.Run(store.name+": "+name, func(t *testing.T) {
				on := fixture(base, store.opt, mutate)
				d := deploymentFor(on, "img", digests)
				if d.Spec.Template.Annotations[ConfigHashAnnotation] != offDeployment.Spec.Template.Annotations[ConfigHashAnnotation] {
					t.Error("the config hash changed: the pods would restart")
				}
				if !equalJSON(d.Spec.Template, offDeployment.Spec.Template) {
					t.Errorf("the pod template changed: the pods would restart\n got %+v\nwant %+v", d.Spec.Template, offDeployment.Spec.Template)
				}
				if !equalJSON(d, offDeployment) {
					t.Error("the Deployment changed")
				}
				if equalJSON(switchesFor(on).Data, offSwitches) {
					t.Errorf("the ConfigMap's data %v did not change", offSwitches)
				}
			})
		}
	}
}

// TestMCP: spec.mcp.enabled is the faucet's --mcp, on by default; unlike
// the switches it is a flag, so turning it off rolls the pods.
func TestMCP(t *testing.T) {
	mcpArgs := func(fs *faucetv1alpha1.FaucetServer) []string {
		var got []string
		for _, a := range serverArgs(fs) {
			if a == "--mcp" || strings.HasPrefix(a, "--mcp=") {
				got = append(got, a)
			}
		}
		return got
	}
	hash := func(fs *faucetv1alpha1.FaucetServer) string {
		return deploymentFor(fs, "img", secretDigests{keys: "k"}).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	mcp := func(enabled *bool) func(*faucetv1alpha1.FaucetServer) {
		return func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.MCP = &faucetv1alpha1.MCPSpec{Enabled: enabled} }
	}
	base := hash(fixture())
	for name, tt := range map[string]struct {
		// mutate sets spec.mcp
		mutate func(*faucetv1alpha1.FaucetServer)
		// want are the --mcp flags
		want []string
	}{
		"no spec.mcp: serve's default, on":       {mutate: func(*faucetv1alpha1.FaucetServer) {}},
		"empty spec.mcp, before the CRD default": {mutate: mcp(nil)},
		"enabled, the CRD's default":             {mutate: mcp(ptr.To(true))},
		"disabled":                               {mutate: mcp(ptr.To(false)), want: []string{"--mcp=false"}},
	} {
		t.Run(name, func(t *testing.T) {
			fs := fixture(tt.mutate)
			if got := mcpArgs(fs); !slices.Equal(got, tt.want) {
				t.Errorf("--mcp flags %q, want %q", got, tt.want)
			}
			checkArgsParseBack(t, fs)
			if on := serverOptions(fs).HTTP.MCP; on != (tt.want == nil) {
				t.Errorf("serve's MCP %v", on)
			}
			if (hash(fs) == base) != (tt.want == nil) {
				t.Errorf("config hash changed: %v, want a change only when MCP is turned off", hash(fs) != base)
			}
		})
	}
}

// TestCacheByObjectSeesEveryChild: the manager caches only the kinds and
// labels CacheByObject lists; a child outside them, like the switches'
// ConfigMap, would go unseen (no watch event, an API read per reconcile).
// Every kind listed is a child kind, which the operator's role lets it
// read, watch, create and patch, or the faucet's pods, which it only reads
// and watches.
func TestCacheByObjectSeesEveryChild(t *testing.T) {
	fs := fixture(postgres(3)) // the budget
	embedded := fixture()      // the claim
	deploy := deploymentFor(fs, "img", secretDigests{keys: "k"})
	// A pod as the Deployment's ReplicaSet creates it, with the template's labels.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fs.Namespace, Name: fs.Name + "-7d9f-x2x4q", Labels: deploy.Spec.Template.Labels}}
	children := []client.Object{
		serviceAccountFor(fs), serviceFor(fs), switchesFor(fs),
		deploy, podDisruptionBudgetFor(fs),
		persistentVolumeClaimFor(embedded, nil), pod,
	}
	byObject := CacheByObject()
	if len(byObject) != len(children) {
		t.Errorf("CacheByObject lists %d kinds, the operator reads %d", len(byObject), len(children))
	}
	for _, child := range children {
		found := false
		for obj, opts := range byObject {
			if reflect.TypeOf(obj) != reflect.TypeOf(child) {
				continue
			}
			found = true
			if opts.Label == nil || !opts.Label.Matches(labels.Set(child.GetLabels())) {
				t.Errorf("%T %s: labels %v outside the cache's selector %v", child, child.GetName(), child.GetLabels(), opts.Label)
			}
		}
		if !found {
			t.Errorf("%T is not in CacheByObject", child)
		}
	}

	raw, err := os.ReadFile(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	for obj := range byObject {
		gvks, _, err := clientgoscheme.Scheme.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		group, resource := gvks[0].Group, strings.ToLower(gvks[0].Kind)+"s"
		verbs := map[string]bool{}
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
				for _, v := range r.Verbs {
					verbs[v] = true
				}
			}
		}
		want := []string{"get", "list", "watch", "create", "patch"}
		if _, isPod := obj.(*corev1.Pod); isPod {
			want = want[:3]
			if verbs["create"] || verbs["patch"] {
				t.Errorf("config/rbac/role.yaml lets the operator write pods: %v", verbs)
			}
		}
		for _, v := range want {
			if !verbs[v] {
				t.Errorf("config/rbac/role.yaml does not grant %s on %q %s", v, group, resource)
			}
		}
	}
}
