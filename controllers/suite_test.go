package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode/btcdtest"
)

// The suite runs the real manager against an envtest control plane (a
// kube-apiserver and etcd, no kubelet or controller-manager): the test plays
// the Deployment controller by writing Deployment status itself.

// testImage is the manager's --server-image in the suite.
const testImage = "ghcr.io/stxfaucet/faucet-operator:suite"

var (
	k8sClient client.Client // direct, uncached: what a user's kubectl sees
	// fundingMonitor reads balances every 500 ms with two workers, each
	// node call bounded by a minute, so a node that holds its calls keeps
	// both busy for longer than any spec waits (a FaucetServer's
	// spec.node.timeout lowers the bound for its own calls).
	fundingMonitor *FundingMonitor
	testEnv        *envtest.Environment
	suiteCtx       context.Context
	stopSuite      context.CancelFunc
)

func TestControllers(t *testing.T) {
	startSuiteBtcd(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "FaucetServer controller suite")
}

var (
	// suiteBtcd is a regtest btcd with an address index for the BTC
	// specs, paying the blocks it mines to btcMiner; nil when there is
	// no btcd binary (btcdMissing says why).
	suiteBtcd   *btcdtest.Node
	btcMiner    *bitcoin.PrivateKey
	btcdMissing string
)

// startSuiteBtcd starts suiteBtcd, stopped at t's cleanup, once the suite
// is done. btcdtest needs the test's *testing.T, which Ginkgo's specs do
// not have, hence one node for the whole suite, started before it. A
// missing binary fails only the specs that need the node (see
// requireBtcd), not the whole suite.
func startSuiteBtcd(t *testing.T) {
	bin := os.Getenv(btcdtest.BinEnv)
	if bin == "" {
		bin = filepath.Join("..", "bin", "btcd")
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		btcdMissing = fmt.Sprintf("no btcd at %s (%s unset, or not a file): run `make btcd`, or set %s=1 to skip the BTC specs", bin, btcdtest.BinEnv, btcdtest.SkipEnv)
		return
	}
	miner, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	btcMiner = miner
	suiteBtcd = btcdtest.Start(t, miner.Address().String(), btcdtest.WithArgs("--addrindex"))
}

// requireBtcd fails the spec when the suite has no btcd, or skips it with
// FAUCET_SKIP_BTCD=1, as btcdtest does for a plain test.
func requireBtcd() *btcdtest.Node {
	GinkgoHelper()
	if suiteBtcd == nil {
		if os.Getenv(btcdtest.SkipEnv) == "1" {
			Skip(btcdMissing)
		}
		Fail(btcdMissing)
	}
	return suiteBtcd
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	suiteCtx, stopSuite = context.WithCancel(context.Background())

	assets := envtestAssets()
	// Fail, not skip: a suite that silently skips is a suite that never runs.
	Expect(assets).NotTo(BeEmpty(), "envtest binaries not found: set KUBEBUILDER_ASSETS, or build them with hack/envtest/build.sh (make envtest)")

	By("starting the envtest control plane from " + assets)
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(faucetv1alpha1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	By("starting the manager")
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{ByObject: CacheByObject()},
		Client:                 client.Options{Cache: ClientCacheOptions()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	Expect(err).NotTo(HaveOccurred())
	fundingMonitor = &FundingMonitor{Interval: 500 * time.Millisecond, Workers: 2, CallTimeout: time.Minute, BTCTimeout: 2 * time.Second}
	r := &FaucetServerReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorder("faucet-operator"),
		DefaultImage: testImage,
		Funding:      fundingMonitor,
	}
	Expect(r.SetupWithManager(suiteCtx, mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopSuite != nil {
		stopSuite()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// envtestAssets is $KUBEBUILDER_ASSETS, else the newest bin/k8s/<version>
// holding a kube-apiserver (what hack/envtest/build.sh writes), so the suite
// also runs from an IDE or a bare `go test`.
func envtestAssets() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	base := filepath.Join("..", "bin", "k8s")
	entries, err := os.ReadDir(base)
	if err != nil {
		return ""
	}
	var dirs []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(base, e.Name(), "kube-apiserver")); e.IsDir() && err == nil {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) == 0 {
		return ""
	}
	slices.SortFunc(dirs, compareVersions)
	dir, err := filepath.Abs(filepath.Join(base, dirs[len(dirs)-1]))
	if err != nil {
		return ""
	}
	return dir
}

// compareVersions orders "1.9.0" before "1.37.0".
func compareVersions(a, b string) int {
	parse := func(s string) []int {
		var n []int
		for part := range strings.SplitSeq(s, ".") {
			v, _ := strconv.Atoi(part)
			n = append(n, v)
		}
		return n
	}
	return slices.Compare(parse(a), parse(b))
}
