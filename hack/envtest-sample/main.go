// Command envtest-sample takes the path a user takes, against a real API
// server: it starts an envtest control plane (kube-apiserver and etcd from
// $KUBEBUILDER_ASSETS), installs the operator with `kubectl apply -k
// config/default`, runs `faucet manager` with the token of the operator's
// ServiceAccount (so config/rbac is what authorizes it), applies
// config/samples with `kubectl apply -f`, and waits for the Deployment, the
// Service and the FaucetServer's conditions and addresses.
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
	"errors"
	"flag"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/stxfaucet/faucet-operator/server/stacks"
)

const (
	operatorNS = "faucet-operator-system"
	operatorSA = "faucet-operator-controller-manager"
	sampleNS   = "faucet-sample"
	sampleName = "faucet"
	image      = "ghcr.io/stxfaucet/faucet-operator:sample"
)

func main() {
	faucetBin := flag.String("faucet", "bin/faucet", "the faucet binary to run as the manager")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up after this long")
	keep := flag.Bool("keep", false, "keep the control plane and manager running until interrupted, and print a kubeconfig")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *faucetBin, *timeout, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "envtest-sample: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("envtest-sample: OK")
}

func run(ctx context.Context, faucetBin string, timeout time.Duration, keep bool) error {
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
	logPath := filepath.Join(tmp, "manager.log")
	stopManager, err := startManager(faucetBin, logPath, "--kubeconfig="+mgrPath,
		"--leader-elect=true", "--leader-election-namespace="+operatorNS,
		"--metrics-bind-address=0", "--health-probe-bind-address="+probeAddr,
		"--server-image="+image, "--log-format=text")
	if err != nil {
		return err
	}
	defer stopManager()
	fail := func(err error) error {
		printTail(logPath, 40)
		return err
	}
	if err := waitHTTP(ctx, "http://"+probeAddr+"/readyz"); err != nil {
		return fail(fmt.Errorf("manager readyz: %w", err))
	}

	step("applying config/samples, as a user would")
	if _, err := k.run(ctx, "create", "namespace", sampleNS); err != nil {
		return err
	}
	if _, err := k.run(ctx, "apply", "-n", sampleNS, "-f", "config/samples/"); err != nil {
		return err
	}

	step("waiting for the Deployment, the Service and the first status")
	if _, err := k.run(ctx, "wait", "-n", sampleNS, "--for=create", "deployment/"+sampleName, "service/"+sampleName, "serviceaccount/"+sampleName, "--timeout=60s"); err != nil {
		return fail(err)
	}
	if _, err := k.run(ctx, "wait", "-n", sampleNS, "fsrv/"+sampleName, "--for=condition=Reconciling=True", "--timeout=60s"); err != nil {
		return fail(err)
	}
	if _, err := k.run(ctx, "get", "-n", sampleNS, "fsrv,deployment,service,serviceaccount", "-o", "wide"); err != nil {
		return err
	}

	step("playing the Deployment controller: one pod, available")
	gen, err := k.run(ctx, "get", "-n", sampleNS, "deployment/"+sampleName, "-o", "jsonpath={.metadata.generation}")
	if err != nil {
		return err
	}
	now := time.Now().UTC().Format(time.RFC3339)
	status := fmt.Sprintf(`{"status":{"observedGeneration":%s,"replicas":1,"updatedReplicas":1,"readyReplicas":1,"availableReplicas":1,`+
		`"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","lastUpdateTime":%q,"lastTransitionTime":%q},`+
		`{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable","lastUpdateTime":%q,"lastTransitionTime":%q}]}}`,
		strings.TrimSpace(gen), now, now, now, now)
	if _, err := k.run(ctx, "patch", "-n", sampleNS, "deployment/"+sampleName, "--subresource=status", "--type=merge", "-p", status); err != nil {
		return err
	}
	if _, err := k.run(ctx, "wait", "-n", sampleNS, "fsrv/"+sampleName, "--for=condition=Ready", "--timeout=60s"); err != nil {
		return fail(err)
	}

	step("the FaucetServer as users see it")
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
func startManager(bin, logPath string, args ...string) (func(), error) {
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
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
	}, nil
}

func waitHTTP(ctx context.Context, url string) error {
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
		case <-time.After(200 * time.Millisecond):
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
