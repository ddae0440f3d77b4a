package charttest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/controllers"
)

const fieldOwner = client.FieldOwner("charttest")

// TestApplyDryRun applies every rendered object of every value set to a real
// kube-apiserver: CRDs for real, everything else with a server-side apply
// dry run, which runs the whole write path (defaulting, OpenAPI and CEL
// validation, unknown-field rejection, admission) without persisting.
// Namespaces are created for real with the restricted Pod Security level, and
// any API warning fails the test, so a manager pod that is not "restricted"
// or a deprecated API fails here.
func TestApplyDryRun(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()

	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := render(t, vs.args...)
			var crds, others []*unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				} else {
					others = append(others, o)
				}
			}
			for _, crd := range crds {
				if err := c.installCRD(ctx, crd); err != nil {
					t.Fatal(err)
				}
			}
			namespaces := []string{releaseNamespace}
			for _, o := range others {
				if ns := o.GetNamespace(); ns != "" && !slices.Contains(namespaces, ns) {
					namespaces = append(namespaces, ns)
				}
			}
			for _, ns := range namespaces {
				if err := c.createNamespace(ctx, ns); err != nil {
					t.Fatal(err)
				}
			}
			c.takeWarnings()

			for _, o := range others {
				t.Run(o.GetKind()+"/"+names([]*unstructured.Unstructured{o})[0], func(t *testing.T) {
					if err := c.dryRunApply(ctx, o); err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}

	// The chart does not render the faucet pods, the operator does; they
	// run in the FaucetServer's namespace, which may enforce the restricted
	// level too, whichever store they use.
	t.Run("the operator's faucet Deployments are restricted", func(t *testing.T) {
		if err := c.createNamespace(ctx, "charttest-faucets"); err != nil {
			t.Fatal(err)
		}
		postgres := &faucetv1alpha1.StoreSpec{Postgres: &faucetv1alpha1.PostgresStore{URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "faucet-db-app", Key: "uri"}}}
		for name, tt := range map[string]struct {
			store *faucetv1alpha1.StoreSpec
			abuse *faucetv1alpha1.AbuseSpec
		}{
			"embedded": {},
			"postgres": {store: postgres},
			// The API tokens Secret is a second read-only Secret volume.
			"api-tokens": {store: postgres, abuse: &faucetv1alpha1.AbuseSpec{
				APITokens: &faucetv1alpha1.APITokens{SecretRef: faucetv1alpha1.APITokensSecretReference{Name: "faucet-api-tokens"}},
			}},
		} {
			t.Run(name, func(t *testing.T) {
				fs := &faucetv1alpha1.FaucetServer{
					ObjectMeta: metav1.ObjectMeta{Name: "faucet-" + name, Namespace: "charttest-faucets", UID: "00000000-0000-0000-0000-000000000001"},
					Spec: faucetv1alpha1.FaucetServerSpec{
						Node:         faucetv1alpha1.NodeSpec{URL: "http://stacks-node:20443"},
						KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
						Replicas:     ptr.To(int32(2)),
						Store:        tt.store,
						Abuse:        tt.abuse,
					},
				}
				raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(controllers.DeploymentFor(fs, "ghcr.io/stxfaucet/faucet-operator:test"))
				if err != nil {
					t.Fatal(err)
				}
				if err := c.dryRunApply(ctx, &unstructured.Unstructured{Object: raw}); err != nil {
					t.Fatal(err)
				}
			})
		}
	})

	// The checks above are only worth something if the dry run rejects bad
	// objects; these make sure it does.
	t.Run("the dry run rejects invalid objects", func(t *testing.T) {
		if err := c.createNamespace(ctx, "charttest-negative"); err != nil {
			t.Fatal(err)
		}
		tests := map[string]struct {
			// yaml is the object to apply.
			yaml string
			// wantErr must occur in the apply error; empty: the apply must succeed.
			wantErr string
			// wantWarning must occur in an API warning; empty: no warning.
			wantWarning string
		}{
			"FaucetServer failing the CRD's CEL rule": {
				yaml: `apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata: {name: bad-url, namespace: charttest-negative}
spec: {node: {url: "ftp://node:20443"}, keySecretRef: {name: keys}}`,
				wantErr: "node.url must be an http:// or https:// URL",
			},
			"FaucetServer whose ipAllow holds no IP (the CRD's CEL IP and CIDR libraries)": {
				yaml: `apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata: {name: bad-cidr, namespace: charttest-negative}
spec: {node: {url: "http://node:20443"}, keySecretRef: {name: keys}, abuse: {ipAllow: ["10.0.0.0/8", "10.0.0.0/33"]}}`,
				wantErr: "abuse.ipAllow entries must be IP addresses or CIDRs",
			},
			"FaucetServer with an unknown field": {
				yaml: `apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata: {name: unknown-field, namespace: charttest-negative}
spec: {node: {url: "http://node:20443"}, keySecretRef: {name: keys}, replica: 2}`,
				wantErr: "replica",
			},
			"FaucetServer with two replicas on the embedded store": {
				yaml: `apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata: {name: two-writers, namespace: charttest-negative}
spec: {node: {url: "http://node:20443"}, keySecretRef: {name: keys}, replicas: 2}`,
				wantErr: "spec.replicas must be 0 or 1 with the embedded store",
			},
			"FaucetServer with two replicas on a Postgres store": {
				yaml: `apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata: {name: shared, namespace: charttest-negative}
spec: {node: {url: "http://node:20443"}, keySecretRef: {name: keys}, replicas: 2, store: {postgres: {uriSecretRef: {name: db-app}}}}`,
			},
			// testdata/crds has the Prometheus Operator's real PodMonitor and
			// PrometheusRule CRDs, so their specs are validated too.
			"PrometheusRule whose for is no duration": {
				yaml: `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: bad-for, namespace: charttest-negative}
spec: {groups: [{name: faucet, rules: [{alert: X, expr: up == 0, for: 10 minutes}]}]}`,
				wantErr: "spec.groups[0].rules[0].for",
			},
			"PodMonitor with an unknown endpoint field": {
				yaml: `apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata: {name: bad-endpoint, namespace: charttest-negative}
spec: {selector: {}, podMetricsEndpoints: [{port: http, relabellings: []}]}`,
				wantErr: "relabellings",
			},
			"Deployment with an unknown field": {
				yaml: `apiVersion: apps/v1
kind: Deployment
metadata: {name: unknown-field, namespace: charttest-negative}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: x, image: x, securityContex: {}}]`,
				wantErr: "securityContex",
			},
			"Deployment whose pods are not restricted": {
				yaml: `apiVersion: apps/v1
kind: Deployment
metadata: {name: privileged, namespace: charttest-negative}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers: [{name: x, image: x, securityContext: {privileged: true}}]`,
				wantWarning: "violate PodSecurity",
			},
		}
		for name, tt := range tests {
			t.Run(name, func(t *testing.T) {
				objs, err := parseObjects([]byte(tt.yaml))
				if err != nil {
					t.Fatal(err)
				}
				c.takeWarnings()
				err = c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(objs[0]), client.DryRunAll, fieldOwner, client.ForceOwnership)
				warnings := strings.Join(c.takeWarnings(), "\n")
				switch {
				case tt.wantErr == "" && err != nil:
					t.Errorf("apply failed: %v", err)
				case tt.wantErr != "" && err == nil:
					t.Errorf("apply succeeded, want an error with %q", tt.wantErr)
				case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
					t.Errorf("apply error lacks %q: %v", tt.wantErr, err)
				}
				if tt.wantWarning != "" && !strings.Contains(warnings, tt.wantWarning) {
					t.Errorf("warnings %q lack %q", warnings, tt.wantWarning)
				}
			})
		}
	})
}

// installCRD applies a CRD for real and waits until it is established and
// its kind is served (in the client's REST mapper).
func (c *cluster) installCRD(ctx context.Context, u *unstructured.Unstructured) error {
	if err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), fieldOwner, client.ForceOwnership); err != nil {
		return fmt.Errorf("applying CRD %s: %w", u.GetName(), err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	return waitFor(ctx, "CRD "+u.GetName()+" to be established", func(ctx context.Context) (bool, error) {
		if err := c.client.Get(ctx, client.ObjectKey{Name: u.GetName()}, &crd); err != nil {
			return false, err
		}
		established := slices.ContainsFunc(crd.Status.Conditions, func(cond apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue
		})
		if !established {
			return false, nil
		}
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		for _, v := range crd.Spec.Versions {
			if _, err := c.client.RESTMapper().RESTMapping(gk, v.Name); err != nil {
				return false, nil //nolint:nilerr // discovery lags the CRD: retry
			}
		}
		return true, nil
	})
}

// createNamespace creates a namespace (if missing) that enforces, and warns
// about, the restricted Pod Security level.
func (c *cluster) createNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted", // warn also covers Deployments' pod templates
	}}}
	if err := c.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// dryRunApply server-side applies an object with dryRun=All and fails on an
// error or on any API warning.
func (c *cluster) dryRunApply(ctx context.Context, u *unstructured.Unstructured) error {
	c.takeWarnings()
	err := c.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.DryRunAll, fieldOwner, client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("dry-run apply: %w", err)
	}
	if w := c.takeWarnings(); len(w) > 0 {
		return fmt.Errorf("dry-run apply: API warnings:\n%s", strings.Join(w, "\n"))
	}
	return nil
}
