//go:build e2e

// Package e2e walks the whole product path once, hermetically: a
// FaucetServer applied to a real API server becomes a Deployment, the test
// plays kubelet and runs that Deployment's container as a local process, and
// the official JavaScript client gets real STX from it on a simulated node.
// The manager runs as its own user with only the generated RBAC rules, bound
// in namespaces as the chart binds them with watchNamespaces.
//
// Run with `make e2e`; it needs bin/faucet, the envtest binaries and
// hack/e2e-client's npm packages, which the make target provides.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/hack/e2eclient"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

const (
	namespace         = "faucet-e2e"
	operatorNamespace = "faucet-system" // the manager's leader-election Lease
	managerUser       = "faucet-operator"
	serverImage       = "faucet-operator:e2e"
	name              = "testnet"
	funding           = uint64(1_000_000) * 1_000_000 // 1M STX per key
	firstAmount       = int64(500_000_000)            // the default drip
	newAmount         = int64(123_456_789)

	// The treasury (step 9): a drained key holds 10 drips, about 1235
	// STX, below refillBelow; one refill lifts it to about 172 drips, so
	// the two keys together are well above the low threshold of 100.
	treasurySecret  = "faucet-treasury"
	treasuryFunding = uint64(100_000) * 1_000_000 // 100k STX
	refillBelow     = int64(2_000) * 1_000_000    // 2000 STX
	refillAmount    = int64(20_000) * 1_000_000   // 20k STX
	refillMemo      = "faucet refill"

	// Batching (step 10): batchDrips default drips at once from this one
	// client IP, gathered into send-many calls of at most batchMax. The
	// CRD cannot turn the per-IP limit off (requests must be > 0), so it
	// is raised to perIPRequests.
	batchMax      = 50
	batchWindow   = 250 * time.Millisecond
	batchDrips    = 60
	perIPRequests = 1000
	perIPWindow   = 5 * time.Minute

	// sBTC (step 11): the node deploys the token at the testnet sBTC
	// identifier and mints each key sbtcFunding sats; a drip is sbtcAmount.
	sbtcFunding = uint64(10) * 100_000_000 // 10 sBTC per key
	sbtcAmount  = int64(250_000)
)

// repo is the repository root (this file lives in hack/e2e).
var repo = func() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}()

func TestFaucetServerEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	faucetBin := requireFile(t, filepath.Join(repo, "bin", "faucet"), "run `make build`")
	requireFile(t, filepath.Join(repo, "hack", "e2e-client", "node_modules", "@stacks", "blockchain-api-client", "package.json"), "run `npm ci --prefix hack/e2e-client`")

	// 1. Control plane.
	k8s, adminConfig, managerKubeconfig := startControlPlane(t)

	// 2. A simulated Stacks node with two funded faucet keys, mining every
	// 500 ms, with the send-many-memo contract deployed at its testnet id
	// and an sBTC token at testnet sBTC's, the keys holding STX and sBTC.
	keys := []*stacks.PrivateKey{newKey(t), newKey(t)}
	genesis, sbtcGenesis := map[stacks.Address]uint64{}, map[stacks.Address]uint64{}
	for _, k := range keys {
		genesis[k.TestnetAddress()] = funding
		sbtcGenesis[k.TestnetAddress()] = sbtcFunding
	}
	dn := devnode.New(devnode.Config{Genesis: genesis, BlockTime: 500 * time.Millisecond, SendManyContract: stacks.SendManyMemoTestnet,
		TokenAsset: settings.SBTCTestnet, TokenGenesis: sbtcGenesis})
	nodeURL := serve(t, ctx, dn.Handler())
	go func() { _ = dn.Run(ctx) }()

	// 3. The manager, as its own process and its own user, authorized only
	// by the generated rules the chart installs with watchNamespaces: a Role
	// in the watched namespace and the leader-election Role in its own.
	mustCreate(t, ctx, k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
	mustCreate(t, ctx, k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})
	grantRole(t, ctx, k8s, namespace, filepath.Join(repo, "config", "rbac", "role.yaml"))
	grantRole(t, ctx, k8s, operatorNamespace, filepath.Join(repo, "config", "rbac", "leader_election_role.yaml"))
	var forbidden atomic.Pointer[string]
	t.Cleanup(func() { // after the manager has stopped: cleanups run last first
		if line := forbidden.Load(); line != nil {
			t.Errorf("the manager was refused a request, so config/rbac lacks a permission: %s", *line)
		}
	})
	startProcess(t, ctx, "manager", faucetBin, []string{
		"manager", "--kubeconfig=" + managerKubeconfig, "--leader-elect=true",
		"--leader-election-namespace=" + operatorNamespace,
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--server-image=" + serverImage, "--watch-namespaces=" + namespace,
		"--funding-interval=1s", // the default 1m would outlast the test
	}, nil, func(line string) {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			forbidden.CompareAndSwap(nil, &line)
		}
	})

	// 4. The user's objects: a key Secret and a FaucetServer.
	mustCreate(t, ctx, k8s, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "faucet-keys", Namespace: namespace},
		StringData: map[string]string{"keys": keys[0].Hex() + "\n" + keys[1].Hex() + "\n"},
	})
	fsrv := &faucetv1alpha1.FaucetServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: faucetv1alpha1.FaucetServerSpec{
			Node:         faucetv1alpha1.NodeSpec{URL: nodeURL},
			KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
		},
	}
	mustCreate(t, ctx, k8s, fsrv)

	// 5. Play kubelet for the Deployment the operator made. Its
	// PersistentVolumeClaim (the embedded store) becomes a local directory
	// that outlives the process, as a volume outlives its pod.
	dep := waitDeployment(t, ctx, k8s, "")
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != serverImage {
		t.Fatalf("faucet container image %q, want the manager's --server-image %q", img, serverImage)
	}
	volumes := map[string]string{} // claim name → local directory
	faucetURL, stop := runPod(t, ctx, k8s, dep, faucetBin, volumes, nil)

	// 6. A user asks for STX through the official client.
	recipient := newKey(t).TestnetAddress()
	out := officialClientDrip(t, ctx, faucetURL, recipient, firstAmount)
	t.Logf("drip via @stacks/blockchain-api-client: txId %s from %s nonce %s", out.TxID, out.Sender, out.Nonce)
	waitBalance(t, ctx, dn, recipient, uint64(firstAmount))

	// The pod is serving, so mark the Deployment available as the
	// deployment controller would, and expect Ready on the FaucetServer.
	markAvailable(t, ctx, k8s, dep)
	waitReady(t, ctx, k8s, keys)

	// The first pod wrote its state where the volume is.
	storeDir := volumes[name+"-data"]
	if _, err := os.Stat(filepath.Join(storeDir, "faucet.db")); err != nil {
		t.Fatalf("no SQLite store on the volume: %v", err)
	}

	// 7. Change the drip amount: the operator rolls the pod template. The
	// new pod gets the same volume back (Recreate: the old one stops first).
	oldHash := dep.Spec.Template.Annotations["faucet.stxfaucet.dev/config-hash"]
	patchAmount(t, ctx, k8s, newAmount)
	dep = waitDeployment(t, ctx, k8s, oldHash)
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Fatalf("strategy %s: a ReadWriteOnce volume needs Recreate", dep.Spec.Strategy.Type)
	}
	stop()
	faucetURL, stop = runPod(t, ctx, k8s, dep, faucetBin, volumes, nil)
	if volumes[name+"-data"] != storeDir {
		t.Fatal("the new pod got another volume")
	}
	recipient2 := newKey(t).TestnetAddress()
	officialClientDrip(t, ctx, faucetURL, recipient2, newAmount)
	waitBalance(t, ctx, dn, recipient2, uint64(newAmount))
	markAvailable(t, ctx, k8s, dep)
	waitReady(t, ctx, k8s, keys)

	// 8. Funding: the operator reads the keys' balances from the node on
	// its own and shows them in `kubectl get fsrv`. Then move most of the
	// funds away on the node: below the low threshold (100 drips) Funded
	// turns False, reason Low, with a Warning event, while Ready stays.
	checkFunding(t, ctx, k8s, adminConfig, keys, nodeURL, dn)

	// 9. Treasury: a holder key, funded on the node, in a Secret of its
	// own. spec.treasury rolls the pod (the Secret's digest is in the
	// config hash); the new pod tops each drained key up from the
	// treasury at the next block and keeps serving, and Funded turns True
	// again.
	lowSince := time.Now()
	treasury := newKey(t)
	dn.Fund(treasury.TestnetAddress(), treasuryFunding)
	mustCreate(t, ctx, k8s, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: treasurySecret, Namespace: namespace},
		StringData: map[string]string{"keys": treasury.Hex() + "\n"}, // keySecretRef.key defaults to "keys"
	})
	oldHash = dep.Spec.Template.Annotations["faucet.stxfaucet.dev/config-hash"]
	patchTreasury(t, ctx, k8s)
	dep = waitDeployment(t, ctx, k8s, oldHash)
	checkTreasuryDeployment(t, dep, treasury)
	drained := map[stacks.Address]uint64{}
	for _, k := range keys {
		drained[k.TestnetAddress()], _ = dn.Account(k.TestnetAddress())
	}
	stop()
	var refillLog refillLines
	faucetURL, stop = runPod(t, ctx, k8s, dep, faucetBin, volumes, refillLog.add)
	checkRefills(t, ctx, dn, nodeURL, keys, treasury, drained, &refillLog)
	recipient3 := newKey(t).TestnetAddress()
	out = officialClientDrip(t, ctx, faucetURL, recipient3, newAmount)
	t.Logf("drip after the refill via @stacks/blockchain-api-client: txId %s from %s nonce %s", out.TxID, out.Sender, out.Nonce)
	waitBalance(t, ctx, dn, recipient3, uint64(newAmount))
	markAvailable(t, ctx, k8s, dep)
	waitReady(t, ctx, k8s, keys)
	checkRefunded(t, ctx, k8s, adminConfig, keys, dn, treasury, lowSince)

	// 10. Batching: spec.batching rolls the pod with --batch-max; default
	// drips that arrive together are paid by shared send-many calls, each
	// request still answered 200 with the shared transaction, and every
	// recipient gets exactly the drip amount. The refilled keys hold about
	// 170 drips each, plenty for these 61.
	oldHash = dep.Spec.Template.Annotations["faucet.stxfaucet.dev/config-hash"]
	patchBatching(t, ctx, k8s)
	dep = waitDeployment(t, ctx, k8s, oldHash)
	checkBatchDeployment(t, dep)
	stop()
	faucetURL, stop = runPod(t, ctx, k8s, dep, faucetBin, volumes, nil)
	checkBatching(t, ctx, dn, faucetURL, keys)
	// The official client, alone: a batch of one is a plain transfer, the
	// token transfer the client checks for.
	recipient4 := newKey(t).TestnetAddress()
	out = officialClientDrip(t, ctx, faucetURL, recipient4, newAmount)
	t.Logf("drip with batching on via @stacks/blockchain-api-client: txId %s from %s nonce %s", out.TxID, out.Sender, out.Nonce)
	waitBalance(t, ctx, dn, recipient4, uint64(newAmount))
	markAvailable(t, ctx, k8s, dep)
	waitReady(t, ctx, k8s, keys)

	// 11. sBTC: an sbtc entry in spec.assets rolls the pod with its --token.
	// The official client's sBTC operation gets a SIP-010 transfer with its
	// post-condition, the recipient's get-balance read through the node's
	// call-read RPC rises by the amount, STX drips go on beside it, and
	// the operator reports the keys' sBTC in the sbtc entry of
	// status.funding.assets.
	oldHash = dep.Spec.Template.Annotations["faucet.stxfaucet.dev/config-hash"]
	patchSBTC(t, ctx, k8s)
	dep = waitDeployment(t, ctx, k8s, oldHash)
	checkSBTCDeployment(t, dep)
	stop()
	faucetURL, _ = runPod(t, ctx, k8s, dep, faucetBin, volumes, nil)
	recipient5 := newKey(t).TestnetAddress()
	sbtcOut, err := e2eclient.DripSBTC(ctx, repo, faucetURL, recipient5.String(), sbtcAmount, settings.SBTCTestnet)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sBTC drip via @stacks/blockchain-api-client: txId %s from %s nonce %s", sbtcOut.TxID, sbtcOut.Sender, sbtcOut.Nonce)
	waitTokenBalance(t, ctx, nodeURL, recipient5, uint64(sbtcAmount))
	recipient6 := newKey(t).TestnetAddress()
	officialClientDrip(t, ctx, faucetURL, recipient6, newAmount)
	waitBalance(t, ctx, dn, recipient6, uint64(newAmount))
	markAvailable(t, ctx, k8s, dep)
	waitReady(t, ctx, k8s, keys)
	checkSBTCFunding(t, ctx, k8s, dn, keys)

	// 12. Delete: the children carry controller owner references, so the
	// garbage collector (absent in envtest) removes them.
	var current faucetv1alpha1.FaucetServer
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &current); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &current); err != nil {
		t.Fatal(err)
	}
	for obj, objName := range map[client.Object]string{
		&appsv1.Deployment{}: name, &corev1.Service{}: name, &corev1.ServiceAccount{}: name,
		&corev1.PersistentVolumeClaim{}: name + "-data",
	} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: objName}, obj); err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.UID != current.UID || ref.Kind != "FaucetServer" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Fatalf("%T %s has no controller reference to the FaucetServer: %+v", obj, obj.GetName(), obj.GetOwnerReferences())
		}
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &current); !apierrors.IsNotFound(err) {
		t.Fatalf("FaucetServer still present after delete (a finalizer?): %v", err)
	}
}

func newKey(t *testing.T) *stacks.PrivateKey {
	t.Helper()
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func requireFile(t *testing.T, path, hint string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: %s", path, hint)
	}
	return path
}

// startControlPlane starts kube-apiserver and etcd with the CRDs installed
// and returns an admin client, its config and a kubeconfig file of
// managerUser, who has no permission until grantRole gives it one.
func startControlPlane(t *testing.T) (client.Client, *rest.Config, string) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make e2e` (it builds the envtest binaries)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repo, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: managerUser}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := e2eclient.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg, path
}

// grantRole creates, in namespace, a Role with the rules of the
// (Cluster)Role in file and binds it to managerUser.
func grantRole(t *testing.T, ctx context.Context, c client.Client, namespace, file string) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var src rbacv1.Role
	if err := yaml.Unmarshal(raw, &src); err != nil || len(src.Rules) == 0 {
		t.Fatalf("%s: no rules (%v)", file, err)
	}
	roleName := strings.TrimSuffix(filepath.Base(file), ".yaml")
	mustCreate(t, ctx, c, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: roleName, Namespace: namespace}, Rules: src.Rules})
	mustCreate(t, ctx, c, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: roleName, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: managerUser}},
	})
}

func serve(t *testing.T, ctx context.Context, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// startProcess runs a command until the test ends (or stop is called),
// streaming its output into the test log and, when set, to onLine.
func startProcess(t *testing.T, ctx context.Context, label, bin string, args, env []string, onLine func(string)) (stop func()) {
	t.Helper()
	pctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(pctx, bin, args...)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", label, err)
	}
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			t.Logf("[%s] %s", label, sc.Text())
			if onLine != nil {
				onLine(sc.Text())
			}
		}
	}()
	done := false
	stop = func() {
		if done {
			return
		}
		done = true
		cancel()
		_ = cmd.Wait()
		pw.Close()
		<-logged
	}
	t.Cleanup(stop)
	return stop
}

func mustCreate(t *testing.T, ctx context.Context, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// poll calls fn until it returns true or the deadline passes.
func poll(t *testing.T, ctx context.Context, what string, timeout time.Duration, fn func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ok, err := fn()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
}

// waitDeployment waits for the FaucetServer's Deployment, optionally for a
// pod template whose config hash differs from notHash.
func waitDeployment(t *testing.T, ctx context.Context, c client.Client, notHash string) *appsv1.Deployment {
	t.Helper()
	var dep appsv1.Deployment
	poll(t, ctx, "the Deployment", time.Minute, func() (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &dep)
		if err != nil {
			return false, err
		}
		h := dep.Spec.Template.Annotations["faucet.stxfaucet.dev/config-hash"]
		return h != "" && h != notHash, nil
	})
	return &dep
}

// runPod does the kubelet's part for the Deployment's only container: it
// materialises the Secret volumes as files and each PersistentVolumeClaim as
// a directory (kept in volumes by claim name, so a later pod finds the same
// data), resolves the environment, Secret references included, runs the
// image's entrypoint (our binary) with the container's args on a free
// loopback port and waits for /readyz. onLine, when set, sees each line
// the faucet logs.
func runPod(t *testing.T, ctx context.Context, c client.Client, dep *appsv1.Deployment, faucetBin string, volumes map[string]string, onLine func(string)) (string, func()) {
	t.Helper()
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if len(ctr.Command) > 0 && ctr.Command[0] != "/faucet" {
		t.Fatalf("unexpected command %q", ctr.Command)
	}
	mounts := map[string]string{} // mountPath → local dir
	for _, vm := range ctr.VolumeMounts {
		var vol *corev1.Volume
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == vm.Name {
				vol = &pod.Volumes[i]
			}
		}
		switch {
		case vol == nil:
			t.Fatalf("volume mount %q has no volume", vm.Name)
		case vol.Secret != nil:
			var sec corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: dep.Namespace, Name: vol.Secret.SecretName}, &sec); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			items := vol.Secret.Items
			if len(items) == 0 {
				for k := range sec.Data {
					items = append(items, corev1.KeyToPath{Key: k, Path: k})
				}
			}
			for _, it := range items {
				if err := os.WriteFile(filepath.Join(dir, it.Path), sec.Data[it.Key], 0o400); err != nil {
					t.Fatal(err)
				}
			}
			mounts[vm.MountPath] = dir
		case vol.PersistentVolumeClaim != nil:
			// The kubelet would wait for the claim; it must exist and be
			// the FaucetServer's.
			claim := vol.PersistentVolumeClaim.ClaimName
			var pvc corev1.PersistentVolumeClaim
			if err := c.Get(ctx, client.ObjectKey{Namespace: dep.Namespace, Name: claim}, &pvc); err != nil {
				t.Fatalf("claim %s: %v", claim, err)
			}
			if ref := metav1.GetControllerOf(&pvc); ref == nil || ref.Kind != "FaucetServer" {
				t.Fatalf("claim %s is not controlled by a FaucetServer: %+v", claim, pvc.OwnerReferences)
			}
			if vm.ReadOnly {
				t.Fatalf("claim %s is mounted read-only: the store cannot write", claim)
			}
			if volumes[claim] == "" {
				volumes[claim] = t.TempDir()
			}
			mounts[vm.MountPath] = volumes[claim]
		case vol.ConfigMap != nil:
			// The switches: the FaucetServer's own ConfigMap, its keys as
			// files (the kubelet would refresh them; this pod is short).
			var cm corev1.ConfigMap
			if err := c.Get(ctx, client.ObjectKey{Namespace: dep.Namespace, Name: vol.ConfigMap.Name}, &cm); err != nil {
				t.Fatalf("ConfigMap %s: %v", vol.ConfigMap.Name, err)
			}
			if ref := metav1.GetControllerOf(&cm); ref == nil || ref.Kind != "FaucetServer" {
				t.Fatalf("ConfigMap %s is not controlled by a FaucetServer: %+v", cm.Name, cm.OwnerReferences)
			}
			dir := t.TempDir()
			for k, v := range cm.Data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			mounts[vm.MountPath] = dir
		default:
			t.Fatalf("volume %q is neither a Secret, a ConfigMap nor a PersistentVolumeClaim", vm.Name)
		}
	}
	port := freePort(t)
	var args []string
	for _, a := range ctr.Args {
		if strings.HasPrefix(a, "--listen=") {
			a = "--listen=127.0.0.1:" + strconv.Itoa(port)
		}
		for mp, dir := range mounts {
			a = strings.Replace(a, "="+mp+"/", "="+dir+"/", 1)
		}
		args = append(args, a)
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range ctr.Env {
		value := e.Value
		if e.ValueFrom != nil {
			ref := e.ValueFrom.SecretKeyRef
			if ref == nil {
				t.Fatalf("env %s: only Secret references are resolved here", e.Name)
			}
			var sec corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: dep.Namespace, Name: ref.Name}, &sec); err != nil {
				t.Fatalf("env %s: %v", e.Name, err)
			}
			v, ok := sec.Data[ref.Key]
			if !ok {
				t.Fatalf("env %s: Secret %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			value = string(v)
		}
		env = append(env, e.Name+"="+value)
	}
	stop := startProcess(t, ctx, "faucet", faucetBin, args, env, onLine)
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	poll(t, ctx, "/readyz", time.Minute, func() (bool, error) {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz %d %s", resp.StatusCode, body)
	})
	return url, stop
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// officialClientDrip requests a drip and the status with the official
// JavaScript client, which validates both bodies against the published
// schemas and verifies the transaction.
func officialClientDrip(t *testing.T, ctx context.Context, faucetURL string, to stacks.Address, amount int64) e2eclient.Result {
	t.Helper()
	res, err := e2eclient.Drip(ctx, repo, faucetURL, to.String(), amount)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// waitBalance waits until the devnode has mined the drip and the recipient
// holds exactly want.
func waitBalance(t *testing.T, ctx context.Context, dn *devnode.Node, to stacks.Address, want uint64) {
	t.Helper()
	poll(t, ctx, "the drip to be mined", 30*time.Second, func() (bool, error) {
		bal, _ := dn.Account(to)
		if bal > want {
			return false, fmt.Errorf("balance %d exceeds %d", bal, want)
		}
		return bal == want, fmt.Errorf("balance %d", bal)
	})
}

// markAvailable writes the status the deployment controller would.
func markAvailable(t *testing.T, ctx context.Context, c client.Client, dep *appsv1.Deployment) {
	t.Helper()
	var cur appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Status = appsv1.DeploymentStatus{
		ObservedGeneration: cur.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
			LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	if err := c.Status().Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits for Ready=True and checks the reported addresses.
func waitReady(t *testing.T, ctx context.Context, c client.Client, keys []*stacks.PrivateKey) {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	poll(t, ctx, "FaucetServer Ready", time.Minute, func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fs); err != nil {
			return false, err
		}
		for _, cond := range fs.Status.Conditions {
			if cond.Type == "Ready" {
				return cond.Status == metav1.ConditionTrue && fs.Status.ObservedGeneration == fs.Generation,
					fmt.Errorf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		return false, errors.New("no Ready condition")
	})
	want := []string{keys[0].TestnetAddress().String(), keys[1].TestnetAddress().String()}
	if fmt.Sprint(fs.Status.FaucetAddresses) != fmt.Sprint(want) {
		t.Fatalf("status.faucetAddresses = %v, want %v", fs.Status.FaucetAddresses, want)
	}
	t.Logf("FaucetServer Ready; url %s; addresses %v", fs.Status.URL, fs.Status.FaucetAddresses)
}

func patchAmount(t *testing.T, ctx context.Context, c client.Client, amount int64) {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fs); err != nil {
		t.Fatal(err)
	}
	orig := fs.DeepCopy()
	if fs.Spec.Amounts == nil {
		fs.Spec.Amounts = &faucetv1alpha1.Amounts{}
	}
	fs.Spec.Amounts.Default = &amount
	if err := c.Patch(ctx, &fs, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// patchTreasury sets spec.treasury: the treasury Secret, refillBelow and
// refillAmount.
func patchTreasury(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fs); err != nil {
		t.Fatal(err)
	}
	orig := fs.DeepCopy()
	fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{
		KeySecretRef:     faucetv1alpha1.TreasuryKeyReference{Name: treasurySecret},
		RefillBelowUSTX:  ptrTo(refillBelow),
		RefillAmountUSTX: ptrTo(refillAmount),
	}
	if err := c.Patch(ctx, &fs, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// patchBatching sets spec.batching (batchMax, batchWindow; the contract
// is left to the CRD default) and raises spec.rateLimits.perIP so that
// batchDrips drips from one client IP pass.
func patchBatching(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fs); err != nil {
		t.Fatal(err)
	}
	orig := fs.DeepCopy()
	fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{
		MaxRecipients: ptrTo(int32(batchMax)),
		Window:        &metav1.Duration{Duration: batchWindow},
	}
	if fs.Spec.RateLimits == nil {
		fs.Spec.RateLimits = &faucetv1alpha1.RateLimits{}
	}
	fs.Spec.RateLimits.PerIP = &faucetv1alpha1.RateLimit{Requests: perIPRequests, Window: metav1.Duration{Duration: perIPWindow}}
	if err := c.Patch(ctx, &fs, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// patchSBTC sets spec.assets to an sbtc entry: the testnet sBTC
// identifier and the drip amount, the rate limits left to the CRD defaults.
func patchSBTC(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fs); err != nil {
		t.Fatal(err)
	}
	orig := fs.DeepCopy()
	fs.Spec.Assets = faucetv1alpha1.AssetList{{Name: "sbtc", Token: &faucetv1alpha1.TokenSpec{AssetIdentifier: settings.SBTCTestnet, Amount: sbtcAmount}}}
	if err := c.Patch(ctx, &fs, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// checkSBTCDeployment checks sbtc's --token in the pod template, the
// limits from the CRD defaults.
func checkSBTCDeployment(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	args := dep.Spec.Template.Spec.Containers[0].Args
	want := "--token=name=sbtc,asset=" + settings.SBTCTestnet + ",amount=" + strconv.FormatInt(sbtcAmount, 10) +
		",limit-address=5/5m0s,limit-ip=30/5m0s"
	if !slices.Contains(args, want) {
		t.Fatalf("faucet args %q lack %s", args, want)
	}
}

// waitTokenBalance waits until to's sBTC, read as any client reads it (the
// token's get-balance through the node's call-read RPC), is want.
func waitTokenBalance(t *testing.T, ctx context.Context, nodeURL string, to stacks.Address, want uint64) {
	t.Helper()
	nc, err := node.New(nodeURL)
	if err != nil {
		t.Fatal(err)
	}
	asset, err := stacks.ParseAssetID(settings.SBTCTestnet)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the sBTC drip to be mined", 30*time.Second, func() (bool, error) {
		bal, err := nc.TokenBalance(ctx, asset.Contract, stacks.Principal{Address: to})
		if err != nil {
			return false, err
		}
		if bal > want {
			return false, fmt.Errorf("sBTC balance %d exceeds %d", bal, want)
		}
		return bal == want, fmt.Errorf("sBTC balance %d", bal)
	})
}

// checkSBTCFunding waits for the sbtc entry of status.funding.assets to
// report what the node's token ledger holds for each key, and Funded to
// stay True.
func checkSBTCFunding(t *testing.T, ctx context.Context, c client.Client, dn *devnode.Node, keys []*stacks.PrivateKey) {
	t.Helper()
	poll(t, ctx, "status.funding.assets[sbtc] to match the node", 30*time.Second, func() (bool, error) {
		var fs faucetv1alpha1.FaucetServer
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fs); err != nil {
			return false, err
		}
		f := fs.Status.Funding
		if f == nil || len(f.Assets) != 1 || f.Assets[0].Name != "sbtc" || f.Assets[0].DripsLeft == nil {
			return false, errors.New("no sbtc figures in status.funding.assets yet")
		}
		sb := f.Assets[0]
		var total, drips int64
		for i, k := range keys {
			bal := int64(dn.TokenBalance(stacks.Principal{Address: k.TestnetAddress()}))
			if i >= len(sb.Keys) || sb.Keys[i].Address != k.TestnetAddress().String() || sb.Keys[i].Balance != bal {
				return false, fmt.Errorf("key %d: status %+v, node %d sats", i, sb.Keys, bal)
			}
			total += bal
			drips += bal / sbtcAmount
		}
		if sb.AssetIdentifier != settings.SBTCTestnet || *sb.Balance != total || *sb.DripsLeft != drips {
			return false, fmt.Errorf("sbtc status %s %d sats, %d drips; node %d sats, %d drips", sb.AssetIdentifier, *sb.Balance, *sb.DripsLeft, total, drips)
		}
		if want := "sbtc:" + strconv.FormatInt(drips, 10); f.AssetsSummary != want {
			return false, fmt.Errorf("assetsSummary %q, want %q", f.AssetsSummary, want)
		}
		for _, cond := range fs.Status.Conditions {
			if cond.Type == "Funded" && cond.Status != metav1.ConditionTrue {
				return false, fmt.Errorf("Funded %s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		return true, nil
	})
}

// checkBatchDeployment checks the batching and per-IP flags in the pod
// template; the contract, the CRD's default, is serve's: no flag.
func checkBatchDeployment(t *testing.T, dep *appsv1.Deployment) {
	t.Helper()
	args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{
		"--batch-max=" + strconv.Itoa(batchMax),
		"--batch-window=" + batchWindow.String(),
		fmt.Sprintf("--limit-ip=%d/%s", perIPRequests, perIPWindow),
	} {
		if !strings.Contains(args, want) {
			t.Fatalf("faucet args %q lack %s", args, want)
		}
	}
	if strings.Contains(args, "--batch-contract") {
		t.Fatalf("faucet args %q pass serve's default contract", args)
	}
}

// checkBatching sends batchDrips default drips at once over plain HTTP,
// each to a fresh recipient, and checks that all are answered 200, that
// the answers share send-many transactions (decoded from txRaw: a call of
// stacks.SendManyFunction on stacks.SendManyMemoTestnet by a faucet key,
// post-condition mode Deny, sending exactly the batch's total, listing
// exactly the recipients answered with it, each for newAmount), and that
// every recipient ends up holding exactly newAmount. A drip that found no
// company within the window is a batch of one, which the faucet sends as
// a plain transfer; it is accepted as such, alone on its txid.
func checkBatching(t *testing.T, ctx context.Context, dn *devnode.Node, faucetURL string, keys []*stacks.PrivateKey) {
	t.Helper()
	type answer struct {
		to     stacks.Address
		status int
		body   []byte
		err    error
	}
	answers := make([]answer, batchDrips)
	for i := range answers {
		answers[i].to = newKey(t).TestnetAddress()
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func(a *answer) {
			defer wg.Done()
			<-start
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, faucetURL+"/extended/v1/faucets/stx?address="+a.to.String(), nil)
			if err != nil {
				a.err = err
				return
			}
			resp, err := hc.Do(req)
			if err != nil {
				a.err = err
				return
			}
			defer resp.Body.Close()
			a.status = resp.StatusCode
			a.body, a.err = io.ReadAll(resp.Body)
		}(&answers[i])
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)

	type batch struct {
		tx *stacks.Transaction
		to []stacks.Address
	}
	batches := map[string]*batch{} // txid → its transaction and the recipients answered with it
	var order []string
	for _, a := range answers {
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("drip to %s: %d %v: %s", a.to, a.status, a.err, a.body)
		}
		var res struct {
			Success bool   `json:"success"`
			TxID    string `json:"txId"`
			TxRaw   string `json:"txRaw"`
		}
		if err := json.Unmarshal(a.body, &res); err != nil || !res.Success {
			t.Fatalf("drip to %s: %v: %s", a.to, err, a.body)
		}
		raw, err := hex.DecodeString(res.TxRaw)
		if err != nil {
			t.Fatalf("drip to %s: txRaw: %v", a.to, err)
		}
		tx, err := stacks.DecodeTransaction(raw)
		if err != nil {
			t.Fatalf("drip to %s: txRaw does not decode: %v", a.to, err)
		}
		if got := tx.TxID().Hex0x(); got != res.TxID {
			t.Fatalf("drip to %s: txId %s is not the txid of txRaw (%s)", a.to, res.TxID, got)
		}
		b := batches[res.TxID]
		if b == nil {
			b = &batch{tx: tx}
			batches[res.TxID] = b
			order = append(order, res.TxID)
		}
		b.to = append(b.to, a.to)
	}
	if len(batches) >= batchDrips {
		t.Fatalf("%d drips answered with %d distinct txids: nothing was batched", batchDrips, len(batches))
	}
	isKey := map[stacks.Address]bool{}
	for _, k := range keys {
		isKey[k.TestnetAddress()] = true
	}
	var sizes []int
	for _, txid := range order {
		b := batches[txid]
		tx := b.tx
		if !isKey[tx.SenderAddress()] {
			t.Fatalf("tx %s is sent by %s, not a faucet key", txid, tx.SenderAddress())
		}
		cc := tx.ContractCall
		if cc == nil {
			p := tx.Payload
			if len(b.to) != 1 || p.Recipient.IsContract() || p.Recipient.Address != b.to[0] || p.Amount != uint64(newAmount) {
				t.Fatalf("tx %s, answered to %v, is a transfer to %s of %d µSTX, not a send-many call", txid, b.to, p.Recipient, p.Amount)
			}
			t.Logf("tx %s: a batch of one, sent as a plain transfer to %s", txid, b.to[0])
			sizes = append(sizes, 1)
			continue
		}
		if cc.Contract.String() != stacks.SendManyMemoTestnet || cc.Function != stacks.SendManyFunction || len(cc.Args) != 1 {
			t.Fatalf("tx %s calls %s::%s with %d arguments, want %s::%s with 1", txid, cc.Contract, cc.Function, len(cc.Args), stacks.SendManyMemoTestnet, stacks.SendManyFunction)
		}
		list, ok := cc.Args[0].(stacks.List)
		if !ok || len(list) != len(b.to) {
			t.Fatalf("tx %s: send-many argument %T of %d entries, want a list of the %d recipients answered with it", txid, cc.Args[0], len(list), len(b.to))
		}
		listed := map[stacks.Address]bool{}
		for i, e := range list {
			tu, ok := e.(stacks.Tuple)
			if !ok {
				t.Fatalf("tx %s: entry %d is a %T, not a tuple", txid, i, e)
			}
			toV, _ := tu.Get("to")
			ustxV, _ := tu.Get("ustx")
			to, okT := toV.(stacks.Principal)
			ustx, okU := ustxV.(stacks.UInt)
			if amount, fits := ustx.Uint64(); !okT || !okU || to.IsContract() || !fits || amount != uint64(newAmount) {
				t.Fatalf("tx %s: entry %d pays %v %v, want a standard principal %d µSTX", txid, i, toV, ustxV, newAmount)
			}
			listed[to.Address] = true
		}
		for _, to := range b.to {
			if !listed[to] {
				t.Fatalf("tx %s was the answer to a drip to %s, but does not pay it", txid, to)
			}
		}
		total := uint64(len(list)) * uint64(newAmount)
		if tx.PostConditionMode != stacks.PostConditionModeDeny || len(tx.PostConditions) != 1 ||
			tx.PostConditions[0].Code != stacks.ConditionEq || tx.PostConditions[0].Amount != total {
			t.Fatalf("tx %s: post-condition mode 0x%02x, post-conditions %+v; want Deny and the sender sending exactly %d", txid, tx.PostConditionMode, tx.PostConditions, total)
		}
		t.Logf("send-many tx %s: %d recipients, %d µSTX in all, from %s nonce %d, fee %d", txid, len(list), total, tx.SenderAddress(), tx.Auth.Nonce, tx.Auth.Fee)
		sizes = append(sizes, len(list))
	}
	t.Logf("%d concurrent drips answered 200 in %s with %d distinct txids, batches of %v", batchDrips, took.Round(time.Millisecond), len(batches), sizes)
	for _, a := range answers {
		waitBalance(t, ctx, dn, a.to, uint64(newAmount))
	}
}

// checkTreasuryDeployment checks that the treasury reaches the pod as a
// mounted Secret file with the refill flags, and its key nowhere in the
// Deployment.
func checkTreasuryDeployment(t *testing.T, dep *appsv1.Deployment, treasury *stacks.PrivateKey) {
	t.Helper()
	args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{
		"--treasury-key-file=/etc/faucet/treasury/keys",
		"--refill-below=" + strconv.FormatInt(refillBelow, 10),
		"--refill-amount=" + strconv.FormatInt(refillAmount, 10),
	} {
		if !strings.Contains(args, want) {
			t.Fatalf("faucet args %q lack %s", args, want)
		}
	}
	raw, err := json.Marshal(dep)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bytes.ToLower(raw), []byte(strings.ToLower(treasury.Hex()))) {
		t.Fatal("the treasury's private key is in the Deployment")
	}
}

// refillLines collects the faucet's "treasury refill sent" log lines.
type refillLines struct {
	mu    sync.Mutex
	lines []string
}

func (r *refillLines) add(line string) {
	if strings.Contains(line, `"msg":"treasury refill sent"`) {
		r.mu.Lock()
		r.lines = append(r.lines, line)
		r.mu.Unlock()
	}
}

// txids maps the recipient of each logged refill to its txid.
func (r *refillLines) txids() (map[string]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for _, line := range r.lines {
		var rec struct{ Recipient, TxID string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("refill log line %q: %w", line, err)
		}
		if _, dup := out[rec.Recipient]; dup {
			return nil, fmt.Errorf("two refills of %s", rec.Recipient)
		}
		// Logs write txids as the API does (0x…); the node's
		// /v3/transaction/{txid} takes the bare hex.
		out[rec.Recipient] = strings.TrimPrefix(rec.TxID, "0x")
	}
	return out, nil
}

// checkRefills waits until the node has mined one refill of refillAmount
// from the treasury to each drained key, and decodes each refill as the
// node stores it: the treasury's signature, the key as recipient, the
// amount and the memo. The treasury paid exactly the refills and their fees.
func checkRefills(t *testing.T, ctx context.Context, dn *devnode.Node, nodeURL string, keys []*stacks.PrivateKey, treasury *stacks.PrivateKey, drained map[stacks.Address]uint64, log *refillLines) {
	t.Helper()
	poll(t, ctx, "the refills to be mined", 30*time.Second, func() (bool, error) {
		for _, k := range keys {
			bal, _ := dn.Account(k.TestnetAddress())
			want := drained[k.TestnetAddress()] + uint64(refillAmount)
			if bal > want {
				return false, fmt.Errorf("%s holds %d, more than %d", k.TestnetAddress(), bal, want)
			}
			if bal != want {
				return false, fmt.Errorf("%s holds %d, want %d", k.TestnetAddress(), bal, want)
			}
		}
		return true, nil
	})
	var txids map[string]string
	poll(t, ctx, "the faucet to log each refill", 10*time.Second, func() (bool, error) {
		var err error
		txids, err = log.txids()
		if err != nil {
			t.Fatal(err)
		}
		return len(txids) == len(keys), fmt.Errorf("%d refills logged", len(txids))
	})
	var fees uint64
	for _, k := range keys {
		addr := k.TestnetAddress()
		txid, ok := txids[addr.String()]
		if !ok {
			t.Fatalf("no refill of %s logged", addr)
		}
		resp, err := http.Get(nodeURL + "/v3/transaction/" + txid)
		if err != nil {
			t.Fatal(err)
		}
		var mined node.MinedTx
		err = json.NewDecoder(resp.Body).Decode(&mined)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || mined.BlockHeight == nil {
			t.Fatalf("refill %s on the node: %d %v %+v", txid, resp.StatusCode, err, mined)
		}
		raw, err := hex.DecodeString(mined.Tx)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := stacks.DecodeTransaction(raw)
		if err != nil {
			t.Fatalf("refill %s: %v", txid, err)
		}
		p := tx.Payload
		if tx.SenderAddress() != treasury.TestnetAddress() || p.Recipient.IsContract() || p.Recipient.Address != addr ||
			p.Amount != uint64(refillAmount) || p.Memo.String() != refillMemo {
			t.Fatalf("refill %s: %s → %s %d µSTX memo %q, want %s → %s %d µSTX memo %q", txid,
				tx.SenderAddress(), p.Recipient, p.Amount, p.Memo, treasury.TestnetAddress(), addr, refillAmount, refillMemo)
		}
		fees += tx.Auth.Fee
		t.Logf("refill mined in block %d: txid %s, %s → %s, %d µSTX, fee %d, memo %q; key balance %d → %d µSTX",
			*mined.BlockHeight, txid, tx.SenderAddress(), addr, p.Amount, tx.Auth.Fee, p.Memo, drained[addr], drained[addr]+p.Amount)
	}
	bal, nonce := dn.Account(treasury.TestnetAddress())
	if want := treasuryFunding - uint64(len(keys))*uint64(refillAmount) - fees; bal != want || nonce != uint64(len(keys)) {
		t.Fatalf("treasury holds %d µSTX at nonce %d, want %d at nonce %d: it sent more than the refills", bal, nonce, want, len(keys))
	}
}

// checkRefunded waits for Funded=True again after the refills, with a
// Normal event since the keys were drained, and for the treasury's
// address and node balance in status.funding.treasury.
func checkRefunded(t *testing.T, ctx context.Context, c client.Client, cfg *rest.Config, keys []*stacks.PrivateKey, dn *devnode.Node, treasury *stacks.PrivateKey, since time.Time) {
	t.Helper()
	fs := waitFunding(t, ctx, c, dn, keys, metav1.ConditionTrue, "Funded")
	poll(t, ctx, "status.funding.treasury", 30*time.Second, func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, fs); err != nil {
			return false, err
		}
		bal, _ := dn.Account(treasury.TestnetAddress())
		tr := fs.Status.Funding.Treasury
		return tr != nil && tr.Address == treasury.TestnetAddress().String() && uint64(tr.BalanceUSTX) == bal,
			fmt.Errorf("status.funding.treasury %+v, node: %s holds %d", tr, treasury.TestnetAddress(), bal)
	})
	tr := fs.Status.Funding.Treasury
	t.Logf("refilled: status.funding %s STX, %d drips left; treasury %s holds %d µSTX",
		fs.Status.Funding.BalanceSTX, fs.Status.Funding.DripsLeft, tr.Address, tr.BalanceUSTX)
	table := getTable(t, ctx, cfg)
	t.Logf("kubectl get fsrv:\n%s", table)
	if !strings.Contains(table, fs.Status.Funding.BalanceSTX) || !strings.Contains(table, strconv.FormatInt(fs.Status.Funding.DripsLeft, 10)) {
		t.Fatalf("the printer columns lack the refilled balance %s or drips left %d", fs.Status.Funding.BalanceSTX, fs.Status.Funding.DripsLeft)
	}
	waitEvent(t, ctx, c, corev1.EventTypeNormal, "Funded", since)
}

// checkFunding waits for status.funding to show the keys' balances (also
// through the printer columns, as `kubectl get fsrv` prints them), drains
// the keys on the node below the low threshold and waits for Funded=False
// reason Low and its Warning event.
func checkFunding(t *testing.T, ctx context.Context, c client.Client, cfg *rest.Config, keys []*stacks.PrivateKey, nodeURL string, dn *devnode.Node) {
	t.Helper()
	fs := waitFunding(t, ctx, c, dn, keys, metav1.ConditionTrue, "Funded")
	if len(fs.Status.Funding.Keys) != len(keys) || fs.Status.Funding.LastChecked == nil {
		t.Fatalf("status.funding %+v", fs.Status.Funding)
	}
	for i, k := range fs.Status.Funding.Keys {
		if k.Address != keys[i].TestnetAddress().String() {
			t.Fatalf("status.funding.keys[%d] = %s, want %s", i, k.Address, keys[i].TestnetAddress())
		}
	}
	table := getTable(t, ctx, cfg)
	t.Logf("kubectl get fsrv:\n%s", table)
	if !strings.Contains(table, "BALANCE") || !strings.Contains(table, "DRIPS LEFT") ||
		!strings.Contains(table, fs.Status.Funding.BalanceSTX) || !strings.Contains(table, strconv.FormatInt(fs.Status.Funding.DripsLeft, 10)) {
		t.Fatalf("the printer columns lack BALANCE or DRIPS LEFT, or their values %s / %d", fs.Status.Funding.BalanceSTX, fs.Status.Funding.DripsLeft)
	}

	// Drain: leave 10 drips on each key, 20 in all, below the default
	// low threshold of 100. The faucet's own drips are mined already, so
	// the confirmed nonce is the next one.
	sink := newKey(t).TestnetAddress()
	for _, k := range keys {
		bal, nonce := dn.Account(k.TestnetAddress())
		keep := 10*uint64(newAmount+1_000) + 500
		tx, err := stacks.NewTokenTransfer(stacks.TransferParams{
			Recipient: stacks.Principal{Address: sink}, Amount: bal - keep - 180, Nonce: nonce, Fee: 180,
		}, k)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(nodeURL+"/v2/transactions", "application/octet-stream", bytes.NewReader(tx.Serialize()))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("drain transfer: %d %s", resp.StatusCode, body)
		}
	}
	poll(t, ctx, "the drain to be mined", 30*time.Second, func() (bool, error) {
		_, drips := nodeBalances(dn, keys)
		return drips == 20, fmt.Errorf("%d drips left on the node", drips)
	})
	fs = waitFunding(t, ctx, c, dn, keys, metav1.ConditionFalse, "Low")
	t.Logf("drained: status.funding %s STX, %d drips left", fs.Status.Funding.BalanceSTX, fs.Status.Funding.DripsLeft)
	t.Logf("kubectl get fsrv:\n%s", getTable(t, ctx, cfg))
	for _, cond := range fs.Status.Conditions {
		if cond.Type == "Ready" && cond.Status != metav1.ConditionTrue {
			t.Fatalf("Ready=%s %s: a low faucet still serves", cond.Status, cond.Reason)
		}
	}
	waitEvent(t, ctx, c, corev1.EventTypeWarning, "Low", time.Time{})
}

// nodeBalances is what the node says the faucet's keys hold: µSTX in all
// and default drips left (the FaucetServer's drip amount is newAmount
// since step 7, plus the default fee.fallback of 1000 µSTX).
func nodeBalances(dn *devnode.Node, keys []*stacks.PrivateKey) (total, drips uint64) {
	for _, k := range keys {
		b, _ := dn.Account(k.TestnetAddress())
		total += b
		drips += b / uint64(newAmount+1_000)
	}
	return total, drips
}

// waitFunding waits until status.funding agrees with the node on the
// keys' balances and Funded is wantStatus with wantReason.
func waitFunding(t *testing.T, ctx context.Context, c client.Client, dn *devnode.Node, keys []*stacks.PrivateKey, wantStatus metav1.ConditionStatus, wantReason string) *faucetv1alpha1.FaucetServer {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	poll(t, ctx, "Funded="+string(wantStatus)+" "+wantReason, time.Minute, func() (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fs); err != nil {
			return false, err
		}
		total, drips := nodeBalances(dn, keys)
		f := fs.Status.Funding
		if f == nil || uint64(f.TotalUSTX) != total || uint64(f.DripsLeft) != drips {
			return false, fmt.Errorf("status.funding %+v, node total %d drips %d", f, total, drips)
		}
		for _, cond := range fs.Status.Conditions {
			if cond.Type == "Funded" {
				return cond.Status == wantStatus && cond.Reason == wantReason, fmt.Errorf("Funded=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		return false, errors.New("no Funded condition")
	})
	return &fs
}

// waitEvent waits for an event on the FaucetServer of the given type and
// reason, last seen at or after since.
func waitEvent(t *testing.T, ctx context.Context, c client.Client, eventType, reason string, since time.Time) {
	t.Helper()
	poll(t, ctx, "a "+eventType+" event with reason "+reason, 30*time.Second, func() (bool, error) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			seen := e.EventTime.Time
			if e.Series != nil && e.Series.LastObservedTime.After(seen) {
				seen = e.Series.LastObservedTime.Time
			}
			if e.Regarding.Kind == "FaucetServer" && e.Regarding.Name == name && e.Type == eventType && e.Reason == reason && !seen.Before(since) {
				t.Logf("event: %s %s: %s", e.Type, e.Reason, e.Note)
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none %s/%s since %s", len(list.Items), eventType, reason, since.Format(time.RFC3339Nano))
	})
}

// getTable lists the FaucetServers as `kubectl get fsrv` does: the API
// server renders the CRD's printer columns into a Table.
func getTable(t *testing.T, ctx context.Context, cfg *rest.Config) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimSuffix(cfg.Host, "/")+"/apis/faucet.stxfaucet.dev/v1alpha1/namespaces/"+namespace+"/faucetservers", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("table: %d %v", resp.StatusCode, err)
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 3, ' ', 0)
	var cells []string
	for _, col := range table.ColumnDefinitions {
		if col.Priority == 0 {
			cells = append(cells, strings.ToUpper(col.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
	for _, row := range table.Rows {
		cells = cells[:0]
		for i, cell := range row.Cells {
			if table.ColumnDefinitions[i].Priority == 0 {
				cells = append(cells, fmt.Sprint(cell))
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	_ = w.Flush()
	return b.String()
}
