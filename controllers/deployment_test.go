package controllers

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server"
)

// The parts of the Deployment, each built on its own; TestDeploymentFor
// checks them together.

// everySecret sets every Secret the pod mounts as a file besides the keys:
// API tokens, a treasury key, and the BTC key and credentials.
func everySecret(fs *faucetv1alpha1.FaucetServer) {
	apiTokens("faucet-api-tokens", "tokens.txt")(fs)
	fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{KeySecretRef: faucetv1alpha1.TreasuryKeyReference{Name: "holder"}}
	withBTC(btcSpec(true))(fs)
}

func TestDeploymentStrategy(t *testing.T) {
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// want is the strategy
		want appsv1.DeploymentStrategy
	}{
		"embedded store: Recreate, the volume has one writer": {
			want: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		},
		"postgres store: one extra pod at a time, none taken away first": {
			mutate: postgres(3),
			want: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
				},
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			if got := deploymentStrategy(fs); !equalJSON(got, tt.want) {
				t.Errorf("strategy %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPodVolumes(t *testing.T) {
	type mount struct {
		name, path string
		readOnly   bool
	}
	keys := mount{"keys", "/etc/faucet/keys", true}
	switches := mount{"switches", "/etc/faucet/switches", true}
	data := mount{"data", "/var/lib/faucet", false}
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// want are the container's mounts, in order; the volumes have the
		// same names in the same order
		want []mount
	}{
		"embedded store: the keys, the switches and the claim": {want: []mount{keys, switches, data}},
		"postgres store: the keys and the switches":            {mutate: postgres(2), want: []mount{keys, switches}},
		"every Secret file, each in its own directory, then the switches and the claim": {
			mutate: everySecret,
			want: []mount{
				keys, {"api-tokens", "/etc/faucet/api-tokens", true}, {"treasury", "/etc/faucet/treasury", true},
				{"btc-key", "/etc/faucet/btc-key", true}, {"btc-rpc-credentials", "/etc/faucet/btc-rpc", true}, switches, data,
			},
		},
		"the switches do not change the volumes": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Suspend = true
				fs.Spec.SuspendedAssets = []string{"stx"}
				fs.Spec.DisabledAssets = []string{"sbtc", "btc"}
			},
			want: []mount{keys, switches, data},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			volumes, mounts := podVolumes(fs)
			var got []mount
			for i, m := range mounts {
				got = append(got, mount{m.Name, m.MountPath, m.ReadOnly})
				if m.SubPath != "" {
					t.Errorf("mount %s has subPath %q: the kubelet would not update it", m.Name, m.SubPath)
				}
				if i >= len(volumes) || volumes[i].Name != m.Name {
					t.Errorf("mount %d (%s) has no volume of its name at %d: %+v", i, m.Name, i, volumes)
				}
			}
			if !slices.Equal(got, tt.want) || len(volumes) != len(mounts) {
				t.Errorf("mounts %+v, want %+v (%d volumes)", got, tt.want, len(volumes))
			}
			for _, v := range volumes {
				switch {
				case v.Name == "data":
					if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "faucet-data" {
						t.Errorf("data volume %+v", v)
					}
				case v.Name == "switches":
					// The whole ConfigMap, no items: the faucet's file
					// is its one key, and the kubelet swaps it in place.
					want := &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "faucet-switches"},
						DefaultMode:          ptr.To(int32(0o444)),
					}
					if v.Secret != nil || !equalJSON(v.ConfigMap, want) {
						t.Errorf("switches volume %+v, want the ConfigMap faucet-switches, mode 0444", v)
					}
				case v.Secret == nil || len(v.Secret.Items) != 1 || *v.Secret.DefaultMode != 0o440:
					t.Errorf("volume %+v, want one key of a Secret, mode 0440", v)
				}
			}
		})
	}
}

func TestContainerEnv(t *testing.T) {
	extra := func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.ExtraEnv = []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: "200MiB"}, {Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}
	}
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// want are the variables' names, in order; nil for no env at all
		want []string
	}{
		"embedded store, no extra env: none, so an upgraded operator's apply is unchanged": {},
		"postgres store: FAUCET_STORE": {mutate: postgres(1), want: []string{"FAUCET_STORE"}},
		"extra env alone":              {mutate: extra, want: []string{"GOMEMLIMIT", "HTTPS_PROXY"}},
		"extra env after FAUCET_STORE": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { postgres(2)(fs); extra(fs) },
			want:   []string{"FAUCET_STORE", "GOMEMLIMIT", "HTTPS_PROXY"},
		},
		"postgres and BTC: the pod's IP, where the others forward BTC drips": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { postgres(2)(fs); withBTC(btcSpec(false))(fs) },
			want:   []string{"FAUCET_STORE", "FAUCET_POD_IP"},
		},
		"BTC on the embedded store: no peers": {mutate: withBTC(btcSpec(false))},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			env := containerEnv(fs)
			var got []string
			for _, e := range env {
				got = append(got, e.Name)
			}
			if !slices.Equal(got, tt.want) || (tt.want == nil) != (env == nil) {
				t.Errorf("env %q, want %q", got, tt.want)
			}
			if len(env) > 0 && env[0].Name == StoreEnv {
				if ref := env[0].ValueFrom.SecretKeyRef; ref == nil || ref.Name != "faucet-db-app" || ref.Key != "uri" || env[0].Value != "" {
					t.Errorf("FAUCET_STORE %+v, want only a secretKeyRef to faucet-db-app/uri", env[0])
				}
			}
			ports := containerPorts(fs)
			if peers := slices.Contains(got, "FAUCET_POD_IP"); peers != (len(ports) == 2) {
				t.Errorf("ports %+v with env %q: the peer port goes with FAUCET_POD_IP", ports, got)
			}
			for _, e := range env {
				if e.Name == "FAUCET_POD_IP" && (e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP") {
					t.Errorf("FAUCET_POD_IP %+v, want a fieldRef to status.podIP", e)
				}
			}
			if len(fs.Spec.ExtraEnv) > 0 {
				env[len(env)-1].Value = "changed"
				if fs.Spec.ExtraEnv[len(fs.Spec.ExtraEnv)-1].Value == "changed" {
					t.Error("the env shares spec.extraEnv's items")
				}
			}
		})
	}
}

func TestPodLabelsAndAnnotations(t *testing.T) {
	fs := fixture(func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.PodLabels = map[string]string{"team": "devrel", labelInstance: "hijack"}
		fs.Spec.PodAnnotations = map[string]string{"prometheus.io/scrape": "true", ConfigHashAnnotation: "hijack"}
	})
	before := fs.DeepCopy()
	labels := podLabels(fs)
	if labels["team"] != "devrel" || labels[labelInstance] != "faucet" || labels[labelManagedBy] != FieldManager {
		t.Errorf("labels %v: want spec.podLabels under the common labels", labels)
	}
	annotations := podAnnotations(fs, "h1")
	if annotations["prometheus.io/scrape"] != "true" || annotations[ConfigHashAnnotation] != "h1" {
		t.Errorf("annotations %v: want spec.podAnnotations and the config hash over them", annotations)
	}
	if !equalJSON(before, fs) {
		t.Error("the spec's maps were modified")
	}
	bare := fixture()
	if l, a := podLabels(bare), podAnnotations(bare, "h2"); len(l) != 3 || len(a) != 1 {
		t.Errorf("without spec maps: labels %v, annotations %v", l, a)
	}
}

func TestPodSpecForCopiesTheSpec(t *testing.T) {
	fs := fixture(func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.NodeSelector = map[string]string{"pool": "faucets"}
		fs.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To(int64(5))}}
		fs.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		fs.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone",
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelInstance: "faucet"}},
		}}
		fs.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		fs.Spec.PriorityClassName = "low"
	})
	before := fs.DeepCopy()
	pod := podSpecFor(fs, corev1.Container{Name: "c"}, nil)
	if !equalJSON(pod.NodeSelector, fs.Spec.NodeSelector) || !equalJSON(pod.Tolerations, fs.Spec.Tolerations) ||
		!equalJSON(pod.Affinity, fs.Spec.Affinity) || !equalJSON(pod.TopologySpreadConstraints, fs.Spec.TopologySpreadConstraints) ||
		!equalJSON(pod.ImagePullSecrets, fs.Spec.ImagePullSecrets) || pod.PriorityClassName != "low" {
		t.Errorf("pod spec %+v does not carry the spec's scheduling", pod)
	}
	if pod.ServiceAccountName != "faucet" || *pod.AutomountServiceAccountToken || *pod.EnableServiceLinks || len(pod.Containers) != 1 {
		t.Errorf("pod spec %+v", pod)
	}
	// Writing to the pod spec leaves the FaucetServer alone.
	pod.NodeSelector["pool"] = "x"
	*pod.Tolerations[0].TolerationSeconds = 9
	pod.Affinity.NodeAffinity = nil
	pod.TopologySpreadConstraints[0].LabelSelector.MatchLabels[labelInstance] = "x"
	pod.ImagePullSecrets[0].Name = "x"
	if !equalJSON(before, fs) {
		t.Error("the pod spec shares memory with the FaucetServer's spec")
	}
	if empty := podSpecFor(fixture(), corev1.Container{}, nil); empty.Tolerations != nil || empty.TopologySpreadConstraints != nil || empty.Affinity != nil {
		t.Errorf("without scheduling: %+v, want nil fields", empty)
	}
}

func TestContainerFor(t *testing.T) {
	fs := fixture(func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
	})
	mounts := []corev1.VolumeMount{{Name: "keys", MountPath: "/etc/faucet/keys", ReadOnly: true}}
	c := containerFor(fs, "img:1", []string{"serve"}, mounts)
	if c.Name != "faucet" || c.Image != "img:1" || !slices.Equal(c.Args, []string{"serve"}) || !equalJSON(c.VolumeMounts, mounts) {
		t.Errorf("container %+v", c)
	}
	if c.Resources.Limits.Memory().String() != "256Mi" {
		t.Errorf("resources %+v", c.Resources)
	}
	for probe, want := range map[*corev1.Probe]struct {
		path            string
		period, timeout int32
	}{c.LivenessProbe: {"/healthz", 10, 2}, c.ReadinessProbe: {"/readyz?exclude=btc", 2, 5}} {
		if probe.HTTPGet.Path != want.path || probe.HTTPGet.Port != intstr.FromString("http") ||
			probe.PeriodSeconds != want.period || probe.TimeoutSeconds != want.timeout || probe.FailureThreshold != 3 {
			t.Errorf("probe %+v, want %+v", probe, want)
		}
	}
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("securityContext %+v", sc)
	}
}

// A deleted pod of several fails readiness for longer than the probe needs
// to notice, still serving, then drains its drips, all within its grace
// period; a lone pod drains at once.
func TestLameDuckFitsTheGracePeriod(t *testing.T) {
	probe := time.Duration(readinessPeriod*probeFailures) * time.Second
	if lameDuck <= probe {
		t.Errorf("lame duck %s, want more than the readiness probe's %s to fail", lameDuck, probe)
	}
	for _, c := range []struct {
		name            string
		fs              *faucetv1alpha1.FaucetServer
		lameDuck, grace time.Duration
	}{
		{"one replica", fixture(), 0, server.ShutdownTimeout + exitMargin},
		{"three replicas on Postgres", fixture(postgres(3)), lameDuck, lameDuck + server.ShutdownTimeout + exitMargin},
	} {
		pod := DeploymentFor(c.fs, "img").Spec.Template.Spec
		if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second != c.grace {
			t.Errorf("%s: terminationGracePeriodSeconds %v, want %s", c.name, g, c.grace)
		}
		if !slices.Contains(pod.Containers[0].Args, "--shutdown-delay="+c.lameDuck.String()) {
			t.Errorf("%s: args %q lack --shutdown-delay=%s", c.name, pod.Containers[0].Args, c.lameDuck)
		}
		if p := pod.Containers[0].ReadinessProbe; p.PeriodSeconds != readinessPeriod || p.FailureThreshold != probeFailures {
			t.Errorf("%s: readiness probe %+v", c.name, p)
		}
	}
}
