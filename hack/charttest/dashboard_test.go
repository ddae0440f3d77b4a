package charttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestDashboard checks the Grafana dashboard ConfigMap: only rendered when
// dashboard.enabled, labelled for the sidecar, and holding a dashboard that
// parses, has unique panel ids, filters every query by the namespace and
// FaucetServer variables, and reads only metrics the faucet exports in
// PromQL that promtool accepts.
func TestDashboard(t *testing.T) {
	t.Run("the file is JSON", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(chartDir, "files", "dashboards", "faucet.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatal("files/dashboards/faucet.json is not valid JSON")
		}
	})

	t.Run("off by default", func(t *testing.T) {
		if got := find(render(t), "ConfigMap"); len(got) != 0 {
			t.Errorf("ConfigMaps %v by default", names(got))
		}
	})

	for _, tc := range []struct {
		name        string
		values      []string
		serverLabel string
		label       [2]string // the sidecar's label
		namespace   string
	}{
		{
			name:        "default",
			values:      []string{"--set", "dashboard.enabled=true"},
			serverLabel: "faucetserver",
			label:       [2]string{"grafana_dashboard", "1"},
			namespace:   releaseNamespace,
		},
		{
			name: "custom",
			values: []string{"--set", "dashboard.enabled=true", "--set", "faucetMetrics.serverLabel=fsrv",
				"--set", "dashboard.label=example.com/dashboard", "--set", "dashboard.labelValue=faucet",
				"--set", "dashboard.namespace=monitoring", "--set", "dashboard.annotations.grafana_folder=Faucets"},
			serverLabel: "fsrv",
			label:       [2]string{"example.com/dashboard", "faucet"},
			namespace:   "monitoring",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := one(t, render(t, tc.values...), "ConfigMap")
			if cm.GetNamespace() != tc.namespace || cm.GetName() != fullname+"-faucets-dashboard" {
				t.Errorf("ConfigMap %s/%s, want %s/%s-faucets-dashboard", cm.GetNamespace(), cm.GetName(), tc.namespace, fullname)
			}
			if got := cm.GetLabels()[tc.label[0]]; got != tc.label[1] {
				t.Errorf("ConfigMap labels %v lack %s=%s", cm.GetLabels(), tc.label[0], tc.label[1])
			}
			assertReleaseLabels(t, []*unstructured.Unstructured{cm})
			data, _ := nested(t, cm, "data", "faucet.json").(string)
			checkDashboard(t, data, tc.serverLabel)
		})
	}
}

// dashboardPanel is what the checks read of a Grafana panel.
type dashboardPanel struct {
	ID         int               `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource *dashboardDS      `json:"datasource"`
	GridPos    map[string]int    `json:"gridPos"`
	Panels     []dashboardPanel  `json:"panels"` // a collapsed row's
	Targets    []dashboardTarget `json:"targets"`
}

type dashboardDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboardTarget struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

func checkDashboard(t *testing.T, data, serverLabel string) {
	t.Helper()
	var dash struct {
		UID        string           `json:"uid"`
		Title      string           `json:"title"`
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string       `json:"name"`
				Type       string       `json:"type"`
				Datasource *dashboardDS `json:"datasource"`
				Definition string       `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(data), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("dashboard uid %q, title %q", dash.UID, dash.Title)
	}
	if serverLabel != "faucetserver" && strings.Contains(data, "faucetserver") {
		t.Errorf("the dashboard still names faucetserver with faucetMetrics.serverLabel=%s", serverLabel)
	}

	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" {
			if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				t.Errorf("variable %s does not query the datasource variable: %v", v.Name, v.Datasource)
			}
			// label_values(<selector>, <label>): the selector is PromQL.
			m := regexp.MustCompile(`^label_values\((.*), *([a-zA-Z_][a-zA-Z0-9_]*)\)$`).FindStringSubmatch(v.Definition)
			if m == nil {
				t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
				continue
			}
			assertExportedMetrics(t, "variable "+v.Name, m[1], false)
		}
	}
	for _, v := range []string{"datasource", "namespace", serverLabel} {
		if !vars[v] {
			t.Errorf("the dashboard has no %s variable", v)
		}
	}

	ids := map[int]string{}
	var rules []any
	var walk func(ps []dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if p.ID <= 0 {
				t.Errorf("panel %q has id %d", p.Title, p.ID)
			} else if other, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if x, w := p.GridPos["x"], p.GridPos["w"]; w <= 0 || x < 0 || x+w > 24 {
				t.Errorf("panel %q gridPos %v is outside the 24 columns", p.Title, p.GridPos)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Title == "" {
				t.Errorf("panel %d has no title", p.ID)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q does not use the datasource variable: %v", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				what := fmt.Sprintf("panel %d %q query %s", p.ID, p.Title, tg.RefID)
				assertExportedMetrics(t, what, tg.Expr, false)
				for _, v := range []string{`namespace=~"$namespace"`, serverLabel + `=~"$` + serverLabel + `"`} {
					if !strings.Contains(tg.Expr, v) {
						t.Errorf("%s does not filter by %s: %s", what, v, tg.Expr)
					}
				}
				rules = append(rules, map[string]any{
					"record": fmt.Sprintf("dashboard:panel_%d_%s", p.ID, tg.RefID),
					"expr":   grafanaToPromQL(tg.Expr),
				})
			}
		}
	}
	walk(dash.Panels)
	if len(rules) == 0 {
		t.Fatal("the dashboard has no queries")
	}

	// promtool checks the syntax of every query, Grafana's variables
	// replaced by values.
	t.Logf("promtool checks the dashboard's %d queries", len(rules))
	checkRules(t, "dashboard-rules.yaml", []any{map[string]any{"name": "dashboard", "rules": rules}})
}

// grafanaToPromQL replaces Grafana's variables in a query by values PromQL
// accepts: intervals by durations, the others (inside label matchers) by a
// regular expression.
func grafanaToPromQL(expr string) string {
	for _, iv := range []string{"$__rate_interval", "$__interval", "$__range"} {
		expr = strings.ReplaceAll(expr, iv, "5m")
	}
	return regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`).ReplaceAllString(expr, ".*")
}
