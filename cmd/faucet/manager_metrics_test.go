package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"
)

// TestMetricsCertDirMustHoldTheCertificate: a --metrics-cert-dir without
// tls.crt and tls.key is an error at start, not a silent self-signed
// certificate.
func TestMetricsCertDirMustHoldTheCertificate(t *testing.T) {
	dir := t.TempDir()
	o := managerOptions{metricsSecure: true, metricsCertDir: dir}
	if err := o.checkMetricsCerts(); err == nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Fatalf("empty directory: %v, want an error naming tls.crt", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := o.checkMetricsCerts(); err == nil || !strings.Contains(err.Error(), "tls.key") {
		t.Fatalf("no key: %v, want an error naming tls.key", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := o.checkMetricsCerts(); err != nil {
		t.Fatal(err)
	}
	if err := (managerOptions{metricsSecure: true}).checkMetricsCerts(); err != nil {
		t.Fatalf("no directory (self-signed): %v", err)
	}
}

// TestManagerMetricsNeedAuthorization serves the manager's metrics with the
// options of its default flags against an envtest API server, the manager
// authenticated as a ServiceAccount bound to config/rbac's
// metrics-auth-role only: a scrape without a token is refused with 401, one
// whose ServiceAccount lacks config/rbac's metrics-reader with 403, and one
// whose ServiceAccount has it gets the metrics. envtest's kube-apiserver
// issues and reviews ServiceAccount tokens like any other.
func TestManagerMetricsNeedAuthorization(t *testing.T) {
	assets := managerEnvtestAssets(t)
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	admin, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest from %s: %v", assets, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	cs := kubernetes.NewForConfigOrDie(admin)
	ctx := t.Context()

	const ns = "metrics-test"
	mustCreate(t, func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	// The ClusterRoles as config/rbac ships them; the bindings are this
	// test's, to its own ServiceAccounts.
	for _, file := range []string{"metrics_auth_role.yaml", "metrics_reader_role.yaml"} {
		role := readClusterRole(t, file)
		mustCreate(t, func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		})
	}
	token := func(sa string) string {
		t.Helper()
		mustCreate(t, func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			return err
		})
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	bind := func(sa, role string) {
		t.Helper()
		mustCreate(t, func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + role},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
			}, metav1.CreateOptions{})
			return err
		})
	}
	managerToken, scraperToken, strangerToken := token("manager"), token("scraper"), token("stranger")
	bind("manager", "metrics-auth-role")
	bind("scraper", "metrics-reader")

	clearManagerEnv(t)
	o, err := parseManagerOptions([]string{"--server-image=i", "--metrics-bind-address=127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	managerCfg := &rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}, BearerToken: managerToken}
	httpClient, err := rest.HTTPClientFor(managerCfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(o.ctrlOptions(nil).Metrics, managerCfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Start(srvCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("metrics server: %v", err)
		}
	})
	addr := bindAddr(t, srv)

	// The certificate is self-signed: a scraper that cannot verify it
	// (insecureSkipVerify, as the ServiceMonitor) still encrypts.
	scraper := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the manager's self-signed certificate
	}}
	scrape := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := scraper.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.TLS == nil || resp.ProtoMajor != 1 {
			t.Errorf("%s over TLS %v: want HTTPS with HTTP/1.1", resp.Proto, resp.TLS != nil)
		}
		return resp.StatusCode, string(body)
	}
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		// controller-runtime answers a TokenReview that reports an
		// error (as it does for a malformed token) with 500.
		{"a token the API server does not know", "not-a-token", http.StatusInternalServerError},
		{"a ServiceAccount without metrics-reader", strangerToken, http.StatusForbidden},
		{"a ServiceAccount with metrics-reader", scraperToken, http.StatusOK},
	} {
		code, body := scrape(tc.token)
		if code != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.name, code, firstLine(body), tc.want)
		}
		if got := strings.Contains(body, "# TYPE "); got != (code == http.StatusOK) {
			t.Errorf("%s: %d with metrics %v: %q", tc.name, code, got, firstLine(body))
		}
	}

	// Plain HTTP on the same port is not served.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP got the metrics")
		}
	}
}

// bindAddr waits for the metrics server's listener, which controller-runtime
// reports through an unexported type.
func bindAddr(t *testing.T, srv metricsserver.Server) string {
	t.Helper()
	b, ok := srv.(interface{ GetBindAddr() string })
	if !ok {
		t.Fatalf("%T has no GetBindAddr", srv)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if a := b.GetBindAddr(); a != "" {
			return a
		}
	}
	t.Fatal("the metrics server did not listen within 10s")
	return ""
}

func readClusterRole(t *testing.T, file string) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &role); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &role
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// managerEnvtestAssets is $KUBEBUILDER_ASSETS, else the newest
// bin/k8s/<version> holding a kube-apiserver (hack/envtest/build.sh). It
// fails without one: a test that silently skips never runs.
func managerEnvtestAssets(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	base := filepath.Join("..", "..", "bin", "k8s")
	entries, _ := os.ReadDir(base)
	var versions []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(base, e.Name(), "kube-apiserver")); e.IsDir() && err == nil {
			versions = append(versions, e.Name())
		}
	}
	if len(versions) == 0 {
		t.Fatalf("envtest binaries not found in %s: set KUBEBUILDER_ASSETS, or build them with hack/envtest/build.sh (make envtest)", base)
	}
	slices.SortFunc(versions, func(a, b string) int {
		return slices.Compare(versionParts(a), versionParts(b))
	})
	dir, err := filepath.Abs(filepath.Join(base, versions[len(versions)-1]))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// versionParts splits "1.37.0" into numbers, so 1.9 sorts before 1.37.
func versionParts(v string) []int {
	var out []int
	for p := range strings.SplitSeq(v, ".") {
		n, _ := strconv.Atoi(p)
		out = append(out, n)
	}
	return out
}
