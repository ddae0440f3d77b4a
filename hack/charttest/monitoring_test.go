package charttest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/controllers"
)

// faucetPod is the pod template of the Deployment the operator builds for a
// FaucetServer, which the PodMonitor must select and scrape.
func faucetPod(t *testing.T, name string) corev1.PodTemplateSpec {
	t.Helper()
	fs := &faucetv1alpha1.FaucetServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "faucet-testnet", UID: "00000000-0000-0000-0000-000000000002"},
		Spec: faucetv1alpha1.FaucetServerSpec{
			Node:         faucetv1alpha1.NodeSpec{URL: "http://stacks-node:20443"},
			KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
			PodLabels:    map[string]string{"team": "stacks"},
		},
	}
	return controllers.DeploymentFor(fs, "ghcr.io/stxfaucet/faucet-operator:test").Spec.Template
}

// assertPodMonitorScrapesFaucets checks a PodMonitor against the faucet pods
// the operator really builds: it selects them, scrapes a port they have,
// and names the FaucetServer and the job as the alerts expect.
func assertPodMonitorScrapesFaucets(t *testing.T, pm *unstructured.Unstructured, serverLabel, job string) {
	t.Helper()
	pod := faucetPod(t, "testnet")
	for k, v := range nested(t, pm, "spec", "selector", "matchLabels").(map[string]any) {
		if pod.Labels[k] != v {
			t.Errorf("PodMonitor selects %s=%v, the faucet pod's label is %q", k, v, pod.Labels[k])
		}
	}
	if pod.Labels["app.kubernetes.io/instance"] != "testnet" {
		t.Errorf("faucet pod label app.kubernetes.io/instance %q, want the FaucetServer name, which the PodMonitor copies into %s", pod.Labels["app.kubernetes.io/instance"], serverLabel)
	}
	endpoint := nested(t, pm, "spec", "podMetricsEndpoints", 0).(map[string]any)
	port := endpoint["port"]
	if !slices.ContainsFunc(pod.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == port }) {
		t.Errorf("PodMonitor scrapes port %v, the faucet container has %v", port, pod.Spec.Containers[0].Ports)
	}
	if endpoint["path"] != "/metrics" {
		t.Errorf("PodMonitor path %v, want /metrics", endpoint["path"])
	}
	relabelings, _ := endpoint["relabelings"].([]any)
	if len(relabelings) < 2 {
		t.Fatalf("PodMonitor relabelings %v: want the FaucetServer and job ones first", relabelings)
	}
	if got, want := relabelings[0], map[string]any{
		"action": "replace", "sourceLabels": []any{"__meta_kubernetes_pod_label_app_kubernetes_io_instance"}, "targetLabel": serverLabel,
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("first relabeling %v, want %v", got, want)
	}
	if got, want := relabelings[1], map[string]any{"action": "replace", "replacement": job, "targetLabel": "job"}; !reflect.DeepEqual(got, want) {
		t.Errorf("second relabeling %v, want %v", got, want)
	}
}

// TestRenderPodMonitor checks the faucet PodMonitor with its defaults.
func TestRenderPodMonitor(t *testing.T) {
	pm := one(t, render(t, "--set", "faucetMetrics.podMonitor.enabled=true"), "PodMonitor")
	if pm.GetNamespace() != releaseNamespace || pm.GetName() != fullname+"-faucets" {
		t.Errorf("PodMonitor %s/%s, want %s/%s-faucets", pm.GetNamespace(), pm.GetName(), releaseNamespace, fullname)
	}
	if got := nested(t, pm, "spec", "namespaceSelector"); !reflect.DeepEqual(got, map[string]any{"any": true}) {
		t.Errorf("PodMonitor namespaceSelector %v, want any: the operator watches every namespace", got)
	}
	assertPodMonitorScrapesFaucets(t, pm, "faucetserver", "faucet-server")
	assertReleaseLabels(t, []*unstructured.Unstructured{pm})
}

// TestRenderMonitoringFull checks the PodMonitor, the alerts and the
// dashboard of values-full.yaml, with a FaucetServer label and job of its
// own.
func TestRenderMonitoringFull(t *testing.T) {
	objs := render(t, "-f", "hack/charttest/testdata/values-full.yaml")
	const serverLabel, job = "faucet_server", "stx-faucets"

	t.Run("PodMonitor", func(t *testing.T) {
		pm := one(t, objs, "PodMonitor")
		if pm.GetNamespace() != "monitoring" || pm.GetLabels()["release"] != "kube-prometheus-stack" ||
			pm.GetAnnotations()["example.com/owner"] != "platform" {
			t.Errorf("PodMonitor %s/%s labels %v annotations %v", pm.GetNamespace(), pm.GetName(), pm.GetLabels(), pm.GetAnnotations())
		}
		if got := nested(t, pm, "spec", "namespaceSelector", "matchNames"); !reflect.DeepEqual(got, []any{"faucet-testnet", "faucet-devnet"}) {
			t.Errorf("PodMonitor namespaces %v, want the watched ones", got)
		}
		assertPodMonitorScrapesFaucets(t, pm, serverLabel, job)
		endpoint := nested(t, pm, "spec", "podMetricsEndpoints", 0).(map[string]any)
		for k, want := range map[string]any{"interval": "15s", "scrapeTimeout": "10s", "honorLabels": true} {
			if endpoint[k] != want {
				t.Errorf("PodMonitor %s %v, want %v", k, endpoint[k], want)
			}
		}
		if got := dig(endpoint, "relabelings", "2", "targetLabel"); got != "node" {
			t.Errorf("the user's relabeling is not after the chart's: %v", endpoint["relabelings"])
		}
		if got := dig(endpoint, "metricRelabelings", "0", "action"); got != "drop" {
			t.Errorf("metricRelabelings %v", endpoint["metricRelabelings"])
		}
	})

	t.Run("PrometheusRule", func(t *testing.T) {
		pr := one(t, objs, "PrometheusRule")
		if pr.GetNamespace() != "monitoring" || pr.GetLabels()["release"] != "kube-prometheus-stack" {
			t.Errorf("PrometheusRule %s/%s labels %v", pr.GetNamespace(), pr.GetName(), pr.GetLabels())
		}
		groups := nested(t, pr, "spec", "groups").([]any)
		rules := checkRuleGroups(t, groups, slices.DeleteFunc(slices.Clone(allAlerts), func(a string) bool { return a == "FaucetNodeUnreachable" }))
		for name, rule := range rules {
			expr := rule["expr"].(string)
			if !strings.Contains(expr, serverLabel) && name != "FaucetNonceStuck" { // it keeps every label
				t.Errorf("%s does not aggregate by %s:\n%s", name, serverLabel, expr)
			}
			if got := dig(rule, "labels", "team"); got != "stacks" {
				t.Errorf("%s labels %v lack team: stacks", name, rule["labels"])
			}
			if got := dig(rule, "annotations", "runbook_url"); got != "https://github.com/stxfaucet/faucet-operator/blob/main/charts/faucet-operator/files/runbooks/"+name+".md" {
				t.Errorf("%s runbook_url %v", name, got)
			}
		}
		for name, want := range map[string]string{
			"FaucetLow":                  "< 250",
			"FaucetChainStalled":         "> 2700",
			"FaucetNonceStuck":           "[30m]",
			"FaucetDripFailureRatioHigh": "stacking_amount_unavailable",
			"FaucetPodNotReady":          fmt.Sprintf(`up{job=%q}`, job),
		} {
			if expr := rules[name]["expr"].(string); !strings.Contains(expr, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, expr)
			}
		}
		if got := rules["FaucetEmpty"]["for"]; got != "2m" {
			t.Errorf("FaucetEmpty for %v, want 2m", got)
		}
		if got := rules["FaucetBTCNodeUnreachable"]["for"]; got != "25m" {
			t.Errorf("FaucetBTCNodeUnreachable for %v, want 25m", got)
		}
		if expr := rules["FaucetBTCNodeUnreachable"]["expr"].(string); !strings.Contains(expr, "max by (namespace, "+serverLabel+") (faucet_btc_node_up)") {
			t.Errorf("FaucetBTCNodeUnreachable does not aggregate by namespace and %s:\n%s", serverLabel, expr)
		}
		if got := rules["FaucetStacksNodeOut"]["for"]; got != "15m" {
			t.Errorf("FaucetStacksNodeOut for %v, want 15m", got)
		}
		if expr := rules["FaucetStacksNodeOut"]["expr"].(string); !strings.Contains(expr, "by (namespace, "+serverLabel+", node)") {
			t.Errorf("FaucetStacksNodeOut does not count by namespace, %s and node:\n%s", serverLabel, expr)
		}
		if got := rules["FaucetBitcoinNodeOut"]["for"]; got != "20m" {
			t.Errorf("FaucetBitcoinNodeOut for %v, want 20m", got)
		}
		if expr := rules["FaucetBitcoinNodeOut"]["expr"].(string); !strings.Contains(expr, "by (namespace, "+serverLabel+", node)") {
			t.Errorf("FaucetBitcoinNodeOut does not count by namespace, %s and node:\n%s", serverLabel, expr)
		}
		checkRules(t, "faucet-rules.yaml", groups)
	})

	t.Run("dashboard", func(t *testing.T) {
		cm := one(t, objs, "ConfigMap")
		if cm.GetNamespace() != "monitoring" || cm.GetLabels()["grafana_dashboard"] != "1" ||
			cm.GetLabels()["release"] != "kube-prometheus-stack" || cm.GetAnnotations()["grafana_folder"] != "Faucets" {
			t.Errorf("dashboard ConfigMap %s/%s labels %v annotations %v", cm.GetNamespace(), cm.GetName(), cm.GetLabels(), cm.GetAnnotations())
		}
		checkDashboard(t, nested(t, cm, "data", "faucet.json").(string), serverLabel)
	})
}
