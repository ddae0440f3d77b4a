package charttest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

const (
	modulePath = "github.com/stxfaucet/faucet-operator"

	// releaseName and releaseNamespace are the release every test renders.
	releaseName      = "faucet"
	releaseNamespace = "faucet-system"
)

// Set once by TestMain.
var (
	repoRoot    string // the root module's directory
	chartDir    string // charts/faucet-operator
	helmBin     string // bin/helm or $HELM
	promtoolBin string // bin/promtool or $PROMTOOL
	helmHome    string // HELM_{CACHE,CONFIG,DATA}_HOME: never the user's
	assetsDir   string // the envtest binaries
	kubeVersion string // of the envtest kube-apiserver, e.g. v1.37.0
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "charttest:", err)
		return 1
	}
	defer os.RemoveAll(helmHome)
	return m.Run()
}

// setup finds the repository, helm and the envtest binaries. Missing tools
// are an error, not a skip: a test that silently skips never runs.
func setup() error {
	var err error
	if repoRoot, err = findRepoRoot(); err != nil {
		return err
	}
	chartDir = filepath.Join(repoRoot, "charts", "faucet-operator")

	helmBin = os.Getenv("HELM")
	if helmBin == "" {
		helmBin = filepath.Join(repoRoot, "bin", "helm")
	}
	if fi, err := os.Stat(helmBin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("helm not found at %s: run hack/tools/helm/build.sh (or set HELM to a helm v3 binary)", helmBin)
	}

	promtoolBin = os.Getenv("PROMTOOL")
	if promtoolBin == "" {
		promtoolBin = filepath.Join(repoRoot, "bin", "promtool")
	}
	if fi, err := os.Stat(promtoolBin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("promtool not found at %s: run hack/tools/promtool/build.sh (or set PROMTOOL to a promtool v3 binary)", promtoolBin)
	}

	if assetsDir, err = envtestAssets(); err != nil {
		return err
	}
	out, err := exec.Command(filepath.Join(assetsDir, "kube-apiserver"), "--version").Output()
	if err != nil {
		return fmt.Errorf("kube-apiserver --version: %w", err)
	}
	// "Kubernetes v1.37.0"
	kubeVersion = regexp.MustCompile(`v\d+\.\d+\.\d+`).FindString(string(out))
	if kubeVersion == "" {
		return fmt.Errorf("cannot read a version from kube-apiserver --version: %q", out)
	}

	helmHome, err = os.MkdirTemp("", "charttest-helm-")
	return err
}

// findRepoRoot walks up from the package directory to the root module.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			regexp.MustCompile(`(?m)^module `+regexp.QuoteMeta(modulePath)+`\s*$`).Match(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// envtestAssets is $KUBEBUILDER_ASSETS, else the newest bin/k8s/<version>
// holding a kube-apiserver, as hack/envtest/build.sh writes it.
func envtestAssets() (string, error) {
	const hint = "set KUBEBUILDER_ASSETS, or build the binaries with hack/envtest/build.sh"
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS=%s has no kube-apiserver: %s", dir, hint)
		}
		return filepath.Abs(dir)
	}
	base := filepath.Join(repoRoot, "bin", "k8s")
	entries, _ := os.ReadDir(base)
	var versions []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(base, e.Name(), "kube-apiserver")); e.IsDir() && err == nil {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) == 0 {
		return "", fmt.Errorf("envtest binaries not found in %s: %s", base, hint)
	}
	slices.SortFunc(versions, compareVersions)
	return filepath.Join(base, versions[len(versions)-1]), nil
}

// compareVersions orders "1.9.0" before "1.37.0".
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		ai, aerr := strconv.Atoi(as[i])
		bi, berr := strconv.Atoi(bs[i])
		if aerr != nil || berr != nil {
			if c := strings.Compare(as[i], bs[i]); c != 0 {
				return c
			}
			continue
		}
		if c := cmp.Compare(ai, bi); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

// helm runs the helm CLI with a private home. It returns stdout, and an
// error carrying stderr when helm fails.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin, args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"),
		"KUBECONFIG="+filepath.Join(helmHome, "no-kubeconfig"), // only --kubeconfig reaches a cluster
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("helm %s (%s)", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// valueSet is a set of helm values flags the chart must work with.
type valueSet struct {
	name string
	args []string // -f/--set flags
}

// valueSets: the defaults, everything on (values-full.yaml), everything off
// (values-minimal.yaml), and the in-cluster devnet (values-devnet.yaml).
var valueSets = []valueSet{
	{name: "default"},
	{name: "full", args: []string{"-f", "hack/charttest/testdata/values-full.yaml"}},
	{name: "minimal", args: []string{"-f", "hack/charttest/testdata/values-minimal.yaml"}},
	{name: "devnet", args: []string{"-f", "hack/charttest/testdata/values-devnet.yaml"}},
}

// lint runs helm lint --strict on the chart.
func lint(t *testing.T, valueArgs ...string) (string, error) {
	t.Helper()
	args := append([]string{"lint", "--strict", chartDir, "--namespace", releaseNamespace, "--kube-version", kubeVersion}, valueArgs...)
	return helm(t, args...)
}

// template renders the chart as helm install would for releaseName in
// releaseNamespace on the envtest Kubernetes version.
func template(t *testing.T, valueArgs ...string) ([]byte, error) {
	t.Helper()
	args := append([]string{"template", releaseName, chartDir, "--namespace", releaseNamespace, "--kube-version", kubeVersion}, valueArgs...)
	out, err := helm(t, args...)
	return []byte(out), err
}

// render renders the chart and parses every object, failing the test on an
// error.
func render(t *testing.T, valueArgs ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := template(t, valueArgs...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseObjects(out)
	if err != nil {
		t.Fatalf("parsing helm template output: %v", err)
	}
	return objs
}

// parseObjects splits a multi-document YAML stream into objects. Duplicate
// keys are an error (UnmarshalStrict), so a template that emits a key twice
// fails here instead of one value silently winning.
func parseObjects(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.UnmarshalStrict(doc, &m); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, doc)
		}
		if len(m) == 0 {
			continue // comments only, or an empty document
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("object without apiVersion, kind or name:\n%s", doc)
		}
		objs = append(objs, u)
	}
}

// readYAML parses one YAML document of the repository into a map.
func readYAML(t *testing.T, rel string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return m
}

// cluster is an envtest API server (kube-apiserver and etcd, no controllers).
type cluster struct {
	env        *envtest.Environment
	client     client.Client
	kubeconfig string // admin kubeconfig file, for helm

	mu       sync.Mutex
	warnings []string // API warnings, e.g. PodSecurity or deprecations
}

// HandleWarningHeader implements rest.WarningHandler.
func (c *cluster) HandleWarningHeader(code int, agent, text string) {
	if code != 299 || text == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warnings = append(c.warnings, text)
}

// takeWarnings returns the warnings since the last call.
func (c *cluster) takeWarnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.warnings
	c.warnings = nil
	return w
}

// startCluster starts an envtest API server for one test, with the test-only
// CRDs of testdata/crds (the Prometheus Operator's ServiceMonitor, PodMonitor
// and PrometheusRule) installed.
// The chart's own CRD is not: the chart installs it.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{env: &envtest.Environment{
		BinaryAssetsDirectory: assetsDir,
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "hack", "charttest", "testdata", "crds")},
		ErrorIfCRDPathMissing: true,
	}}
	start := time.Now()
	cfg, err := c.env.Start()
	if err != nil {
		t.Fatalf("starting envtest from %s: %v", assetsDir, err)
	}
	t.Cleanup(func() {
		if err := c.env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	t.Logf("envtest %s started in %s", kubeVersion, time.Since(start).Round(time.Millisecond))

	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = c
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if c.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}

	admin, err := c.env.AddUser(envtest.User{Name: "charttest-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	c.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(c.kubeconfig, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond every 100ms until it returns true or an error, or 30s pass.
func waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
