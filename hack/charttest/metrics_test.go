package charttest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/stxfaucet/faucet-operator/server"
)

// externalMetrics are the series the alerts may read that the faucet does
// not export, and where they come from.
var externalMetrics = map[string]string{
	"up":                    "Prometheus, for every scrape target",
	"kube_pod_status_ready": "kube-state-metrics",
}

// pendingMetrics are series the chart reads that the faucet is to export
// but does not yet, and why. The checks accept them as exported;
// TestPendingMetrics fails once the faucet does export one, so that it
// leaves this list and is checked like the rest. None is pending now: the
// BTC faucet's series (issue 20), the last to be, are exported.
var pendingMetrics = map[string]string{}

// recordingRegisterer is a registry that also keeps the descriptors of
// every collector registered with it: the per-key and faucet-wide gauges
// only produce samples once a faucet is attached, but they are described
// up front, so their names are known without running a faucet.
type recordingRegisterer struct {
	*prometheus.Registry
	descs []*prometheus.Desc
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for d := range ch {
		r.descs = append(r.descs, d)
	}
	return r.Registry.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var (
	exportedOnce  sync.Once
	exported      map[string]bool
	dripReasons   []string
	exportedError error
)

// exportedMetrics are the names of the series the faucet's /metrics serves,
// from the real code: server.NewMetrics registers every collector with a
// registry, which describes them all (so the per-key gauges count without a
// faucet attached) and gathers those that already have samples, with their
// types. A histogram's series are <name>_bucket, _sum and _count; for a
// histogram without observations yet (gathering shows nothing) the type
// comes from the HistogramOpts in server/*.go. It also returns the reason
// label values faucet_drips_total is initialised with.
func exportedMetrics(t *testing.T) (map[string]bool, []string) {
	t.Helper()
	exportedOnce.Do(func() { exported, dripReasons, exportedError = gatherExported() })
	if exportedError != nil {
		t.Fatal(exportedError)
	}
	return exported, dripReasons
}

var descName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

func gatherExported() (map[string]bool, []string, error) {
	reg := &recordingRegisterer{Registry: prometheus.NewRegistry()}
	server.NewMetrics(reg)

	// The type's name, so this module needs no direct dependency on
	// client_model.
	types := map[string]string{}
	var reasons []string
	mfs, err := reg.Gather()
	if err != nil {
		return nil, nil, fmt.Errorf("gathering the faucet's metrics: %w", err)
	}
	for _, mf := range mfs {
		types[mf.GetName()] = mf.GetType().String()
		if mf.GetName() == "faucet_drips_total" {
			for _, metric := range mf.GetMetric() {
				for _, lp := range metric.GetLabel() {
					if lp.GetName() == "reason" && lp.GetValue() != "" {
						reasons = append(reasons, lp.GetValue())
					}
				}
			}
		}
	}
	histograms, summaries, err := sourceHistograms(filepath.Join(repoRoot, "server"))
	if err != nil {
		return nil, nil, err
	}

	names := map[string]bool{}
	described := map[string]bool{}
	for _, d := range reg.descs {
		sm := descName.FindStringSubmatch(d.String())
		if sm == nil {
			return nil, nil, fmt.Errorf("cannot read a metric name from %s", d)
		}
		described[sm[1]] = true
	}
	for name := range types {
		described[name] = true
	}
	for name := range described {
		typ, gathered := types[name]
		switch {
		case gathered && typ == "HISTOGRAM", !gathered && histograms[name]:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case gathered && typ == "SUMMARY", !gathered && summaries[name]:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	for name := range histograms {
		if !described[name] {
			return nil, nil, fmt.Errorf("server/ declares histogram %s, which NewMetrics does not register", name)
		}
	}
	slices.Sort(reasons)
	return names, reasons, nil
}

// sourceHistograms finds the names of the histograms and summaries declared
// in a package's non-test files: prometheus.HistogramOpts{Name: "..."}.
func sourceHistograms(dir string) (histograms, summaries map[string]bool, err error) {
	histograms, summaries = map[string]bool{}, map[string]bool{}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			return nil, nil, err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			var into map[string]bool
			switch sel.Sel.Name {
			case "HistogramOpts":
				into = histograms
			case "SummaryOpts":
				into = summaries
			default:
				return true
			}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Name" {
					if bl, ok := kv.Value.(*ast.BasicLit); ok && bl.Kind == token.STRING {
						if name, err := strconv.Unquote(bl.Value); err == nil {
							into[name] = true
						}
					}
				}
			}
			return true
		})
	}
	return histograms, summaries, nil
}

// TestExportedMetrics checks that the list the alert and dashboard checks
// compare against is complete: the metrics the faucet documents, whether or
// not they have samples without a faucet attached.
func TestExportedMetrics(t *testing.T) {
	names, reasons := exportedMetrics(t)
	for _, want := range []string{
		"faucet_drips_total", "faucet_check_rejections_total", "faucet_pow_difficulty", "faucet_api_tokens",
		"faucet_dispensed_ustx_total",
		"faucet_node_rpc_duration_seconds_bucket", "faucet_node_rpc_duration_seconds_count",
		"faucet_http_request_duration_seconds_bucket", "faucet_http_request_duration_seconds_sum",
		"faucet_key_balance_ustx", "faucet_key_available_ustx", "faucet_key_nonce", "faucet_key_in_flight",
		"faucet_key_synced", "faucet_key_dry", "faucet_key_owned",
		"faucet_drips_left", "faucet_funds_available_ustx", "faucet_low_drips_threshold", "faucet_node_up",
		// The Stacks tip's age and the stall threshold FaucetChainStalled compares.
		"faucet_stacks_tip_age_seconds", "faucet_stacks_stall_after_seconds",
		"go_goroutines", "process_cpu_seconds_total",
		// Per asset (label asset: stx and each name of spec.assets, e.g.
		// sbtc, tusd, btc), which the alerts and the dashboard read.
		"faucet_asset_enabled", "faucet_key_token_balance", "faucet_key_token_available",
		"faucet_token_funds_available", "faucet_dispensed_token_total", "faucet_treasury_token_balance",
		// The BTC faucet's own, which the dashboard's Bitcoin row and
		// FaucetEmpty's BTC node guard read.
		"faucet_btc_balance_sats", "faucet_btc_immature_sats", "faucet_btc_payouts_in_flight",
		"faucet_btc_node_up", "faucet_btc_ready", "faucet_dispensed_btc_sats_total",
		// Per Stacks node (label node, server/nodes.go), which
		// FaucetStacksNodeOut and the dashboard read: only collected
		// once a node pool is attached, so found by their descriptors.
		"faucet_stacks_node_in_rotation", "faucet_stacks_node_tip_height", "faucet_stacks_node_lag_blocks",
		"faucet_stacks_node_latency_seconds", "faucet_stacks_node_broadcasts_total", "faucet_stacks_node_resent_total",
		// The same per Bitcoin node of the BTC faucet, which
		// FaucetBitcoinNodeOut reads; collected once a BTC pool is.
		"faucet_bitcoin_node_in_rotation", "faucet_bitcoin_node_tip_height", "faucet_bitcoin_node_lag_blocks",
		"faucet_bitcoin_node_latency_seconds", "faucet_bitcoin_node_broadcasts_total", "faucet_bitcoin_node_resent_total",
	} {
		if !names[want] {
			t.Errorf("the faucet's metrics lack %s", want)
		}
	}
	for _, bad := range []string{"faucet_node_rpc_duration_seconds", "faucet_drips_left_bucket"} {
		if names[bad] {
			t.Errorf("%s is not a series the faucet serves", bad)
		}
	}
	for _, r := range []string{"rate_limited", "invalid_request", "check_rejected", "disabled", "exhausted"} {
		if !slices.Contains(reasons, r) {
			t.Errorf("faucet_drips_total reasons %v lack %s", reasons, r)
		}
	}
}

// TestPendingMetrics: a metric the faucet exports is no longer pending.
func TestPendingMetrics(t *testing.T) {
	names, _ := exportedMetrics(t)
	for n, why := range pendingMetrics {
		if names[n] {
			t.Errorf("the faucet exports %s now: remove it from pendingMetrics (%s)", n, why)
		}
		if !strings.HasPrefix(n, "faucet_") {
			t.Errorf("pending metric %s is not the faucet's", n)
		}
	}
}

// promqlMetricNames returns the metric names a PromQL expression reads. It
// is a small lexer, not a parser (the PromQL parser is not a dependency of
// this module; promtool checks the syntax): it skips strings, comments,
// label matchers {...}, ranges [...], the label lists of by, without, on,
// ignoring, group_left and group_right, numbers and Grafana variables; a
// remaining identifier followed by "(" is a function, an aggregation
// followed by by or without is one too, and everything else that is not a
// keyword is a metric name.
func promqlMetricNames(expr string) ([]string, error) {
	keywords := map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
		"inf": true, "nan": true, "by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true,
	}
	labelLists := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	aggregations := map[string]bool{
		"sum": true, "avg": true, "count": true, "min": true, "max": true, "group": true, "stddev": true,
		"stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true,
		"limitk": true, "limit_ratio": true,
	}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

	var names []string
	s := expr
	i := 0
	skipSpace := func(j int) int {
		for j < len(s) && strings.ContainsRune(" \t\r\n", rune(s[j])) {
			j++
		}
		return j
	}
	// skipString returns the index after the string literal starting at j.
	skipString := func(j int) (int, error) {
		q := s[j]
		for k := j + 1; k < len(s); k++ {
			switch {
			case s[k] == '\\' && q != '`':
				k++
			case s[k] == q:
				return k + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d in %q", j, expr)
	}
	// skipGroup returns the index after the bracket matching the one at j.
	skipGroup := func(j int) (int, error) {
		open := s[j]
		closeBy := map[byte]byte{'{': '}', '[': ']', '(': ')'}[open]
		depth := 0
		for k := j; k < len(s); k++ {
			switch c := s[k]; {
			case c == '"' || c == '\'' || c == '`':
				end, err := skipString(k)
				if err != nil {
					return 0, err
				}
				k = end - 1
			case c == open:
				depth++
			case c == closeBy:
				depth--
				if depth == 0 {
					return k + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unbalanced %c at %d in %q", open, j, expr)
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipGroup(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$': // a Grafana variable: $name, ${name}, $__rate_interval
			i++
			if i < len(s) && s[i] == '{' {
				end, err := skipGroup(i)
				if err != nil {
					return nil, err
				}
				i = end
			}
			for i < len(s) && isIdent(s[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := s[i:j]
			next := skipSpace(j)
			i = j
			switch {
			case labelLists[word]:
				if next < len(s) && s[next] == '(' {
					end, err := skipGroup(next)
					if err != nil {
						return nil, err
					}
					i = end
				}
			case keywords[strings.ToLower(word)]: // PromQL's keywords and Inf, NaN are case-insensitive
			case next < len(s) && s[next] == '(':
				// a function or an aggregation call
			case aggregations[word]:
				// "sum by (x) (...)": an aggregation, its label list first
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	return names, nil
}

func TestPromqlMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{{
		expr: `sum by (namespace, faucetserver) (faucet_drips_left) < max by (namespace, faucetserver) (faucet_low_drips_threshold)`,
		want: []string{"faucet_drips_left", "faucet_low_drips_threshold"},
	}, {
		expr: `min_over_time(faucet_key_in_flight[15m]) > 0 and ignoring (kind) changes(faucet_key_nonce{kind="confirmed"}[15m]) == 0`,
		want: []string{"faucet_key_in_flight", "faucet_key_nonce"},
	}, {
		expr: `(max by (namespace, pod) (kube_pod_status_ready{condition="true"}) == 0) * on (namespace, pod) group_left (faucetserver) max by (namespace, pod, faucetserver) (up{job="faucet-server"})`,
		want: []string{"kube_pod_status_ready", "up"},
	}, {
		expr: `histogram_quantile(0.99, sum by (le, call) (rate(faucet_node_rpc_duration_seconds_bucket{namespace=~"$namespace"}[$__rate_interval])))`,
		want: []string{"faucet_node_rpc_duration_seconds_bucket"},
	}, {
		expr: `sum(rate(x_total[5m])) by (le) / 1e6 + sum without (a) (y offset 5m) # a comment z`,
		want: []string{"x_total", "y"},
	}, {
		expr: `label_replace(up, "a", "$1", "b", "(.*)") or vector(1) unless on() absent(foo:bar)`,
		want: []string{"up", "foo:bar"},
	}, {
		expr: `min by (asset) (faucet_runway_seconds) < +Inf AND x != NaN`,
		want: []string{"faucet_runway_seconds", "x"},
	}} {
		got, err := promqlMetricNames(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("metric names of %s: %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// assertExportedMetrics checks that an expression reads only metrics the
// faucet exports, or the externalMetrics when allowExternal.
func assertExportedMetrics(t *testing.T, what, expr string, allowExternal bool) {
	t.Helper()
	names, err := promqlMetricNames(expr)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if len(names) == 0 {
		t.Errorf("%s reads no metric: %s", what, expr)
	}
	exported, _ := exportedMetrics(t)
	for _, n := range names {
		if exported[n] {
			continue
		}
		if _, ok := pendingMetrics[n]; ok {
			continue
		}
		if _, ok := externalMetrics[n]; ok && allowExternal {
			continue
		}
		t.Errorf("%s reads %s, which the faucet does not export (server.NewMetrics):\n%s", what, n, expr)
	}
}

// promtool runs promtool in dir; it returns the combined output, and an
// error when promtool fails.
func promtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(promtoolBin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("promtool %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// checkRules writes groups to file in a fresh directory, runs `promtool
// check rules` on it and returns the directory, for rule tests beside it.
func checkRules(t *testing.T, file string, groups []any) string {
	t.Helper()
	dir := t.TempDir()
	data, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, file), data)
	out, err := promtool(t, dir, "check", "rules", file)
	t.Logf("promtool check rules %s:\n%s", file, out)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeFile writes a file for promtool, failing the test on an error.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
