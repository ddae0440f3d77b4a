package controllers

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// scaleCount is how many FaucetServers BenchmarkScale200 creates at once.
const scaleCount = 200

// BenchmarkScale200 creates 200 FaucetServers at once against an envtest
// control plane, with the manager as in production (the default funding
// interval, one devnode serving every balance), plays the Deployment
// controller, and waits until every FaucetServer is in its steady state:
// Ready=True, its generation observed, Funded=True. It reports the wall
// time, reconciles per FaucetServer (controller-runtime's
// controller_runtime_reconcile_total) and the memory of this process, which
// runs the manager (the API server and etcd are processes of their own).
// Run it with
//
//	KUBEBUILDER_ASSETS=$(hack/envtest/build.sh) go test -run '^$' -bench BenchmarkScale200 ./controllers/
//
// The goal is at most 30 s and 80 MB.
func BenchmarkScale200(b *testing.B) {
	assets := envtestAssets()
	if assets == "" {
		b.Skip("envtest binaries not found: set KUBEBUILDER_ASSETS or run hack/envtest/build.sh")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctrl.SetLogger(logr.Discard())

	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	if err := faucetv1alpha1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}

	key, err := stacks.GeneratePrivateKey()
	if err != nil {
		b.Fatal(err)
	}
	dn := devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{key.TestnetAddress(): 1_000_000 * 1_000_000}})
	node := httptest.NewServer(dn.Handler())
	defer node.Close()

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{ByObject: CacheByObject()},
		Client:                 client.Options{Cache: ClientCacheOptions()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The controller suite may run in this process too.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		b.Fatal(err)
	}
	r := &FaucetServerReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorder("faucet-operator"),
		DefaultImage: testImage,
		Funding:      &FundingMonitor{}, // production defaults: 1m, 8 workers
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		b.Fatal(err)
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		b.Fatal("cache did not sync")
	}

	var wall time.Duration
	var reconcilesSteady, reconcilesSettled float64
	b.ResetTimer()
	for i := range b.N {
		ns := fmt.Sprintf("scale-%d", i)
		b.StopTimer()
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		if err := c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "faucet-keys"},
			Data:       map[string][]byte{"keys": []byte(key.Hex())},
		}); err != nil {
			b.Fatal(err)
		}
		before := reconcileTotal(b)
		b.StartTimer()

		start := time.Now()
		roundCtx, stopRound := context.WithCancel(ctx)
		var kubelet sync.WaitGroup
		kubelet.Go(func() { playDeploymentController(roundCtx, c, ns) })
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for j := range scaleCount {
			g.Go(func() error {
				fs := &faucetv1alpha1.FaucetServer{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("faucet-%03d", j)},
					Spec: faucetv1alpha1.FaucetServerSpec{
						Node:         faucetv1alpha1.NodeSpec{URL: node.URL},
						KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
					},
				}
				return c.Create(gctx, fs)
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		if err := waitSteady(ctx, c, ns, 5*time.Minute); err != nil {
			b.Fatal(err)
		}
		wall = time.Since(start)
		b.StopTimer()
		reconcilesSteady = (reconcileTotal(b) - before) / scaleCount
		// Settle: whatever still arrives (child events, late funding
		// reads) counts too; a steady state should be quiet.
		time.Sleep(3 * time.Second)
		reconcilesSettled = (reconcileTotal(b) - before) / scaleCount
		stopRound()
		kubelet.Wait()
		b.StartTimer()
	}
	b.StopTimer()

	var ms goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&ms)
	rss := vmRSS()
	b.ReportMetric(wall.Seconds(), "s/200fsrv")
	b.ReportMetric(reconcilesSteady, "reconciles/fsrv")
	b.ReportMetric(reconcilesSettled, "reconciles/fsrv-settled")
	b.ReportMetric(float64(rss)/(1<<20), "MB-RSS")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MB-heap")
	b.Logf("%d FaucetServers steady in %s; %.2f reconciles each (%.2f after 3s more); process RSS %.1f MB (manager, test client, devnode; not the API server or etcd), Go heap in use %.1f MB",
		scaleCount, wall.Round(time.Millisecond), reconcilesSteady, reconcilesSettled, float64(rss)/(1<<20), float64(ms.HeapInuse)/(1<<20))

	cancel()
	if err := <-mgrDone; err != nil {
		b.Error(err)
	}
}

// playDeploymentController marks every Deployment in ns available at its
// current generation, as kube-controller-manager (absent in envtest) would.
func playDeploymentController(ctx context.Context, c client.Client, ns string) {
	for ctx.Err() == nil {
		var list appsv1.DeploymentList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err == nil {
			for i := range list.Items {
				d := &list.Items[i]
				if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 1 {
					continue
				}
				d.Status = appsv1.DeploymentStatus{
					ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
					Conditions: []appsv1.DeploymentCondition{{
						Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
					}},
				}
				_ = c.Status().Update(ctx, d)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitSteady waits until every FaucetServer in ns is Ready, observed and
// Funded.
func waitSteady(ctx context.Context, c client.Client, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var list faucetv1alpha1.FaucetServerList
		steady := 0
		if err := c.List(ctx, &list, client.InNamespace(ns)); err == nil {
			for _, fs := range list.Items {
				if fs.Status.ObservedGeneration == fs.Generation &&
					meta.IsStatusConditionTrue(fs.Status.Conditions, faucetv1alpha1.ConditionReady) &&
					meta.IsStatusConditionTrue(fs.Status.Conditions, faucetv1alpha1.ConditionFunded) {
					steady++
				}
			}
		}
		if steady == scaleCount {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d FaucetServers steady after %s", steady, scaleCount, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reconcileTotal is controller_runtime_reconcile_total of the faucetserver
// controller, all results.
func reconcileTotal(b *testing.B) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "faucetserver" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// vmRSS is this process's resident set size in bytes, from
// /proc/self/status; 0 where there is none.
func vmRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
