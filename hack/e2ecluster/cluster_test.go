//go:build e2ecluster

// Package e2ecluster walks the user's path on a real single-node cluster
// (hack/cluster/cluster.sh): our image imported into containerd, `helm
// install` of the chart, the manager and the faucet as pods on a kubelet, a
// devnode pod behind a Service, the embedded store on a PersistentVolume,
// drips through the faucet's Service with the official JavaScript client and
// curl, a pod killed mid-burst, a rotated key, a `helm upgrade` under load,
// metrics scraped from inside the cluster, and an uninstall that leaves
// nothing behind.
//
// Run it with `make e2e-cluster`, which brings the cluster up, runs this
// test inside the cluster's network namespace, and tears everything down.
package e2ecluster

import (
	"bytes"
	"context"
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
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/hack/e2eclient"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

const (
	release    = "faucet-operator"
	operatorNS = "faucet-system"
	// scraperSA is the ServiceAccount of the scrape pod.
	scraperSA    = "metrics-scraper"
	ns           = "faucet-e2e"
	fsName       = "testnet"
	keySecret    = "faucet-keys"
	devnodePort  = 20443
	dripUSTX     = 500_000_000                   // the default drip, 500 STX
	keyFunding   = uint64(1_000_000) * 1_000_000 // 1M STX per key at genesis
	perAddress   = 5                             // the default per-address limit, 5 per 5m
	burstBefore  = 15                            // drips answered before the pod is deleted
	burstAfter   = 15                            // and after its replacement serves
	maxBurst     = 600                           // drips the burst sends at most
	burstWorkers = 6
	// burstPace is each worker's pause after an answered drip: about 30
	// drips a second, so the burst outlasts the old pod's drain and its
	// replacement's start (a lame duck too, were one set) within maxBurst.
	burstPace     = 200 * time.Millisecond
	restrictedUID = 65532
	// fsPG is the FaucetServer of two replicas on Postgres.
	fsPG = "testnet-pg"
	// nodeIP is the cluster node's address (hack/cluster/cluster.sh), where
	// the test's Postgres listens; podNetwork is where pods connect from.
	nodeIP     = "10.250.0.1"
	podNetwork = "10.244.0.0/16"
)

// env is what `make e2e-cluster` passes in.
type env struct {
	repo, kubeconfig, kubectl, helm, image, toolsImage, state string
}

func loadEnv(t *testing.T) env {
	t.Helper()
	e := env{
		repo: os.Getenv("E2E_REPO"), kubeconfig: os.Getenv("KUBECONFIG"), kubectl: os.Getenv("E2E_KUBECTL"),
		helm: os.Getenv("E2E_HELM"), image: os.Getenv("E2E_IMAGE"), toolsImage: os.Getenv("E2E_TOOLS_IMAGE"),
		state: os.Getenv("E2E_STATE"),
	}
	if e.repo == "" || e.kubeconfig == "" || e.kubectl == "" || e.helm == "" || e.image == "" || e.toolsImage == "" || e.state == "" {
		t.Fatal("E2E_REPO, KUBECONFIG, E2E_KUBECTL, E2E_HELM, E2E_IMAGE, E2E_TOOLS_IMAGE and E2E_STATE are set by `make e2e-cluster`")
	}
	return e
}

func TestUserPathOnARealCluster(t *testing.T) {
	e := loadEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := newClient(t, e.kubeconfig)
	keyA, keyB := newKey(t), newKey(t)
	// The Postgres faucet's keys: two per replica. The replicas spread the
	// keys by quota over the live ones, a terminating pod and a surge pod
	// included; with one key each, a rollout's surge can leave a serving
	// replica without a key for a moment, and its drips answer "busy".
	// One key per replica: a rollout's surge pod must get a key as an old
	// one drains, with no drip answered busy.
	keysPG := []*stacks.PrivateKey{newKey(t), newKey(t)}

	t.Run("helm install: the manager runs hardened with the chart's RBAC", func(t *testing.T) {
		e.run(t, ctx, e.helm, "install", release, filepath.Join(e.repo, "charts", "faucet-operator"),
			"--namespace", operatorNS, "--create-namespace", "--wait", "--timeout", "3m",
			// Funding is read every 5s instead of every minute, so the
			// printer columns fill in while the test waits.
			"--set-json", `extraArgs=["--funding-interval=5s"]`,
			// The scrape pod's ServiceAccount may read the manager's
			// metrics (HTTPS, authorized through the API server).
			"--set-json", `metrics.readerSubjects=[{"kind":"ServiceAccount","name":"`+scraperSA+`","namespace":"`+ns+`"}]`)
		pod := onlyPod(t, ctx, c, operatorNS, "app.kubernetes.io/instance="+release)
		checkManagerPod(t, e, pod)
		checkHardenedProcess(t, pod, "manager")
		sa := "system:serviceaccount:" + operatorNS + ":" + pod.Spec.ServiceAccountName
		for _, verb := range [][]string{{"create", "clusterrolebindings"}, {"create", "pods"}, {"delete", "nodes"}, {"*", "*"}} {
			// can-i answers "no" with exit status 1.
			out, _ := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", e.kubeconfig, "auth", "can-i", verb[0], verb[1], "--as", sa).Output()
			if strings.TrimSpace(string(out)) != "no" {
				t.Errorf("the manager's ServiceAccount can %s %s (%q): it should hold the chart's rules only", verb[0], verb[1], out)
			}
		}
	})

	var nodeURL string
	t.Run("a devnode runs in the cluster behind a Service", func(t *testing.T) {
		// The fault suite's keys too: TestFaultsOnARealCluster reuses this devnode.
		funded := append([]stacks.Address{keyA.TestnetAddress(), keyB.TestnetAddress()}, addressesOf(keysPG)...)
		e.apply(t, ctx, devnodeManifest(e.image, slices.Concat(funded, addressesOf(faultKeys()), addressesOf(backupKeys()))...))
		waitAvailable(t, ctx, c, ns, "devnode", 2*time.Minute)
		nodeURL = "http://" + serviceAddr(t, ctx, c, ns, "devnode")
		// The Service answers once kube-proxy has programmed its endpoint.
		poll(t, ctx, "the devnode through its Service", time.Minute, func() error {
			bal, err := readBalance(nodeURL, keyA.TestnetAddress())
			if err == nil && bal != keyFunding {
				t.Fatalf("faucet key balance %d on the devnode, want %d", bal, keyFunding)
			}
			return err
		})
	})

	t.Run("the in-cluster devnet sample: kubectl apply -k, Ready, STX, sBTC and BTC drips confirmed, delete -k leaves nothing", func(t *testing.T) {
		devnetSampleStep(t, e, ctx, c)
	})

	t.Run("a FaucetServer whose image cannot be pulled says so in Ready within a minute, naming the image", func(t *testing.T) {
		imagePullFailureStep(t, ctx, e, c, nodeURL)
	})

	t.Run("a backup taken under a drip burst, restored into a new pod: limits carried over, every drip paid once", func(t *testing.T) {
		backupRestoreStep(t, ctx, e, c, nodeURL)
	})

	var faucetURL string
	t.Run("a FaucetServer on a PersistentVolume becomes Ready and shows its funding", func(t *testing.T) {
		staticVolume(t, ctx, e, fsName+"-data", ns, fsName+"-data", filepath.Join(e.state, "volumes", fsName+"-data"))
		e.apply(t, ctx, keySecretManifest(keyA))
		e.apply(t, ctx, faucetServerManifest(nodeURL))
		fs := waitReady(t, ctx, c, 3*time.Minute)
		if fs.Status.URL == "" {
			t.Fatal("status.url is empty")
		}
		faucetURL = "http://" + serviceAddr(t, ctx, c, ns, fsName)
		waitServed(t, ctx, faucetURL)
		checkPVC(t, ctx, c)
		pod := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)
		checkHardenedProcess(t, pod, "serve")

		fs = waitFunding(t, ctx, c, 90*time.Second)
		table := e.kubectlOut(t, ctx, "get", "fsrv", "-n", ns)
		t.Logf("kubectl get fsrv:\n%s", table)
		for _, want := range []string{"URL", "BALANCE", "DRIPS LEFT", "ASSETS", fs.Status.URL, fs.Status.Funding.BalanceSTX, strconv.FormatInt(fs.Status.Funding.DripsLeft, 10)} {
			if !strings.Contains(table, want) {
				t.Errorf("kubectl get fsrv lacks %q", want)
			}
		}
		if fs.Status.Funding.BalanceSTX != "1000000.00" {
			t.Errorf("balance %q, want 1000000 STX (the key's genesis funding)", fs.Status.Funding.BalanceSTX)
		}
	})

	t.Run("drips through the Service: the official client (v1) and curl (v3), mined exactly", func(t *testing.T) {
		a, b := newKey(t).TestnetAddress(), newKey(t).TestnetAddress()
		res := officialClientDrip(t, ctx, e.repo, faucetURL, a)
		if res.Sender != keyA.TestnetAddress().String() {
			t.Errorf("drip sent by %s, want the faucet key %s", res.Sender, keyA.TestnetAddress())
		}
		out := e.run(t, ctx, "curl", "-sS", "--fail-with-body", "-X", "POST", "-H", "Content-Type: application/json",
			"-d", fmt.Sprintf(`{"address":%q}`, b.String()), faucetURL+"/extended/v3/faucets/stx")
		var v3 struct {
			Transaction struct {
				TxID  string `json:"tx_id"`
				Chain string `json:"chain"`
			} `json:"transaction"`
			Amount struct {
				STX string `json:"stx"`
			} `json:"amount"`
		}
		if err := json.Unmarshal([]byte(out), &v3); err != nil || !strings.HasPrefix(v3.Transaction.TxID, "0x") || v3.Amount.STX != strconv.Itoa(dripUSTX) {
			t.Fatalf("v3 answer %s (%v)", out, err)
		}
		waitBalances(t, ctx, nodeURL, map[stacks.Address]uint64{a: dripUSTX, b: dripUSTX}, nil, time.Minute)
	})

	t.Run("the faucet pod deleted mid-burst: every answered drip mined once, the limit holds", func(t *testing.T) {
		limited := newKey(t).TestnetAddress()
		for i := 0; i < perAddress-2; i++ {
			if code, body := drip(ctx, faucetURL, limited); code != http.StatusOK {
				t.Fatalf("drip %d to %s before the burst: %d %s", i+1, limited, code, body)
			}
		}
		old := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)

		// Workers drip to fresh addresses until the faucet has answered
		// burstAfter drips after the restart (bounded by maxBurst).
		type shot struct {
			to   stacks.Address
			code int
			at   time.Time
		}
		var mu sync.Mutex
		var shots []shot
		var answered, answeredAfter atomic.Int32
		var restarted atomic.Bool
		quarter := make(chan struct{}) // closed once burstBefore drips are answered
		var closeOnce sync.Once
		stop := make(chan struct{})
		var stopOnce sync.Once
		var wg sync.WaitGroup
		for w := 0; w < burstWorkers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					to := newKey(t).TestnetAddress()
					code, _ := drip(ctx, faucetURL, to)
					mu.Lock()
					shots = append(shots, shot{to, code, time.Now()})
					n := len(shots)
					mu.Unlock()
					if n >= maxBurst {
						stopOnce.Do(func() { close(stop) })
					}
					if code != http.StatusOK {
						time.Sleep(200 * time.Millisecond) // no endpoint: do not spin
						continue
					}
					if answered.Add(1) >= burstBefore {
						closeOnce.Do(func() { close(quarter) })
					}
					if restarted.Load() && answeredAfter.Add(1) >= burstAfter {
						stopOnce.Do(func() { close(stop) })
					}
					time.Sleep(burstPace)
				}
			}()
		}
		select {
		case <-quarter:
		case <-time.After(time.Minute):
			t.Fatalf("only %d of the burst's drips answered 200 in a minute", answered.Load())
		}
		// The old pod's log, to the end of its shutdown.
		oldLog := followLog(ctx, e, ns, old.Name)
		start := time.Now()
		e.run(t, ctx, e.kubectl, "delete", "pod", "-n", ns, old.Name, "--wait=false")
		pod := waitNewPod(t, ctx, c, old.UID, 3*time.Minute)
		restarted.Store(true)
		wg.Wait()
		t.Logf("replacement pod %s listed alone and Ready %s after the delete", pod.Name, time.Since(start).Round(time.Millisecond))
		t.Logf("the old pod's shutdown:\n%s", grepLines(oldLog(), "shutting down", "stopped", "exit", "signal", "error"))
		t.Logf("the new pod's start:\n%s", grepLines(e.kubectlOut(t, ctx, "logs", "-n", ns, pod.Name), "store", "starting", "ready"))
		if !usesClaim(pod, fsName+"-data") {
			t.Fatalf("the new pod does not mount the claim %s-data", fsName)
		}

		ok := map[stacks.Address]uint64{}
		unknown := map[stacks.Address]bool{}
		tally := map[int]int{}
		var okAt []time.Time
		for _, s := range shots {
			tally[s.code]++
			if s.code != http.StatusOK {
				unknown[s.to] = true
				continue
			}
			ok[s.to] = dripUSTX
			okAt = append(okAt, s.at)
		}
		// The outage: the longest time between two answered drips.
		slices.SortFunc(okAt, func(a, b time.Time) int { return a.Compare(b) })
		var outage time.Duration
		for i := 1; i < len(okAt); i++ {
			outage = max(outage, okAt[i].Sub(okAt[i-1]))
		}
		t.Logf("burst of %d drips across the delete: answers %v; the longest time without an answered drip: %s",
			len(shots), tally, outage.Round(time.Millisecond))
		if answeredAfter.Load() < burstAfter {
			t.Fatalf("only %d drips answered 200 after the restart", answeredAfter.Load())
		}
		waitBalances(t, ctx, nodeURL, ok, unknown, 2*time.Minute)

		// The store survived on the volume: the address keeps its count.
		for i := perAddress - 2; i < perAddress; i++ {
			if code, body := drip(ctx, faucetURL, limited); code != http.StatusOK {
				t.Fatalf("drip %d to %s after the restart: %d %s", i+1, limited, code, body)
			}
		}
		if code, body := drip(ctx, faucetURL, limited); code != http.StatusTooManyRequests {
			t.Fatalf("drip %d to %s: %d %s; want 429, the limit of %d counted across the restart", perAddress+1, limited, code, body, perAddress)
		}
	})

	t.Run("two node URLs: the faucet keeps dripping while one node's pod is deleted", func(t *testing.T) {
		e.apply(t, ctx, devnodeFrontEndManifest(e.image, nodeURL))
		waitPodReady(t, ctx, c, "devnode-2", 2*time.Minute)
		secondURL := "http://" + serviceAddr(t, ctx, c, ns, "devnode-2")
		old := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)
		// The second node first: reads prefer it, so its loss is a failover.
		e.apply(t, ctx, faucetServerManifest(secondURL, nodeURL))
		waitNewPod(t, ctx, c, old.UID, 3*time.Minute)
		waitServed(t, ctx, faucetURL)
		poll(t, ctx, "the FaucetServer to show both nodes", 90*time.Second, func() error {
			var fs faucetv1alpha1.FaucetServer
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fsName}, &fs); err != nil {
				return err
			}
			if fs.Status.NodesSummary != "2/2" {
				return fmt.Errorf("status.nodesSummary %q", fs.Status.NodesSummary)
			}
			return nil
		})

		// A burst at a steady pace; the second node's pod is deleted once a
		// third of it is answered. No request may fail: reads and
		// broadcasts go to the other node.
		const drips, deleteAfter, workers = 90, 30, 3
		type shot struct {
			to   stacks.Address
			code int
			body string
		}
		shots := make([]shot, drips)
		next := atomic.Int32{}
		var answered atomic.Int32
		deleted := make(chan struct{})
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= drips {
						return
					}
					to := newKey(t).TestnetAddress()
					code, body := drip(ctx, faucetURL, to)
					shots[i] = shot{to, code, body}
					if answered.Add(1) == deleteAfter {
						close(deleted)
					}
					time.Sleep(burstPace)
				}
			})
		}
		<-deleted
		e.run(t, ctx, e.kubectl, "delete", "pod", "-n", ns, "devnode-2", "--wait=false")
		wg.Wait()
		ok := map[stacks.Address]uint64{}
		for i, s := range shots {
			if s.code != http.StatusOK {
				t.Errorf("drip %d: %d %s", i, s.code, s.body)
			}
			ok[s.to] = dripUSTX
		}
		if t.Failed() {
			// What the pods saw of their keys, for the drips that failed.
			for _, p := range podsOf(ctx, c, fsPG) {
				logs := e.run(t, ctx, e.kubectl, "logs", "-n", ns, p.Name)
				t.Logf("%s, key ownership and failures:\n%s", p.Name, grepLines(logs, `"key `, "handing", "drip failed", "ownership", "not ready", "faucet ready", "released"))
			}
			t.FailNow()
		}
		waitBalances(t, ctx, nodeURL, ok, nil, 2*time.Minute)
		t.Logf("%d drips, the second node's pod deleted after %d: every one answered 200 and mined once", drips, deleteAfter)
		faucetPod := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName).Name
		if logs := grepLines(e.kubectlOut(t, ctx, "logs", "-n", ns, faucetPod), "left the rotation"); !strings.Contains(logs, secondURL) {
			t.Errorf("the faucet did not log the second node leaving the rotation:\n%s", logs)
		}

		// Back, the node rejoins the rotation.
		poll(t, ctx, "the second node's pod gone", time.Minute, func() error {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "devnode-2"}, &corev1.Pod{})
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			}
			return errors.New("still there")
		})
		e.apply(t, ctx, devnodeFrontEndManifest(e.image, nodeURL))
		waitPodReady(t, ctx, c, "devnode-2", 2*time.Minute)
		poll(t, ctx, "the second node back in rotation", 2*time.Minute, func() error {
			var info struct {
				Nodes []struct {
					URL, State string
				} `json:"nodes"`
			}
			resp, err := httpClient.Get(faucetURL + "/faucet/v1/info") //nolint:noctx // bounded by httpClient's timeout
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
				return err
			}
			if len(info.Nodes) != 2 || info.Nodes[0].State != "ready" || info.Nodes[1].State != "ready" {
				return fmt.Errorf("nodes %+v", info.Nodes)
			}
			return nil
		})
		nodeLog := grepLines(e.kubectlOut(t, ctx, "logs", "-n", ns, faucetPod), "rotation")
		if !strings.Contains(nodeLog, "rejoined the rotation") {
			t.Errorf("the faucet did not log the second node rejoining the rotation")
		}
		t.Logf("the faucet's log of its nodes:\n%s", nodeLog)
	})

	t.Run("replicas: 2 on Postgres: a pod deleted mid-burst and a rollout under load, every request answered", func(t *testing.T) {
		// A real Postgres on the node's address, which pods reach.
		pg := pgtest.StartOn(t, nodeIP, podNetwork, nodeIP+"/32")
		// Gone before Postgres stops (cleanups run last first), even when
		// the step fails, so that the steps after it start clean.
		t.Cleanup(func() {
			e.run(t, ctx, e.kubectl, "delete", "faucetserver", "-n", ns, fsPG, "--ignore-not-found", "--wait=true", "--timeout=2m")
			e.run(t, ctx, e.kubectl, "delete", "secret", "-n", ns, fsPG+"-store", fsPG+"-keys", "--ignore-not-found", "--wait=true")
			poll(t, ctx, "every object of the Postgres faucet gone", 2*time.Minute, func() error {
				out := e.kubectlOut(t, ctx, "get", "deploy,rs,pods,svc,pdb,secrets", "-n", ns, "-o", "name")
				if left := grepLines(out, fsPG); left != "" {
					return errors.New(left)
				}
				return nil
			})
		})
		e.apply(t, ctx, postgresFaucetServerManifest(fsPG, pg.CreateDB(t), keysPG, nodeURL, 100_000))
		waitReplicas(t, ctx, c, fsPG, 2, 3*time.Minute)
		pgURL := "http://" + serviceAddr(t, ctx, c, ns, fsPG)
		waitServed(t, ctx, pgURL)

		// Workers drip without retrying (a connection error is a failure),
		// through the delete of one pod and then a rollout of both.
		type shot struct {
			to   stacks.Address
			code int
			body string
			at   time.Time
		}
		var mu sync.Mutex
		var shots []shot
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range burstWorkers {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					to := newKey(t).TestnetAddress()
					code, body := dripWith(ctx, plainClient, pgURL, to)
					mu.Lock()
					shots = append(shots, shot{to, code, body, time.Now()})
					mu.Unlock()
					time.Sleep(burstPace)
				}
			})
		}
		answered := func() int { mu.Lock(); defer mu.Unlock(); return len(shots) }
		poll(t, ctx, "the burst under way", time.Minute, func() error {
			if n := answered(); n < burstBefore {
				return fmt.Errorf("%d answered", n)
			}
			return nil
		})
		victim := onlyPodsOf(t, ctx, c, fsPG)[0]
		start := time.Now()
		e.run(t, ctx, e.kubectl, "delete", "pod", "-n", ns, victim.Name, "--wait=false")
		waitPodGone(t, ctx, c, victim, 2*time.Minute)
		waitReplicas(t, ctx, c, fsPG, 2, 3*time.Minute)
		t.Logf("pod %s deleted; two pods Ready again %s later", victim.Name, time.Since(start).Round(time.Millisecond))

		// A rollout: a changed setting rolls both pods, one at a time.
		before := onlyPodsOf(t, ctx, c, fsPG)
		start = time.Now()
		e.apply(t, ctx, postgresFaucetServerManifest(fsPG, "", keysPG, nodeURL, 100_001))
		for _, p := range before {
			waitPodGone(t, ctx, c, p, 3*time.Minute)
		}
		waitReplicas(t, ctx, c, fsPG, 2, 3*time.Minute)
		t.Logf("rollout of both pods done in %s", time.Since(start).Round(time.Millisecond))
		time.Sleep(3 * time.Second) // a few drips on the new pods
		close(stop)
		wg.Wait()

		ok := map[stacks.Address]uint64{}
		tally := map[int]int{}
		var okAt []time.Time
		for _, s := range shots {
			tally[s.code]++
			if s.code != http.StatusOK {
				t.Errorf("drip to %s: %d %s", s.to, s.code, s.body)
				continue
			}
			ok[s.to] = dripUSTX
			okAt = append(okAt, s.at)
		}
		var gap time.Duration
		for i := 1; i < len(okAt); i++ {
			gap = max(gap, okAt[i].Sub(okAt[i-1]))
		}
		t.Logf("burst of %d drips across a pod delete and a rollout, 2 replicas on Postgres with one key each: answers %v (0 busy, 0 connection errors wanted); the longest time without an answered drip: %s",
			len(shots), tally, gap.Round(time.Millisecond))
		if t.Failed() {
			// What the pods saw of their keys, for the drips that failed.
			for _, p := range podsOf(ctx, c, fsPG) {
				logs := e.run(t, ctx, e.kubectl, "logs", "-n", ns, p.Name)
				t.Logf("%s, key ownership and failures:\n%s", p.Name, grepLines(logs, `"key `, "handing", "drip failed", "ownership", "not ready", "faucet ready", "released"))
			}
			t.FailNow()
		}
		waitBalances(t, ctx, nodeURL, ok, nil, 2*time.Minute)

	})

	t.Run("rotating the key Secret rolls the pod and the new key serves", func(t *testing.T) {
		old := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)
		e.apply(t, ctx, keySecretManifest(keyB))
		waitNewPod(t, ctx, c, old.UID, 3*time.Minute)
		waitReady(t, ctx, c, 2*time.Minute)
		waitServed(t, ctx, faucetURL)
		to := newKey(t).TestnetAddress()
		res := officialClientDrip(t, ctx, e.repo, faucetURL, to)
		if res.Sender != keyB.TestnetAddress().String() {
			t.Fatalf("drip after the rotation sent by %s, want the new key %s", res.Sender, keyB.TestnetAddress())
		}
		waitBalances(t, ctx, nodeURL, map[stacks.Address]uint64{to: dripUSTX}, nil, time.Minute)
	})

	t.Run("spec.disabledAssets turns STX off and on in the running pod; an agent drips over MCP", func(t *testing.T) {
		pod := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)
		eligible := func(want bool) func() error {
			return func() error {
				code, body := get(ctx, faucetURL+"/faucet/v1/eligibility?asset=stx&address="+newKey(t).TestnetAddress().String())
				if code != http.StatusOK || strings.Contains(body, `"eligible":true`) != want {
					return fmt.Errorf("eligibility: %d %s", code, body)
				}
				return nil
			}
		}
		for _, step := range []struct {
			patch string
			on    bool
		}{{`{"spec":{"disabledAssets":["stx"]}}`, false}, {`{"spec":{"disabledAssets":null}}`, true}} {
			start := time.Now()
			e.kubectlOut(t, ctx, "-n", ns, "patch", "faucetserver", fsName, "--type", "merge", "-p", step.patch)
			poll(t, ctx, fmt.Sprintf("STX on=%v in the running pod", step.on), 2*time.Minute, eligible(step.on))
			t.Logf("%s: applied by the running pod in %s", step.patch, time.Since(start).Round(100*time.Millisecond))
			code, body := drip(ctx, faucetURL, newKey(t).TestnetAddress())
			if step.on != (code == http.StatusOK) || (!step.on && !strings.Contains(body, `"error":"STX faucet is not available"`)) {
				t.Fatalf("a drip with STX on=%v: %d %s", step.on, code, body)
			}
		}
		now := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)
		if now.UID != pod.UID || now.Status.ContainerStatuses[0].RestartCount != pod.Status.ContainerStatuses[0].RestartCount {
			t.Fatalf("switching STX replaced or restarted the pod (%s → %s)", pod.UID, now.UID)
		}
		// An agent's drip: one JSON-RPC call to the stateless MCP endpoint.
		to := newKey(t).TestnetAddress()
		out := e.run(t, ctx, "curl", "-sS", "--fail-with-body", "-X", "POST", "-H", "Content-Type: application/json",
			"-H", "Accept: application/json, text/event-stream",
			"-d", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"request_drip","arguments":{"asset":"stx","address":%q}}}`, to.String()),
			faucetURL+"/mcp")
		if !strings.Contains(out, `"chain":"stacks"`) || strings.Contains(out, `"isError":true`) {
			t.Fatalf("MCP request_drip: %s", out)
		}
		waitBalances(t, ctx, nodeURL, map[stacks.Address]uint64{to: dripUSTX}, nil, time.Minute)
	})

	t.Run("sign-in through an OpenID provider in a pod: a signed-in drip is the tier's; the budget and the runway show", func(t *testing.T) {
		checkSignInOnTheCluster(t, ctx, e, c, faucetURL, nodeURL)
	})

	t.Run("helm upgrade with changed values: the faucet keeps answering", func(t *testing.T) {
		fp := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)
		mp := onlyPod(t, ctx, c, operatorNS, "app.kubernetes.io/instance="+release)

		stop := make(chan struct{})
		type answer struct {
			code int
			body string
			at   time.Time
		}
		var mu sync.Mutex
		var answers []answer
		var loop sync.WaitGroup
		loop.Add(1)
		go func() {
			defer loop.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(150 * time.Millisecond):
				}
				code, body := drip(ctx, faucetURL, newKey(t).TestnetAddress())
				mu.Lock()
				answers = append(answers, answer{code, body, time.Now()})
				mu.Unlock()
			}
		}()
		start := time.Now()
		e.run(t, ctx, e.helm, "upgrade", release, filepath.Join(e.repo, "charts", "faucet-operator"),
			"--namespace", operatorNS, "--reuse-values", "--set", "logLevel=debug", "--wait", "--timeout", "3m")
		// The new manager reconciles every FaucetServer once it leads.
		newMP := waitNewPodIn(t, ctx, c, operatorNS, "app.kubernetes.io/instance="+release, mp.UID, 2*time.Minute)
		time.Sleep(5 * time.Second)
		close(stop)
		loop.Wait()
		rolled := time.Since(start)

		bad := 0
		for _, a := range answers {
			if a.code != http.StatusOK {
				bad++
				t.Logf("at +%s: %d %s", a.at.Sub(start).Round(time.Millisecond), a.code, a.body)
			}
		}
		t.Logf("helm upgrade rolled the manager (%s -> %s) in %s; %d drips during it, %d not 200", mp.Name, newMP.Name, rolled.Round(time.Millisecond), len(answers), bad)
		if bad > 0 || len(answers) < 10 {
			t.Fatalf("%d of %d drips during the upgrade were not answered 200", bad, len(answers))
		}
		now := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)
		if now.UID != fp.UID {
			t.Fatalf("the upgrade replaced the faucet pod (%s -> %s): a manager upgrade must not roll faucets", fp.Name, now.Name)
		}
		args := strings.Join(newMP.Spec.Containers[0].Args, " ")
		if !strings.Contains(args, "--log-level=debug") {
			t.Fatalf("the new manager runs %q, without the upgraded value", args)
		}
	})

	t.Run("metrics of the manager and the faucet are scraped through their Services from a pod", func(t *testing.T) {
		managerMetrics := "https://" + serviceAddr(t, ctx, c, operatorNS, release+"-metrics") + "/metrics"
		faucetMetrics := faucetURL + "/metrics"
		logs := runScrapePod(t, e, ctx, c, managerMetrics, faucetMetrics)
		for _, want := range []string{
			managerMetrics + " 200 OK", `controller_runtime_reconcile_total{controller="faucetserver"`,
			faucetMetrics + " 200 OK", "faucet_drips_total", "faucet_drips_left",
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("the scrape from inside the cluster lacks %q", want)
			}
		}
	})

	t.Run("deleting the FaucetServer and helm uninstall leave nothing behind", func(t *testing.T) {
		e.run(t, ctx, e.kubectl, "delete", "fsrv", fsName, "-n", ns, "--wait", "--timeout", "2m")
		poll(t, ctx, "the FaucetServer's children to be garbage-collected", 2*time.Minute, func() error {
			left := e.kubectlOut(t, ctx, "get", "deploy,rs,pod,svc,sa,pvc,endpointslices", "-n", ns, "-l", "app.kubernetes.io/instance="+fsName, "-o", "name")
			if strings.TrimSpace(left) != "" {
				return fmt.Errorf("left: %s", strings.Join(strings.Fields(left), " "))
			}
			return nil
		})
		e.run(t, ctx, e.helm, "uninstall", release, "--namespace", operatorNS, "--wait", "--timeout", "2m")

		// Everything that is left in the two namespaces, once the manager
		// pod has stopped.
		poll(t, ctx, "the release's objects to be gone", time.Minute, func() error {
			return leftovers(t, e, ctx, operatorNS, nil)
		})
		if err := leftovers(t, e, ctx, ns, []string{
			"secret/" + keySecret, "service/devnode", "deployment.apps/devnode", "replicaset.apps/devnode-",
			"pod/devnode-", "endpointslice.discovery.k8s.io/devnode-", "endpoints/devnode",
			"secret/oidc-client", "configmap/oidc-config", "service/oidc", "deployment.apps/oidc", "replicaset.apps/oidc-",
			"pod/oidc-", "endpointslice.discovery.k8s.io/oidc-", "endpoints/oidc",
		}); err != nil {
			t.Error(err)
		}
		cluster := e.kubectlOut(t, ctx, "get", "clusterroles,clusterrolebindings", "-l", "app.kubernetes.io/instance="+release, "-o", "name")
		if strings.TrimSpace(cluster) != "" {
			t.Errorf("helm uninstall left cluster objects: %s", cluster)
		}
		// The CRD stays by design (crds.keep, helm.sh/resource-policy:
		// keep): deleting it deletes every FaucetServer in the cluster.
		crd := e.kubectlOut(t, ctx, "get", "crd", "faucetservers.faucet.stxfaucet.dev", "-o", "jsonpath={.metadata.annotations.helm\\.sh/resource-policy}")
		if crd != "keep" {
			t.Errorf("the CRD's resource policy is %q after uninstall, want keep", crd)
		}
		e.run(t, ctx, e.kubectl, "delete", "crd", "faucetservers.faucet.stxfaucet.dev", "--wait", "--timeout", "1m")
		e.run(t, ctx, e.kubectl, "delete", "pv", fsName+"-data", "--wait", "--timeout", "1m")
	})
}

// --- the cluster

func newClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e2eclient.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs a command and returns its stdout; a failure fails the test with
// its stderr.
func (e env) run(t *testing.T, ctx context.Context, name string, args ...string) string {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func (e env) kubectlOut(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	return e.run(t, ctx, e.kubectl, args...)
}

// apply is `kubectl apply -f -`, as a user applies a manifest.
func (e env) apply(t *testing.T, ctx context.Context, manifest string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, e.kubectl, "apply", "-f", "-")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\nmanifest:\n%s", err, out, manifest)
	}
}

func poll(t *testing.T, ctx context.Context, what string, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err = fn(); err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
}

func pods(ctx context.Context, c client.Client, namespace, selector string) ([]corev1.Pod, error) {
	sel, err := metav1.ParseToLabelSelector(selector)
	if err != nil {
		return nil, err
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// onlyPod waits until selector matches exactly one pod, Ready.
func onlyPod(t *testing.T, ctx context.Context, c client.Client, namespace, selector string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	poll(t, ctx, "one Ready pod "+selector+" in "+namespace, 2*time.Minute, func() error {
		list, err := pods(ctx, c, namespace, selector)
		if err != nil {
			return err
		}
		if len(list) != 1 || !podReady(&list[0]) {
			return fmt.Errorf("%d pods, the first ready: %v", len(list), len(list) > 0 && podReady(&list[0]))
		}
		pod = list[0]
		return nil
	})
	return pod
}

// waitNewPod waits for the faucet's one pod to be another than old, Ready,
// with old gone.
func waitNewPod(t *testing.T, ctx context.Context, c client.Client, old types.UID, timeout time.Duration) corev1.Pod {
	t.Helper()
	return waitNewPodIn(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName, old, timeout)
}

func waitNewPodIn(t *testing.T, ctx context.Context, c client.Client, namespace, selector string, old types.UID, timeout time.Duration) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	poll(t, ctx, "a new Ready pod "+selector, timeout, func() error {
		list, err := pods(ctx, c, namespace, selector)
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].UID == old || !podReady(&list[0]) {
			return fmt.Errorf("%d pods", len(list))
		}
		pod = list[0]
		return nil
	})
	return pod
}

func addressesOf(keys []*stacks.PrivateKey) []stacks.Address {
	out := make([]stacks.Address, len(keys))
	for i, k := range keys {
		out[i] = k.TestnetAddress()
	}
	return out
}

// podsOf lists the FaucetServer name's pods that are not terminating.
func podsOf(ctx context.Context, c client.Client, name string) []corev1.Pod {
	all, err := pods(ctx, c, ns, "app.kubernetes.io/instance="+name)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(all, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

func onlyPodsOf(t *testing.T, ctx context.Context, c client.Client, name string) []corev1.Pod {
	t.Helper()
	ps := podsOf(ctx, c, name)
	if len(ps) == 0 {
		t.Fatalf("no pod of %s", name)
	}
	return ps
}

// waitPodReady waits until the pod name is Ready.
func waitPodReady(t *testing.T, ctx context.Context, c client.Client, name string, timeout time.Duration) {
	t.Helper()
	poll(t, ctx, "pod "+name+" to be Ready", timeout, func() error {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			return err
		}
		if p.DeletionTimestamp != nil || !podReady(&p) {
			return errors.New("not Ready")
		}
		return nil
	})
}

// waitPodGone waits until p no longer exists.
func waitPodGone(t *testing.T, ctx context.Context, c client.Client, p corev1.Pod, timeout time.Duration) {
	t.Helper()
	poll(t, ctx, "pod "+p.Name+" gone", timeout, func() error {
		var got corev1.Pod
		err := c.Get(ctx, client.ObjectKeyFromObject(&p), &got)
		switch {
		case err == nil && got.UID == p.UID:
			return errors.New("still there")
		case err != nil && !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})
}

// waitReplicas waits until the Deployment name runs n pods of its
// current template, all available, and no other.
func waitReplicas(t *testing.T, ctx context.Context, c client.Client, name string, n int32, timeout time.Duration) {
	t.Helper()
	poll(t, ctx, fmt.Sprintf("deployment %s to run %d available pods", name, n), timeout, func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		st := d.Status
		if d.Status.ObservedGeneration < d.Generation || st.Replicas != n || st.UpdatedReplicas != n || st.AvailableReplicas != n || st.ReadyReplicas != n {
			return fmt.Errorf("replicas %d, updated %d, available %d", st.Replicas, st.UpdatedReplicas, st.AvailableReplicas)
		}
		return nil
	})
}

func waitAvailable(t *testing.T, ctx context.Context, c client.Client, namespace, name string, timeout time.Duration) {
	t.Helper()
	poll(t, ctx, "deployment "+name+" to be available", timeout, func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &d); err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 || d.Status.ObservedGeneration < d.Generation {
			return fmt.Errorf("available %d", d.Status.AvailableReplicas)
		}
		return nil
	})
}

// serviceAddr is a Service's cluster IP and first port: the cluster has no
// DNS add-on, so clients use the address kube-proxy serves.
func serviceAddr(t *testing.T, ctx context.Context, c client.Client, namespace, name string) string {
	t.Helper()
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &svc); err != nil {
		t.Fatalf("service %s/%s: %v", namespace, name, err)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
}

func usesClaim(p corev1.Pod, claim string) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}

func waitReady(t *testing.T, ctx context.Context, c client.Client, timeout time.Duration) *faucetv1alpha1.FaucetServer {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	poll(t, ctx, "FaucetServer "+fsName+" to be Ready", timeout, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fsName}, &fs); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(fs.Status.Conditions, "Ready")
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != fs.Generation {
			return fmt.Errorf("Ready: %+v", cond)
		}
		return nil
	})
	return &fs
}

func waitFunding(t *testing.T, ctx context.Context, c client.Client, timeout time.Duration) *faucetv1alpha1.FaucetServer {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	poll(t, ctx, "the FaucetServer's funding", timeout, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fsName}, &fs); err != nil {
			return err
		}
		if f := fs.Status.Funding; f == nil || f.BalanceSTX == "" || f.DripsLeft == 0 {
			return fmt.Errorf("funding %+v", f)
		}
		return nil
	})
	return &fs
}

func checkPVC(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	var pvc corev1.PersistentVolumeClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fsName + "-data"}, &pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != fsName+"-data" {
		t.Fatalf("claim %s is %s on %q, want Bound to the static volume", pvc.Name, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
}

// checkManagerPod checks the manager pod as the chart renders it.
func checkManagerPod(t *testing.T, e env, pod corev1.Pod) {
	t.Helper()
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("manager pod has %d containers", len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	if ctr.Image != e.image {
		t.Errorf("manager image %q, want the chart's default %q (what make image tags)", ctr.Image, e.image)
	}
	sc := ctr.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("manager container security context %+v", sc)
	}
	var st *corev1.ContainerStatus
	for i := range pod.Status.ContainerStatuses {
		st = &pod.Status.ContainerStatuses[i]
	}
	if st == nil || !st.Ready || st.RestartCount != 0 {
		t.Errorf("manager container status %+v", st)
	}
}

// checkHardenedProcess finds the pod's container process on this machine
// (the kubelet runs here) and checks what the kernel enforces: the user,
// no capabilities, no privilege escalation, seccomp, a read-only root.
func checkHardenedProcess(t *testing.T, pod corev1.Pod, subcommand string) {
	t.Helper()
	pid := findProcess(t, string(pod.UID), subcommand)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	id := strconv.Itoa(restrictedUID)
	for k, want := range map[string]string{
		"Uid": strings.Repeat(id+" ", 3) + id, "Gid": strings.Repeat(id+" ", 3) + id,
		"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000",
		"NoNewPrivs": "1", "Seccomp": "2",
	} {
		if fields[k] != want {
			t.Errorf("faucet %s (pid %d): %s is %q, want %q", subcommand, pid, k, fields[k], want)
		}
	}
	mountinfo, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			if !slices.Contains(strings.Split(f[5], ","), "ro") {
				t.Errorf("faucet %s (pid %d): the root filesystem is mounted %s, want ro", subcommand, pid, f[5])
			}
			return
		}
	}
	t.Errorf("faucet %s (pid %d): no root mount in its mountinfo", subcommand, pid)
}

// findProcess is the pid of `/faucet SUBCOMMAND` in the pod's cgroup.
func findProcess(t *testing.T, podUID, subcommand string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	uid := strings.ReplaceAll(podUID, "-", "_") // cgroupfs writes either form
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.HasPrefix(cmdline, []byte("/faucet\x00"+subcommand+"\x00")) {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err == nil && (strings.Contains(string(cg), podUID) || strings.Contains(string(cg), uid)) {
			return pid
		}
	}
	t.Fatalf("no /faucet %s process of pod %s on this machine", subcommand, podUID)
	return 0
}

// runScrapePod runs the tools image's httpget on urls in a pod and returns
// its log. The pod runs as scraperSA, which the chart binds to the
// manager's metrics-reader ClusterRole (metrics.readerSubjects): httpget
// sends its token to the https URLs and accepts the manager's self-signed
// certificate, as the chart's ServiceMonitor does.
func runScrapePod(t *testing.T, e env, ctx context.Context, c client.Client, urls ...string) string {
	t.Helper()
	args, _ := json.Marshal(append([]string{"--bearer-token-file=/var/run/secrets/kubernetes.io/serviceaccount/token", "--insecure-skip-verify"}, urls...))
	e.apply(t, ctx, fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: %s
  namespace: %s
---
apiVersion: v1
kind: Pod
metadata:
  name: scrape
  namespace: %s
spec:
  restartPolicy: Never
  serviceAccountName: %s
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: httpget
    image: %s
    imagePullPolicy: Never
    command: ["/httpget"]
    args: %s
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
`, scraperSA, ns, ns, scraperSA, e.toolsImage, args))
	poll(t, ctx, "the scrape pod to finish", 2*time.Minute, func() error {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scrape"}, &p); err != nil {
			return err
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return nil
		case corev1.PodFailed:
			t.Fatalf("the scrape pod failed:\n%s", e.kubectlOut(t, ctx, "logs", "-n", ns, "scrape"))
		}
		return fmt.Errorf("phase %s", p.Status.Phase)
	})
	logs := e.kubectlOut(t, ctx, "logs", "-n", ns, "scrape")
	e.run(t, ctx, e.kubectl, "delete", "pod", "-n", ns, "scrape", "--wait")
	e.run(t, ctx, e.kubectl, "delete", "serviceaccount", "-n", ns, scraperSA, "--wait")
	return logs
}

// leftovers lists every object in namespace and names those that are not
// expected (by name prefix). Events are not counted: the API server expires
// them.
func leftovers(t *testing.T, e env, ctx context.Context, namespace string, expected []string) error {
	t.Helper()
	kinds := strings.Fields(e.kubectlOut(t, ctx, "api-resources", "--verbs=list", "--namespaced", "-o", "name"))
	kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == "events" || k == "events.events.k8s.io" })
	out := e.kubectlOut(t, ctx, "get", strings.Join(kinds, ","), "-n", namespace, "-o", "name", "--ignore-not-found")
	always := []string{"configmap/kube-root-ca.crt", "serviceaccount/default"}
	var left []string
	for _, obj := range strings.Fields(out) {
		if !slices.ContainsFunc(append(always, expected...), func(p string) bool { return strings.HasPrefix(obj, p) }) {
			left = append(left, obj)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind in %s: %s", namespace, strings.Join(left, " "))
	}
	return nil
}

// waitServed waits until the faucet's Service answers its status: a pod
// is Ready before kube-proxy routes the Service to it.
func waitServed(t *testing.T, ctx context.Context, faucetURL string) {
	t.Helper()
	poll(t, ctx, "the faucet's Service to answer", time.Minute, func() error {
		resp, err := httpClient.Get(faucetURL + "/extended/v1/status")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	})
}

// followLog follows a pod's log until the pod is gone; the function it
// returns waits for that and gives the log.
func followLog(ctx context.Context, e env, namespace, pod string) func() string {
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, e.kubectl, "--kubeconfig", e.kubeconfig, "logs", "-f", "-n", namespace, pod)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Start()
	return func() string {
		if err != nil {
			return err.Error()
		}
		_ = cmd.Wait()
		return buf.String()
	}
}

// grepLines keeps the lines that contain any of words.
func grepLines(text string, words ...string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(strings.ToLower(line), w) }) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// --- manifests, as a user writes them

func devnodeManifest(image string, funded ...stacks.Address) string {
	var args strings.Builder
	for _, a := range funded {
		fmt.Fprintf(&args, "        - --fund=%s=%d\n", a, keyFunding)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: devnode
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: devnode}
  template:
    metadata:
      labels: {app: devnode}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: devnode
        image: %[2]s
        args:
        - devnet
        - --listen=0.0.0.0:%[3]d
        - --block-time=1s
%[4]s        ports:
        - {name: rpc, containerPort: %[3]d}
        readinessProbe:
          httpGet: {path: /v2/info, port: rpc}
          periodSeconds: 2
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata:
  name: devnode
  namespace: %[1]s
spec:
  selector: {app: devnode}
  ports:
  - {name: rpc, port: %[3]d, targetPort: rpc}
`, ns, image, devnodePort, args.String())
}

// staticVolume makes the PersistentVolume name on dir, pre-bound to the
// claim namespace/claim: this cluster has no provisioner, as many
// on-premises ones have none, and the claims of the operator and the
// samples name no class. A hostPath volume is not chowned to the pod's
// fsGroup, so dir is given to the faucet's user, as an administrator
// preparing a static volume would.
func staticVolume(t *testing.T, ctx context.Context, e env, name, namespace, claim, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, restrictedUID, restrictedUID); err != nil {
		t.Fatal(err)
	}
	e.apply(t, ctx, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata:
  name: %s
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: %s, name: %s}
  hostPath: {path: %s, type: Directory}
`, name, namespace, claim, dir))
}

func keySecretManifest(k *stacks.PrivateKey) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: %s
type: Opaque
stringData:
  keys: %s
`, keySecret, ns, k.Hex())
}

// postgresFaucetServerManifest is the FaucetServer name (fsPG, or the
// fault suite's): two replicas on the Postgres database at uri, paying from
// keys (a replica is Ready once it owns one), with a per-IP limit of
// perIP (a change of it rolls the pods). uri "" leaves the store's Secret
// out of the manifest, as it was.
func postgresFaucetServerManifest(name, uri string, keys []*stacks.PrivateKey, nodeURL string, perIP int) string {
	var secrets string
	if uri != "" {
		hexes := make([]string, len(keys))
		for i, k := range keys {
			hexes[i] = k.Hex()
		}
		secrets = fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %[1]s-store
  namespace: %[2]s
type: Opaque
stringData:
  uri: %[3]s
---
apiVersion: v1
kind: Secret
metadata:
  name: %[1]s-keys
  namespace: %[2]s
type: Opaque
stringData:
  keys: "%[4]s"
---
`, name, ns, uri, strings.Join(hexes, `\n`))
	}
	return secrets + fmt.Sprintf(`apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  replicas: 2
  node:
    url: %[3]s
  keySecretRef:
    name: %[1]s-keys
  store:
    postgres:
      uriSecretRef: {name: %[1]s-store}
  rateLimits:
    perIP: {requests: %[4]d, window: 5m}
`, name, ns, nodeURL, perIP)
}

// faucetServerManifest is the FaucetServer on the nodes: node.url for one,
// node.urls for several.
func faucetServerManifest(nodeURLs ...string) string {
	node := "url: " + nodeURLs[0]
	if len(nodeURLs) > 1 {
		node = "urls: [" + strings.Join(nodeURLs, ", ") + "]"
	}
	return fmt.Sprintf(`apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata:
  name: %s
  namespace: %s
spec:
  node:
    %s
  keySecretRef:
    name: %s
  rateLimits:
    perIP: {requests: 1000, window: 5m}
`, fsName, ns, node, keySecret)
}

// devnodeFrontEndManifest runs a second front end of the devnode
// (`faucet devnet --upstream`) in a pod of its own behind a Service: a
// second node URL of the one chain, whose pod can be deleted (and stays
// gone until applied again) while the chain goes on.
func devnodeFrontEndManifest(image, upstream string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: devnode-2
  namespace: %[1]s
  labels: {app: devnode-2}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 5
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: devnode
    image: %[2]s
    args: [devnet, --listen=0.0.0.0:%[3]d, --upstream=%[4]s]
    ports:
    - {name: rpc, containerPort: %[3]d}
    readinessProbe:
      httpGet: {path: /v2/info, port: rpc}
      periodSeconds: 1
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
---
apiVersion: v1
kind: Service
metadata:
  name: devnode-2
  namespace: %[1]s
spec:
  selector: {app: devnode-2}
  ports:
  - {name: rpc, port: %[3]d, targetPort: rpc}
`, ns, image, devnodePort, upstream)
}

// --- the faucet and the node

func newKey(t *testing.T) *stacks.PrivateKey {
	t.Helper()
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// httpClient gives up on a connection after a second, as a client that
// retries would: a SYN sent to a pod that has just exited goes unanswered
// until kube-proxy forgets the pod, and a longer wait would be counted as
// the faucet's outage.
var httpClient = &http.Client{
	Timeout: 15 * time.Second,
	Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: burstWorkers,
	},
}

// drip is a v1 drip; code 0 means no answer (no endpoint, reset).
func drip(ctx context.Context, faucetURL string, to stacks.Address) (int, string) {
	return dripWith(ctx, httpClient, faucetURL, to)
}

// plainClient is a client as most are: the system's connect timeout, keep-
// alive, no retry (a POST is never retried), so a connection refused or
// reset by a pod going away is an error the test sees.
var plainClient = &http.Client{Timeout: 30 * time.Second}

// dripWith is a v1 drip through hc; code 0 means no answer.
func dripWith(ctx context.Context, hc *http.Client, faucetURL string, to stacks.Address) (int, string) {
	return send(ctx, hc, http.MethodPost, faucetURL+"/extended/v1/faucets/stx?address="+to.String())
}

// get is a GET through the test's client; code 0 means no answer.
func get(ctx context.Context, url string) (int, string) {
	return send(ctx, httpClient, http.MethodGet, url)
}

// send makes a bodiless request through hc and reads the answer; code 0
// means no answer.
func send(ctx context.Context, hc *http.Client, method, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// nodeClients are the node RPC clients by URL, one each so that polling
// reuses their connections.
var nodeClients sync.Map

// readBalance is an account's unlocked balance, read with our node client.
func readBalance(nodeURL string, a stacks.Address) (uint64, error) {
	v, ok := nodeClients.Load(nodeURL)
	if !ok {
		c, err := node.New(nodeURL, rpcclient.WithTimeout(15*time.Second))
		if err != nil {
			return 0, err
		}
		v, _ = nodeClients.LoadOrStore(nodeURL, c)
	}
	c := v.(*node.Client)
	acct, err := c.Account(context.Background(), a.String())
	if err != nil {
		return 0, fmt.Errorf("account %s: %w", a, err)
	}
	return acct.Balance, nil
}

// waitBalances waits until every address of want holds exactly its amount,
// and fails at once when any address of want or of maybe (drips that got no
// answer: paid at most once) holds more than one drip.
func waitBalances(t *testing.T, ctx context.Context, nodeURL string, want map[stacks.Address]uint64, maybe map[stacks.Address]bool, timeout time.Duration) {
	t.Helper()
	poll(t, ctx, fmt.Sprintf("%d drips to be mined", len(want)), timeout, func() error {
		pending := 0
		for a, w := range want {
			b, err := readBalance(nodeURL, a)
			if err != nil {
				return err
			}
			if b > w {
				t.Fatalf("%s holds %d µSTX, more than the %d it was answered: paid twice", a, b, w)
			}
			if b != w {
				pending++
			}
		}
		if pending > 0 {
			return fmt.Errorf("%d not mined yet", pending)
		}
		return nil
	})
	for a := range maybe {
		b, err := readBalance(nodeURL, a)
		if err != nil {
			t.Fatal(err)
		}
		if b != 0 && b != dripUSTX {
			t.Fatalf("%s, whose drip got no answer, holds %d µSTX: want 0 or one drip", a, b)
		}
	}
}

// officialClientDrip drips with @stacks/blockchain-api-client, which checks
// the answer against the published schemas and verifies the transaction.
func officialClientDrip(t *testing.T, ctx context.Context, repo, faucetURL string, to stacks.Address) e2eclient.Result {
	t.Helper()
	res, err := e2eclient.Drip(ctx, repo, faucetURL, to.String(), dripUSTX)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
