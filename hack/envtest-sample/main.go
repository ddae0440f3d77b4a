// Command envtest-sample takes the path a user takes, against a real API
// server: it starts an envtest control plane (kube-apiserver and etcd from
// $KUBEBUILDER_ASSETS), installs the operator with `kubectl apply -k
// config/default`, runs `faucet manager` with the token of the operator's
// ServiceAccount (so config/rbac is what authorizes it), scrapes its HTTPS
// metrics with and without a token bound to config/rbac's metrics-reader,
// applies
// config/samples with `kubectl apply -f`, and waits for the Deployments, the
// Services, the embedded store's PersistentVolumeClaim and the FaucetServers'
// conditions and addresses, and checks the budgets and the sign-in Secrets
// of the embedded sample reach its pod as flags and files. The CloudNativePG sample (config/samples/
// cloudnativepg, whose Cluster kind envtest lacks) is only validated: its
// FaucetServer goes through a server-side dry run.
//
// envtest has no kubelet and no controller-manager, so no pod ever runs: the
// program plays the Deployment controller by writing the Deployment's status,
// to show Ready turning True and `kubectl wait` working.
//
// Usage: KUBEBUILDER_ASSETS=$(hack/envtest/build.sh) go run ./hack/envtest-sample --faucet bin/faucet
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

const (
	operatorNS = "faucet-operator-system"
	operatorSA = "faucet-operator-controller-manager"
	sampleNS   = "faucet-sample"
	sampleName = "faucet"    // config/samples/faucet_v1alpha1_faucetserver.yaml: embedded store
	pgName     = "faucet-pg" // config/samples/faucet_v1alpha1_faucetserver_postgres.yaml
	image      = "ghcr.io/stxfaucet/faucet-operator:sample"
)

func main() {
	faucetBin := flag.String("faucet", "bin/faucet", "the faucet binary to run as the manager")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up after this long")
	keep := flag.Bool("keep", false, "keep the control plane and manager running until interrupted, and print a kubeconfig")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The one clock of every wait.
	clk := clock.RealClock{}
	err := run(ctx, clk, *faucetBin, *timeout, *keep)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest-sample: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("envtest-sample: OK")
}

func run(ctx context.Context, clk clock.Clock, faucetBin string, timeout time.Duration, keep bool) error {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: run `make envtest-sample`, or export KUBEBUILDER_ASSETS=$(hack/envtest/build.sh)")
	}
	faucetBin, err := filepath.Abs(faucetBin)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "envtest-sample-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	step("starting kube-apiserver and etcd from " + assets)
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	defer func() {
		step("stopping the control plane")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop control plane:", err)
		}
	}()
	admin, err := env.AddUser(envtest.User{Name: "sample-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	adminKC, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	adminPath := filepath.Join(tmp, "admin.kubeconfig")
	if err := os.WriteFile(adminPath, adminKC, 0o600); err != nil {
		return err
	}
	k := kubectl{bin: filepath.Join(assets, "kubectl"), kubeconfig: adminPath}

	interrupted := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	step("installing the operator: CRD, RBAC, manager Deployment (it never runs here: no kubelet)")
	if _, err := k.run(ctx, "apply", "--server-side", "-k", "config/default"); err != nil {
		return err
	}
	if _, err := k.run(ctx, "wait", "--for=condition=Established", "crd/faucetservers.faucet.stxfaucet.dev", "--timeout=60s"); err != nil {
		return err
	}

	step("running `faucet manager` locally as ServiceAccount " + operatorNS + "/" + operatorSA)
	token, err := k.run(ctx, "create", "token", operatorSA, "-n", operatorNS, "--duration=1h")
	if err != nil {
		return err
	}
	mgrPath := filepath.Join(tmp, "manager.kubeconfig")
	if err := writeTokenKubeconfig(mgrPath, cfg.Host, cfg.CAData, strings.TrimSpace(token)); err != nil {
		return err
	}
	probeAddr, err := freeAddr()
	if err != nil {
		return err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return err
	}
	logPath := filepath.Join(tmp, "manager.log")
	stopManager, err := startManager(clk, faucetBin, logPath, "--kubeconfig="+mgrPath,
		"--leader-elect=true", "--leader-election-namespace="+operatorNS,
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+probeAddr,
		"--server-image="+image, "--log-format=text")
	if err != nil {
		return err
	}
	defer stopManager()
	fail := func(err error) error {
		printTail(logPath, 40)
		return err
	}
	if err := waitHTTP(ctx, clk, "http://"+probeAddr+"/readyz"); err != nil {
		return fail(fmt.Errorf("manager readyz: %w", err))
	}

	step("scraping the manager's metrics: HTTPS, refused without a token, served to a ServiceAccount bound to metrics-reader")
	if err := checkMetrics(ctx, clk, k, "https://"+metricsAddr+"/metrics"); err != nil {
		return fail(err)
	}

	step("applying config/samples, as a user would")
	if _, err := k.run(ctx, "create", "namespace", sampleNS); err != nil {
		return err
	}
	if _, err := k.run(ctx, "apply", "-n", sampleNS, "-f", "config/samples/"); err != nil {
		return err
	}

	step("waiting for the Deployments, the Services, the volume and the first status")
	// One object per wait: kubectl fails at once on names missing from a list.
	for _, obj := range []string{"deployment/" + sampleName, "service/" + sampleName, "serviceaccount/" + sampleName,
		"persistentvolumeclaim/" + sampleName + "-data", "deployment/" + pgName, "service/" + pgName} {
		if _, err := k.run(ctx, "wait", "-n", sampleNS, "--for=create", obj, "--timeout=60s"); err != nil {
			return fail(err)
		}
	}
	for _, name := range []string{sampleName, pgName} {
		if _, err := k.run(ctx, "wait", "-n", sampleNS, "fsrv/"+name, "--for=condition=Reconciling=True", "--timeout=60s"); err != nil {
			return fail(err)
		}
	}
	if _, err := k.run(ctx, "get", "-n", sampleNS, "fsrv,deployment,service,serviceaccount,persistentvolumeclaim", "-o", "wide"); err != nil {
		return err
	}

	step("checking the stores (a volume for the embedded one, the URI only in its Secret for Postgres) and the API tokens volume")
	if err := checkStores(ctx, k); err != nil {
		return fail(err)
	}

	step("checking the budgets and sign-in: flags, the OIDC client secret and session key as files, never their content")
	if err := checkSignIn(ctx, k); err != nil {
		return fail(err)
	}

	step("playing the Deployment controller: every pod available")
	for _, d := range []struct {
		name     string
		replicas int
	}{{sampleName, 1}, {pgName, 2}} {
		if err := markAvailable(ctx, clk, k, d.name, d.replicas); err != nil {
			return err
		}
		if _, err := k.run(ctx, "wait", "-n", sampleNS, "fsrv/"+d.name, "--for=condition=Ready", "--timeout=60s"); err != nil {
			return fail(err)
		}
	}

	step("validating the CloudNativePG sample's FaucetServer (envtest has no CloudNativePG)")
	if _, err := k.run(ctx, "apply", "--dry-run=server", "-n", sampleNS, "-f", "config/samples/cloudnativepg/faucetserver.yaml"); err != nil {
		return err
	}

	step("the FaucetServers as users see them")
	if _, err := k.run(ctx, "get", "-n", sampleNS, "fsrv", "-o", "wide"); err != nil {
		return err
	}
	statusJSON, err := k.run(ctx, "get", "-n", sampleNS, "fsrv/"+sampleName, "-o", "jsonpath={.status}")
	if err != nil {
		return err
	}
	if _, err := k.run(ctx, "get", "-n", sampleNS, "events.events.k8s.io", "--field-selector=regarding.kind=FaucetServer",
		"-o", "custom-columns=TYPE:.type,REASON:.reason,NOTE:.note"); err != nil {
		return err
	}

	step("checking status.faucetAddresses against the sample Secret")
	if err := checkAddresses(ctx, k, statusJSON); err != nil {
		return err
	}
	step("checking that config/rbac sufficed: no request of the manager was forbidden")
	if log, err := os.ReadFile(logPath); err != nil {
		return err
	} else if bytes.Contains(bytes.ToLower(log), []byte("forbidden")) {
		return fail(errors.New("the manager log reports forbidden requests: config/rbac lacks a permission"))
	}
	fmt.Println("no forbidden requests")
	if keep {
		fmt.Printf("\nkeeping everything up; try:\n  %s --kubeconfig %s get fsrv -A -o wide\nCtrl-C to stop.\n", k.bin, adminPath)
		<-interrupted.Done()
	}
	return nil
}

// checkMetrics scrapes the manager's /metrics as Prometheus would with the
// ServiceMonitor of config/prometheus: a ServiceAccount token, the
// self-signed certificate unverified. The manager reviews the token with
// the API server through config/rbac's metrics-auth-role; config/rbac's
// metrics-reader is what lets the scraper in.
func checkMetrics(ctx context.Context, clk clock.Clock, k kubectl, url string) error {
	const scraper = "metrics-scraper"
	if _, err := k.run(ctx, "create", "serviceaccount", scraper, "-n", operatorNS); err != nil {
		return err
	}
	token, err := k.run(ctx, "create", "token", scraper, "-n", operatorNS, "--duration=1h")
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the manager's self-signed certificate
	}}
	scrape := func(token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	token = strings.TrimSpace(token)
	// The manager starts its metrics server beside the probes, not before
	// them: wait until it listens.
	for {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", strings.TrimSuffix(strings.TrimPrefix(url, "https://"), "/metrics"))
		if err == nil {
			conn.Close()
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the manager's metrics never listened: %w", err)
		case <-clk.After(200 * time.Millisecond):
		}
	}
	for _, c := range []struct {
		who   string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{scraper + " without metrics-reader", token, http.StatusForbidden},
	} {
		code, _, err := scrape(c.token)
		if err != nil {
			return err
		}
		if code != c.want {
			return fmt.Errorf("GET %s with %s: %d, want %d", url, c.who, code, c.want)
		}
		fmt.Printf("GET /metrics with %s: %d\n", c.who, code)
	}
	if _, err := k.run(ctx, "create", "clusterrolebinding", scraper, "--clusterrole=faucet-operator-metrics-reader",
		"--serviceaccount="+operatorNS+":"+scraper); err != nil {
		return err
	}
	// The manager caches a denial for 30s (controller-runtime's filter):
	// poll until the binding is seen.
	for {
		code, body, err := scrape(token)
		if err != nil {
			return err
		}
		if code == http.StatusOK {
			if !strings.Contains(body, "controller_runtime_") {
				return fmt.Errorf("GET %s: 200 without controller-runtime's metrics", url)
			}
			fmt.Printf("GET /metrics with %s bound to metrics-reader: %d, %d bytes of metrics\n", scraper, code, len(body))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("GET %s with %s bound to metrics-reader: %d: %w", url, scraper, code, ctx.Err())
		case <-clk.After(time.Second):
		}
	}
}

// markAvailable writes the status the Deployment controller would once the
// Deployment's replicas are all updated and available.
func markAvailable(ctx context.Context, clk clock.PassiveClock, k kubectl, name string, replicas int) error {
	gen, err := k.run(ctx, "get", "-n", sampleNS, "deployment/"+name, "-o", "jsonpath={.metadata.generation}")
	if err != nil {
		return err
	}
	now := clk.Now().UTC().Format(time.RFC3339)
	status := fmt.Sprintf(`{"status":{"observedGeneration":%s,"replicas":%d,"updatedReplicas":%d,"readyReplicas":%d,"availableReplicas":%d,`+
		`"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","lastUpdateTime":%q,"lastTransitionTime":%q},`+
		`{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable","lastUpdateTime":%q,"lastTransitionTime":%q}]}}`,
		strings.TrimSpace(gen), replicas, replicas, replicas, replicas, now, now, now, now)
	_, err = k.run(ctx, "patch", "-n", sampleNS, "deployment/"+name, "--subresource=status", "--type=merge", "-p", status)
	return err
}

// checkStores checks what the two samples' stores made of the Deployments.
func checkStores(ctx context.Context, k kubectl) error {
	get := func(obj, jsonpath string) (string, error) {
		out, err := k.runQuiet(ctx, "get", "-n", sampleNS, obj, "-o", "jsonpath="+jsonpath)
		return strings.TrimSpace(out), err
	}
	checks := []struct{ obj, jsonpath, want string }{
		{"fsrv/" + sampleName, "{.status.store}", "embedded"},
		{"fsrv/" + pgName, "{.status.store}", "postgres"},
		{"persistentvolumeclaim/" + sampleName + "-data", "{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}", "FaucetServer/" + sampleName},
		{"persistentvolumeclaim/" + sampleName + "-data", "{.spec.accessModes[0]} {.spec.resources.requests.storage}", "ReadWriteOnce 1Gi"},
		{"deployment/" + sampleName, "{.spec.replicas} {.spec.strategy.type}", "1 Recreate"},
		{"deployment/" + sampleName, "{.spec.template.spec.volumes[?(@.name=='data')].persistentVolumeClaim.claimName}", sampleName + "-data"},
		{"deployment/" + pgName, "{.spec.replicas} {.spec.strategy.type} {.spec.strategy.rollingUpdate.maxUnavailable}", "2 RollingUpdate 0"},
		{"deployment/" + pgName, "{.spec.template.spec.containers[0].env[?(@.name=='FAUCET_STORE')].valueFrom.secretKeyRef}", `{"key":"uri","name":"faucet-pg-db"}`},
		// Two replicas: a drain takes one at a time.
		{"poddisruptionbudget/" + pgName, "{.spec.maxUnavailable} {.metadata.ownerReferences[0].kind}", "1 FaucetServer"},
		// The sample's abuse controls: the API tokens on a volume of their own.
		{"fsrv/" + sampleName, "{.status.conditions[?(@.type=='Stalled')].reason}", ""},
		{"deployment/" + sampleName, "{.spec.template.spec.volumes[?(@.name=='api-tokens')].secret.secretName}", "faucet-api-tokens"},
		{"deployment/" + sampleName, "{.spec.template.spec.containers[0].volumeMounts[?(@.name=='api-tokens')].mountPath}", "/etc/faucet/api-tokens"},
	}
	for _, c := range checks {
		got, err := get(c.obj, c.jsonpath)
		if err != nil {
			return err
		}
		if got != c.want {
			return fmt.Errorf("%s %s = %q, want %q", c.obj, c.jsonpath, got, c.want)
		}
		fmt.Printf("%s %s: %s\n", c.obj, c.jsonpath, got)
	}
	args, err := get("deployment/"+sampleName, "{.spec.template.spec.containers[0].args}")
	if err != nil {
		return err
	}
	// The operator writes what differs from serve's defaults (the
	// sample's difficulty 0, low threshold 100, regtest and BTC amounts
	// are those), and always where the pod listens and how it logs.
	for _, want := range []string{"--pow-raise-above=60/1m0s", "--api-tokens-file=/etc/faucet/api-tokens/tokens",
		"--ip-allow=203.0.113.7/32", "--ip-deny=198.51.100.0/24", "--balance-cap=100000000000",
		"--token=name=sbtc,asset=SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token,amount=100000,limit-address=5/5m0s,limit-ip=30/5m0s",
		"--btc-rpc-url=http://bitcoind.bitcoin.svc:18443", "--btc-rpc-credentials-file=/etc/faucet/btc-rpc/credentials",
		"--btc-key-file=/etc/faucet/btc-key/key", "--listen=:3999", "--log-format=json"} {
		if !strings.Contains(args, `"`+want+`"`) {
			return fmt.Errorf("deployment/%s args %s lack %s", sampleName, args, want)
		}
	}
	fmt.Println("the sample's abuse, page, sBTC and BTC settings reach the faucet's flags")
	if _, err := k.runQuiet(ctx, "get", "-n", sampleNS, "persistentvolumeclaim/"+pgName+"-data"); err == nil {
		return errors.New("a PersistentVolumeClaim for the Postgres sample")
	}
	if _, err := k.runQuiet(ctx, "get", "-n", sampleNS, "poddisruptionbudget/"+sampleName); err == nil {
		return errors.New("a PodDisruptionBudget for the one pod of the embedded sample")
	}
	uri, err := k.runQuiet(ctx, "get", "-n", sampleNS, "secret/faucet-pg-db", "-o", `go-template={{index .data "uri" | base64decode}}`)
	if err != nil {
		return err
	}
	obj, err := exposedIn(ctx, k, pgName, uri, "change-me")
	if err != nil {
		return err
	}
	if obj != "" {
		return fmt.Errorf("the Postgres URI or its password appears in %s", obj)
	}
	fmt.Println("the Postgres URI appears in no Deployment, status or event")
	return nil
}

// checkSignIn checks what the sample's spec.budget, spec.assets[].budget
// and spec.identity made of its Deployment: --budget and the sign-in flags
// (with the CRD's defaults filled in), the client secret and session key
// of faucet-oidc.yaml as files of read-only Secret volumes, and neither in
// the Deployment, the status or an event.
func checkSignIn(ctx context.Context, k kubectl) error {
	args, err := k.runQuiet(ctx, "get", "-n", sampleNS, "deployment/"+sampleName, "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	if err != nil {
		return err
	}
	for _, want := range []string{
		"--budget=asset=stx,amount=1000000000000,per=24h0m0s,scale-below=25,floor=10,reserve=10000000000,target=100000000000;" +
			"asset=sbtc,amount=200000000,per=24h0m0s,scale-below=25,floor=10,reserve=1000000",
		"--oidc-issuer=https://keycloak.example.com/realms/stacks", "--oidc-client-id=stx-faucet",
		"--oidc-client-secret-file=/etc/faucet/oidc/client-secret", "--oidc-scopes=openid,email,profile,groups",
		"--public-url=https://faucet.example.com", "--session-key-file=/etc/faucet/session/session-key",
		"--tier=name=staff,groups=faucet-staff,amount-percent=1000,limit=100/24h0m0s,skip-pow=true,budget-share=100;" +
			"name=verified,email-verified=true,amount-percent=200,limit=20/24h0m0s,skip-pow=true,budget-share=100",
		"--anonymous-budget-share=50",
	} {
		if !strings.Contains(args, `"`+want+`"`) {
			return fmt.Errorf("deployment/%s args %s lack %s", sampleName, args, want)
		}
	}
	for volume, want := range map[string]string{"oidc-client-secret": "faucet-oidc/client-secret", "session-key": "faucet-oidc/session-key"} {
		got, err := k.runQuiet(ctx, "get", "-n", sampleNS, "deployment/"+sampleName, "-o",
			"jsonpath={.spec.template.spec.volumes[?(@.name=='"+volume+"')].secret.secretName}/{.spec.template.spec.volumes[?(@.name=='"+volume+"')].secret.items[0].key}")
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("deployment/%s volume %s is %q, want the file %s", sampleName, volume, got, want)
		}
	}
	for _, dataKey := range []string{"client-secret", "session-key"} {
		value, err := k.runQuiet(ctx, "get", "-n", sampleNS, "secret/faucet-oidc", "-o", `go-template={{index .data "`+dataKey+`" | base64decode}}`)
		if err != nil {
			return err
		}
		obj, err := exposedIn(ctx, k, sampleName, value)
		if err != nil {
			return err
		}
		if obj != "" {
			return fmt.Errorf("the %s of faucet-oidc appears in %s", dataKey, obj)
		}
	}
	fmt.Println("the sample's budgets and sign-in reach the faucet's flags; its client secret and session key are files only")
	return nil
}

// checkAddresses parses the sample Secret's keys the way the operator does
// and compares their addresses with the status.
func checkAddresses(ctx context.Context, k kubectl, statusJSON string) error {
	keysText, err := k.runQuiet(ctx, "get", "-n", sampleNS, "secret/faucet-keys", "-o", "go-template={{index .data \"keys\" | base64decode}}")
	if err != nil {
		return err
	}
	keys, err := stacks.ParsePrivateKeys(keysText)
	if err != nil {
		return fmt.Errorf("sample Secret: %w", err)
	}
	got, err := k.runQuiet(ctx, "get", "-n", sampleNS, "fsrv/"+sampleName, "-o", `jsonpath={range .status.faucetAddresses[*]}{@}{"\n"}{end}`)
	if err != nil {
		return err
	}
	var want []string
	for _, key := range keys {
		want = append(want, key.TestnetAddress().String())
	}
	gotList := strings.Fields(got)
	if !slices.Equal(gotList, want) {
		return fmt.Errorf("status.faucetAddresses = %v, want %v", gotList, want)
	}
	for _, key := range keys {
		if strings.Contains(statusJSON, key.Hex()[:16]) {
			return errors.New("key material in the status")
		}
	}
	fmt.Printf("faucetAddresses match the %d sample keys: %s\n", len(want), strings.Join(want, ", "))
	return nil
}

// exposedIn is the first of the FaucetServer name's Deployment and status
// and the sample namespace's ReplicaSets and events whose JSON holds one of
// secrets, or "" when none does.
func exposedIn(ctx context.Context, k kubectl, name string, secrets ...string) (string, error) {
	for _, obj := range []string{"deployment/" + name, "fsrv/" + name, "replicasets", "events.events.k8s.io"} {
		out, err := k.runQuiet(ctx, "get", "-n", sampleNS, obj, "-o", "json")
		if err != nil {
			return "", err
		}
		for _, secret := range secrets {
			if strings.Contains(out, secret) {
				return obj, nil
			}
		}
	}
	return "", nil
}

type kubectl struct{ bin, kubeconfig string }

// run echoes the command, then its output.
func (k kubectl) run(ctx context.Context, args ...string) (string, error) {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	out, err := k.runQuiet(ctx, args...)
	if args[0] != "create" || args[1] != "token" { // never print the token
		fmt.Print(indent(out))
	}
	return out, err
}

func (k kubectl) runQuiet(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w\n%s", args[0], err, stderr.String())
	}
	return stdout.String(), nil
}

func writeTokenKubeconfig(path, host string, ca []byte, token string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	c.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: token}
	c.Contexts["operator"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "operator"}
	c.CurrentContext = "operator"
	return clientcmd.WriteToFile(*c, path)
}

// startManager runs the manager with its log in logPath; the returned func
// stops it with SIGTERM, as the kubelet would.
func startManager(clk clock.Clock, bin, logPath string, args ...string) (func(), error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"manager"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	fmt.Printf("$ faucet manager %s\n  (log: %s)\n", strings.Join(args, " "), logPath)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start manager: %w", err)
	}
	return func() {
		step("stopping the manager")
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-clk.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	}, nil
}

func waitHTTP(ctx context.Context, clk clock.Clock, url string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(200 * time.Millisecond):
		}
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}

func printTail(path string, n int) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	fmt.Fprintf(os.Stderr, "--- last %d lines of the manager log ---\n", n)
	for _, l := range lines[max(0, len(lines)-n):] {
		fmt.Fprintln(os.Stderr, l)
	}
}
