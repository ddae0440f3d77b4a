package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	texttemplate "text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// allAlerts are the alerts of templates/prometheusrule.yaml, in order.
var allAlerts = []string{
	"FaucetLow", "FaucetEmpty", "FaucetRunwayShort", "FaucetDripFailureRatioHigh", "FaucetNonceStuck",
	"FaucetNodeUnreachable", "FaucetChainStalled", "FaucetBTCNodeUnreachable", "FaucetStacksNodeOut", "FaucetBitcoinNodeOut",
	"FaucetPodNotReady",
}

// alertCases are the value sets the alerts are unit-tested with, each with
// its promtool test file in testdata/alerts/.
var alertCases = []struct {
	name     string
	values   []string
	testFile string
	alerts   []string // the alerts the values turn on
}{
	{
		name:     "default",
		values:   []string{"--set", "alerts.enabled=true"},
		testFile: "default.test.yaml",
		alerts:   allAlerts,
	},
	{
		name:     "custom",
		values:   []string{"-f", "hack/charttest/testdata/alerts/custom-values.yaml"},
		testFile: "custom.test.yaml",
		alerts: []string{"FaucetLow", "FaucetRunwayShort", "FaucetDripFailureRatioHigh", "FaucetNodeUnreachable", "FaucetChainStalled",
			"FaucetBTCNodeUnreachable", "FaucetStacksNodeOut", "FaucetBitcoinNodeOut", "FaucetPodNotReady"},
	},
}

// TestAlertRules renders the PrometheusRule, writes its rule groups to a
// Prometheus rules file, and runs promtool check rules and promtool test
// rules (testdata/alerts/*.test.yaml) on it. It also checks each alert's
// labels and annotations, that the expressions read only metrics the faucet
// exports (and the externalMetrics), and that the test file has, for every
// alert, an evaluation where it fires and one where it must not.
func TestAlertRules(t *testing.T) {
	for _, tc := range alertCases {
		t.Run(tc.name, func(t *testing.T) {
			pr := one(t, render(t, tc.values...), "PrometheusRule")
			groups := nested(t, pr, "spec", "groups").([]any)
			rules := checkRuleGroups(t, groups, tc.alerts)

			dir := checkRules(t, "faucet-rules.yaml", groups)

			test := prepareRuleTest(t, filepath.Join(repoRoot, "hack", "charttest", "testdata", "alerts", tc.testFile), rules, tc.alerts)
			writeFile(t, filepath.Join(dir, "faucet.test.yaml"), test)
			out, err := promtool(t, dir, "test", "rules", "faucet.test.yaml")
			t.Logf("promtool test rules %s:\n%s", tc.testFile, out)
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkRuleGroups checks the rendered groups: one group "faucet" with
// exactly the wanted alerts, each with a severity, a summary, a description
// and a runbook, reading only exported metrics. It returns the rules by
// alert name.
func checkRuleGroups(t *testing.T, groups []any, want []string) map[string]map[string]any {
	t.Helper()
	if len(groups) != 1 || dig(groups[0], "name") != "faucet" {
		t.Fatalf("rule groups %v, want one named faucet", groups)
	}
	rules := map[string]map[string]any{}
	var names []string
	for _, r := range dig(groups[0], "rules").([]any) {
		rule := r.(map[string]any)
		name, _ := rule["alert"].(string)
		names = append(names, name)
		rules[name] = rule
		if s, _ := dig(rule, "labels", "severity").(string); s == "" {
			t.Errorf("%s has no severity label", name)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if s, _ := dig(rule, "annotations", a).(string); strings.TrimSpace(s) == "" {
				t.Errorf("%s has no %s annotation", name, a)
			}
		}
		if rb, _ := dig(rule, "annotations", "runbook").(string); !strings.HasPrefix(rb, name+": ") ||
			!strings.Contains(rb, "\nCheck:") || !strings.Contains(rb, "\nAct:") {
			t.Errorf("%s runbook does not start with %q and say what to check and do:\n%s", name, name+": ", rb)
		}
		expr, _ := rule["expr"].(string)
		assertExportedMetrics(t, name, expr, true)
	}
	if !slices.Equal(names, want) {
		t.Errorf("alerts %v, want %v", names, want)
	}
	return rules
}

// prepareRuleTest reads a promtool test file and adds, to every expected
// alert, the runbook annotation the rendered rule gives it: the rule's
// runbook template expanded as Prometheus does, with the expected labels
// (a label the runbook names but the alert lacks is an error). It also
// checks that every alert the values turn on fires somewhere in the file
// and is expected not to fire somewhere else, and returns the file.
func prepareRuleTest(t *testing.T, path string, rules map[string]map[string]any, alerts []string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	tests, _ := file["tests"].([]any)
	for _, tg := range tests {
		for _, s := range dig(tg, "input_series").([]any) {
			// Unquoted, 0x10 is hex 16 to YAML, and this file is re-encoded.
			if _, ok := dig(s, "values").(string); !ok {
				t.Fatalf("%s: quote the values of %v", path, dig(s, "series"))
			}
		}
		for _, at := range dig(tg, "alert_rule_test").([]any) {
			name, _ := dig(at, "alertname").(string)
			rule, ok := rules[name]
			if !ok {
				t.Fatalf("%s tests %s, which the values do not create", path, name)
			}
			exp, _ := dig(at, "exp_alerts").([]any)
			if len(exp) == 0 {
				silent[name] = true
			} else {
				fires[name] = true
			}
			for _, e := range exp {
				ea := e.(map[string]any)
				labels := map[string]string{}
				for k, v := range dig(ea, "exp_labels").(map[string]any) {
					labels[k] = fmt.Sprint(v)
				}
				runbook, err := expandAlertTemplate(rule["annotations"].(map[string]any)["runbook"].(string), labels)
				if err != nil {
					t.Fatalf("%s runbook with the labels %v of %s: %v", name, labels, path, err)
				}
				annotations, _ := ea["exp_annotations"].(map[string]any)
				if annotations == nil {
					annotations = map[string]any{}
					ea["exp_annotations"] = annotations
				}
				annotations["runbook"] = runbook
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] || !silent[a] {
			t.Errorf("%s: %s needs an evaluation where it fires (%v) and one where it must not (%v)", path, a, fires[a], silent[a])
		}
	}
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// expandAlertTemplate expands an annotation template as Prometheus does for
// an alert ($labels, $value, $externalLabels, $externalURL defined first),
// but fails on a label the alert does not have.
func expandAlertTemplate(text string, labels map[string]string) (string, error) {
	const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"
	tmpl, err := texttemplate.New("annotation").Option("missingkey=error").Parse(defs + text)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	err = tmpl.Execute(&sb, struct {
		Labels, ExternalLabels map[string]string
		ExternalURL            string
		Value                  float64
	}{Labels: labels, ExternalLabels: map[string]string{}})
	return sb.String(), err
}

// TestRenderAlerts checks the PrometheusRule object and that it is only
// rendered when alerts.enabled.
func TestRenderAlerts(t *testing.T) {
	t.Run("off by default", func(t *testing.T) {
		if got := find(render(t), "PrometheusRule"); len(got) != 0 {
			t.Errorf("PrometheusRules %v by default", names(got))
		}
	})
	t.Run("custom", func(t *testing.T) {
		pr := one(t, render(t, "-f", "hack/charttest/testdata/alerts/custom-values.yaml"), "PrometheusRule")
		if pr.GetNamespace() != "monitoring" || pr.GetName() != fullname+"-faucets" {
			t.Errorf("PrometheusRule %s/%s, want monitoring/%s-faucets", pr.GetNamespace(), pr.GetName(), fullname)
		}
		if pr.GetLabels()["release"] != "kube-prometheus-stack" || pr.GetLabels()["app.kubernetes.io/instance"] != releaseName {
			t.Errorf("PrometheusRule labels %v", pr.GetLabels())
		}
		if pr.GetAnnotations()["example.com/owner"] != "platform" {
			t.Errorf("PrometheusRule annotations %v", pr.GetAnnotations())
		}
		rules := alertRules(t, pr)
		for name, rule := range rules {
			expr := rule["expr"].(string)
			if strings.Contains(expr, "faucetserver") || !strings.Contains(expr, "fsrv") && name != "FaucetNodeUnreachable" {
				t.Errorf("%s does not use the FaucetServer label fsrv:\n%s", name, expr)
			}
			if rb := dig(rule, "annotations", "runbook").(string); strings.Contains(rb, "$labels.faucetserver") {
				t.Errorf("%s runbook still names $labels.faucetserver", name)
			}
		}
		if expr := rules["FaucetPodNotReady"]["expr"].(string); !strings.Contains(expr, `up{job="faucets"}`) || strings.Contains(expr, "kube_pod_status_ready") {
			t.Errorf("FaucetPodNotReady with job faucets and no kube-state-metrics:\n%s", expr)
		}
		if expr := rules["FaucetLow"]["expr"].(string); strings.Contains(expr, "faucet_low_drips_threshold") || !strings.Contains(expr, "< 500") {
			t.Errorf("FaucetLow with lowDrips 500:\n%s", expr)
		}
		if expr := rules["FaucetRunwayShort"]["expr"].(string); !strings.Contains(expr, "< 43200") {
			t.Errorf("FaucetRunwayShort with threshold 12h:\n%s", expr)
		}
		if expr := rules["FaucetChainStalled"]["expr"].(string); !strings.Contains(expr, "> 600") || strings.Contains(expr, "faucet_stacks_stall_after_seconds") {
			t.Errorf("FaucetChainStalled with threshold 10m:\n%s", expr)
		}
		if got := rules["FaucetDripFailureRatioHigh"]["for"]; got != "1m" {
			t.Errorf("FaucetDripFailureRatioHigh for %v, want 1m", got)
		}
	})
	t.Run("no client error reasons", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "values.yaml")
		writeFile(t, file, []byte("alerts:\n  enabled: true\n  rules:\n    dripFailureRatioHigh:\n      clientErrorReasons: []\n"))
		expr := alertRules(t, one(t, render(t, "-f", file), "PrometheusRule"))["FaucetDripFailureRatioHigh"]["expr"].(string)
		// reason!~"" would drop the successes (reason="") from the tried drips.
		if strings.Contains(expr, "reason") || !strings.Contains(expr, `faucet_drips_total{outcome="error"}`) || !strings.Contains(expr, "faucet_drips_total{}") {
			t.Errorf("FaucetDripFailureRatioHigh without client errors:\n%s", expr)
		}
		checkRules(t, "rules.yaml", []any{map[string]any{"name": "faucet", "rules": []any{map[string]any{"alert": "X", "expr": expr}}}})
	})
	t.Run("the default client error reasons are reasons of faucet_drips_total", func(t *testing.T) {
		_, reasons := exportedMetrics(t)
		values := readYAML(t, "charts/faucet-operator/values.yaml")
		for _, r := range dig(values, "alerts", "rules", "dripFailureRatioHigh", "clientErrorReasons").([]any) {
			if !slices.Contains(reasons, r.(string)) {
				t.Errorf("clientErrorReasons has %q; faucet_drips_total's reasons are %v", r, reasons)
			}
		}
	})
}

// alertRules are a PrometheusRule's rules by alert name.
func alertRules(t *testing.T, pr *unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	rules := map[string]map[string]any{}
	for _, g := range nested(t, pr, "spec", "groups").([]any) {
		for _, r := range dig(g, "rules").([]any) {
			rule := r.(map[string]any)
			rules[rule["alert"].(string)] = rule
		}
	}
	return rules
}
