package controllers

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// fixture returns a minimal FaucetServer, as a user would write it before
// API-server defaulting, modified by opts.
func fixture(opts ...func(*faucetv1alpha1.FaucetServer)) *faucetv1alpha1.FaucetServer {
	fs := &faucetv1alpha1.FaucetServer{
		ObjectMeta: metav1.ObjectMeta{Name: "faucet", Namespace: "testnet", UID: types.UID("uid-1"), Generation: 3},
		Spec: faucetv1alpha1.FaucetServerSpec{
			Node:         faucetv1alpha1.NodeSpec{URL: "http://stacks-node:20443"},
			KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
		},
	}
	for _, o := range opts {
		o(fs)
	}
	return fs
}

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func TestServerArgs(t *testing.T) {
	base := []string{
		"serve", "--listen=:3999", "--log-format=json",
		"--node-url=http://stacks-node:20443", "--key-file=/etc/faucet/keys/keys",
	}
	tests := map[string]struct {
		// spec changes applied to the fixture
		mutate func(*faucetv1alpha1.FaucetServer)
		// want is the full argument list
		want []string
	}{
		"minimal spec passes only the required flags, so server defaults apply": {
			mutate: func(*faucetv1alpha1.FaucetServer) {},
			want:   base,
		},
		"a custom Secret data key names the mounted file": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.KeySecretRef.Key = "faucet.txt" },
			want: []string{
				"serve", "--listen=:3999", "--log-format=json",
				"--node-url=http://stacks-node:20443", "--key-file=/etc/faucet/keys/faucet.txt",
			},
		},
		"every setting maps to its flag": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Node.Timeout = &metav1.Duration{Duration: 15 * time.Second}
				fs.Spec.ChainID = ptr.To(int64(2147483648))
				fs.Spec.Amounts = &faucetv1alpha1.Amounts{Default: ptr.To(int64(1_000_000)), StackingPaddingPercent: ptr.To(int32(0)), Stacking: ptr.To(int64(90_000_000_000))}
				fs.Spec.Fee = &faucetv1alpha1.Fee{Min: ptr.To(int64(200)), Max: ptr.To(int64(5000)), Fallback: ptr.To(int64(300))}
				fs.Spec.Memo = ptr.To("hello faucet")
				fs.Spec.RateLimits = &faucetv1alpha1.RateLimits{
					PerAddress:         &faucetv1alpha1.RateLimit{Requests: 5, Window: duration(5 * time.Minute)},
					StackingPerAddress: &faucetv1alpha1.RateLimit{Requests: 1, Window: duration(48 * time.Hour)},
					PerIP:              &faucetv1alpha1.RateLimit{Requests: 30, Window: duration(90 * time.Second)},
					TrustedProxyHops:   ptr.To(int32(2)),
				}
				fs.Spec.Suspend = true
			},
			want: append(slices.Clone(base),
				"--node-timeout=15s", "--chain-id=2147483648",
				"--amount=1000000", "--stacking-padding-percent=0", "--stacking-amount=90000000000",
				"--fee-min=200", "--fee-max=5000", "--fee-fallback=300",
				"--memo=hello faucet",
				"--limit-address=5/5m0s", "--limit-stacking=1/48h0m0s", "--limit-ip=30/1m30s",
				"--trusted-proxy-hops=2", "--suspend"),
		},
		"empty optional groups pass nothing": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Amounts, fs.Spec.Fee, fs.Spec.RateLimits = &faucetv1alpha1.Amounts{}, &faucetv1alpha1.Fee{}, &faucetv1alpha1.RateLimits{}
			},
			want: base,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := serverArgs(fixture(tt.mutate))
			if !slices.Equal(got, tt.want) {
				t.Errorf("serverArgs:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDeploymentFor(t *testing.T) {
	const image, digest = "ghcr.io/stxfaucet/faucet:v1", "digest-1"
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// check inspects the built Deployment
		check func(t *testing.T, d *appsv1.Deployment)
	}{
		"one pod, Recreate, owned by the FaucetServer": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				if d.Name != "faucet" || d.Namespace != "testnet" {
					t.Errorf("name %s/%s", d.Namespace, d.Name)
				}
				if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
					t.Errorf("replicas %d strategy %s, want 1 Recreate", *d.Spec.Replicas, d.Spec.Strategy.Type)
				}
				checkOwner(t, d.OwnerReferences)
				if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
					t.Errorf("TypeMeta %v, server-side apply needs it", d.TypeMeta)
				}
			},
		},
		"hardened pod and container": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				psc := pod.SecurityContext
				if !*psc.RunAsNonRoot || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("pod securityContext %+v", psc)
				}
				if *pod.AutomountServiceAccountToken || pod.ServiceAccountName != "faucet" {
					t.Errorf("service account %q automount %v", pod.ServiceAccountName, *pod.AutomountServiceAccountToken)
				}
				sc := pod.Containers[0].SecurityContext
				if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
					!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
					sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("container securityContext %+v", sc)
				}
			},
		},
		"keys come from a read-only Secret volume, never env": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				c := pod.Containers[0]
				if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
					t.Errorf("container has env %v / envFrom %v", c.Env, c.EnvFrom)
				}
				if len(c.VolumeMounts) != 1 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].MountPath != "/etc/faucet/keys" {
					t.Errorf("volume mounts %+v", c.VolumeMounts)
				}
				v := pod.Volumes[0].Secret
				if v == nil || v.SecretName != "faucet-keys" || len(v.Items) != 1 || v.Items[0].Key != "keys" || *v.DefaultMode != 0o440 {
					t.Errorf("secret volume %+v", v)
				}
				if !slices.Contains(c.Args, "--key-file=/etc/faucet/keys/keys") {
					t.Errorf("args %q lack --key-file", c.Args)
				}
			},
		},
		"probes and port": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				c := d.Spec.Template.Spec.Containers[0]
				if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
					t.Errorf("probes %s %s", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
				}
				if c.Ports[0].ContainerPort != 3999 || c.Ports[0].Name != "http" {
					t.Errorf("ports %+v", c.Ports)
				}
			},
		},
		"default image is the manager's": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
					t.Errorf("image %q, want %q", got, image)
				}
			},
		},
		"spec.image overrides": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Image = "example.com/faucet:dev" },
			check: func(t *testing.T, d *appsv1.Deployment) {
				if got := d.Spec.Template.Spec.Containers[0].Image; got != "example.com/faucet:dev" {
					t.Errorf("image %q", got)
				}
			},
		},
		"pod overrides are copied; selector labels cannot be overridden": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}
				fs.Spec.NodeSelector = map[string]string{"pool": "faucets"}
				fs.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
				fs.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
				fs.Spec.PriorityClassName = "low"
				fs.Spec.PodLabels = map[string]string{"team": "devrel", labelInstance: "hijack"}
				fs.Spec.PodAnnotations = map[string]string{"prometheus.io/scrape": "true", ConfigHashAnnotation: "hijack"}
			},
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template
				if pod.Spec.Containers[0].Resources.Requests.Cpu().String() != "50m" {
					t.Errorf("resources %+v", pod.Spec.Containers[0].Resources)
				}
				if pod.Spec.NodeSelector["pool"] != "faucets" || len(pod.Spec.Tolerations) != 1 ||
					pod.Spec.Affinity == nil || pod.Spec.PriorityClassName != "low" {
					t.Errorf("scheduling %+v", pod.Spec)
				}
				if pod.Labels["team"] != "devrel" || pod.Labels[labelInstance] != "faucet" {
					t.Errorf("pod labels %v", pod.Labels)
				}
				if pod.Annotations["prometheus.io/scrape"] != "true" || pod.Annotations[ConfigHashAnnotation] == "hijack" {
					t.Errorf("pod annotations %v", pod.Annotations)
				}
				for k, v := range d.Spec.Selector.MatchLabels {
					if pod.Labels[k] != v {
						t.Errorf("selector %s=%s does not match pod label %q", k, v, pod.Labels[k])
					}
				}
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			before := fs.DeepCopy()
			d := deploymentFor(fs, image, digest)
			tt.check(t, d)
			if !equalJSON(before, fs) {
				t.Error("deploymentFor modified its input")
			}
		})
	}
}

func TestConfigHashRollsThePod(t *testing.T) {
	hash := func(fs *faucetv1alpha1.FaucetServer, digest string) string {
		return deploymentFor(fs, "img", digest).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	base := hash(fixture(), "keys-v1")
	if base == "" || base != hash(fixture(), "keys-v1") {
		t.Fatal("hash missing or not deterministic")
	}
	if hash(fixture(), "keys-v2") == base {
		t.Error("rotating the keys did not change the hash")
	}
	if hash(fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Memo = ptr.To("other") }), "keys-v1") == base {
		t.Error("changing the spec did not change the hash")
	}
	if hash(fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.PodLabels = map[string]string{"a": "b"} }), "keys-v1") != base {
		t.Error("a pod label changed the server config hash")
	}
	if strings.Contains(base, "keys-v1") {
		t.Error("the hash carries its input")
	}
}

func TestServiceFor(t *testing.T) {
	tests := map[string]struct {
		// service is spec.service
		service *faucetv1alpha1.ServiceSpec
		// wantType and wantPort are the expected Service type and port
		wantType corev1.ServiceType
		wantPort int32
		// wantURL is the status URL derived from the Service
		wantURL string
	}{
		"defaults": {
			wantType: corev1.ServiceTypeClusterIP, wantPort: 3999, wantURL: "http://faucet.testnet.svc:3999",
		},
		"load balancer on port 80": {
			service:  &faucetv1alpha1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Port: ptr.To(int32(80)), Annotations: map[string]string{"lb": "internal"}},
			wantType: corev1.ServiceTypeLoadBalancer, wantPort: 80, wantURL: "http://faucet.testnet.svc:80",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			svc := serviceFor(fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Service = tt.service }))
			if svc.Spec.Type != tt.wantType || svc.Spec.Ports[0].Port != tt.wantPort || svc.Spec.Ports[0].TargetPort.StrVal != "http" {
				t.Errorf("service spec %+v", svc.Spec)
			}
			if svc.Spec.Selector[labelInstance] != "faucet" || svc.Spec.Selector[labelName] != appName {
				t.Errorf("selector %v", svc.Spec.Selector)
			}
			if tt.service != nil && svc.Annotations["lb"] != "internal" {
				t.Errorf("annotations %v", svc.Annotations)
			}
			checkOwner(t, svc.OwnerReferences)
			if got := serviceURL(svc); got != tt.wantURL {
				t.Errorf("serviceURL %q, want %q", got, tt.wantURL)
			}
		})
	}
}

func TestServiceAccountFor(t *testing.T) {
	sa := serviceAccountFor(fixture())
	if sa.Name != "faucet" || sa.Namespace != "testnet" || *sa.AutomountServiceAccountToken {
		t.Errorf("service account %+v", sa)
	}
	if sa.Labels[labelManagedBy] != FieldManager {
		t.Errorf("labels %v lack %s, so the manager's cache would not see it", sa.Labels, labelManagedBy)
	}
	checkOwner(t, sa.OwnerReferences)
}

func checkOwner(t *testing.T, refs []metav1.OwnerReference) {
	t.Helper()
	if len(refs) != 1 {
		t.Fatalf("owner references %v, want one", refs)
	}
	r := refs[0]
	if r.Kind != "FaucetServer" || r.APIVersion != "faucet.stxfaucet.dev/v1alpha1" || r.Name != "faucet" ||
		r.UID != "uid-1" || !*r.Controller || !*r.BlockOwnerDeletion {
		t.Errorf("owner reference %+v", r)
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
