//go:build e2ecluster

package e2ecluster

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/store/pgtest"
)

// The fault suite: a FaucetServer of two replicas on a real Postgres, paying
// from four keys through the in-cluster devnode, under a burst of drips from
// clients that never retry, through one fault per step. Every step states
// its promises as constants below, asserts them and logs the measured
// figures; every step ends with the money check (checkMoney).
const (
	// fsFaults is the suite's FaucetServer.
	fsFaults = "faults"
	// faultWorkers drip at faultPace each: about 16 drips a second, enough
	// to see every second of an outage, little enough for 2 shared cores.
	faultWorkers = 4
	faultPace    = 250 * time.Millisecond
	// faultClientTimeout is the clients' patience: an answer later than
	// this is a hang, counted as no answer.
	faultClientTimeout = 10 * time.Second

	// promiseStoreBack: once Postgres accepts connections again (restarted,
	// or the cut healed), drips answer 200 again within this.
	promiseStoreBack = 10 * time.Second
	// pgDown is how long step 1 keeps Postgres stopped; pgCut how long step
	// 2 cuts the pods from it.
	pgDown = 5 * time.Second
	pgCut  = 20 * time.Second
	// nodeCut is how long step 3 cuts one replica from the Stacks node.
	// The cut replica keeps its keys (ownership lives in Postgres, which
	// it reaches); it notices the node gone at its next tip read (3 s at
	// most) and then:
	//   - promiseNodeRefusal: refuses each drip within this, with
	//     Retry-After (503; v1's 500 node_unavailable), closing the
	//     connection so that the client's next one may go elsewhere;
	//   - promiseNodeCutOut: fails its readiness probe and is out of the
	//     Service within this of the cut.
	// Only drips it took before it noticed (sent within
	// promiseNodeNoticed of the cut) may wait on the node past the
	// client's timeout; each is paid at most once. The other replica
	// answers 200 throughout, and every drip sent once the cut one is out
	// of the Service is answered 200.
	nodeCut            = 30 * time.Second
	promiseNodeRefusal = 3 * time.Second
	promiseNodeCutOut  = 15 * time.Second
	promiseNodeNoticed = 5 * time.Second
	// promiseManagerRollout: a rollout whose manager was force-killed at
	// its start is complete, the FaucetServer Ready for its new
	// generation, within this of the kill: at worst the new manager waits
	// out the dead one's leader Lease (15 s), starts, and rolls two pods.
	promiseManagerRollout = 60 * time.Second
)

// faultKeys are the suite's faucet keys, generated once per test binary so
// that the user's path can fund them in its devnode's genesis and this
// suite reuse that devnode.
var faultKeys = keysOnce(4)

// keysOnce is n faucet keys, generated at the first call and the same at
// every later one.
func keysOnce(n int) func() []*stacks.PrivateKey {
	return sync.OnceValue(func() []*stacks.PrivateKey {
		keys := make([]*stacks.PrivateKey, n)
		for i := range keys {
			k, err := stacks.GeneratePrivateKey()
			if err != nil {
				panic(fmt.Sprintf("generate a faucet key: %v", err))
			}
			keys[i] = k
		}
		return keys
	})
}

// faultRig is the suite's running setup.
type faultRig struct {
	e          env
	c          client.Client
	nodeURL    string // the devnode's Service
	faucetURL  string // the FaucetServer's Service
	pg         *pgtest.Server
	perIP      int // the FaucetServer's per-IP limit; step 4 changes it to roll the pods
	keys       map[stacks.Address]bool
	nodeClient *node.Client
}

func TestFaultsOnARealCluster(t *testing.T) {
	e := loadEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel) // the last cleanup: the others use ctx
	start := time.Now()
	r := &faultRig{e: e, c: newClient(t, e.kubeconfig), perIP: 1_000_000, keys: map[stacks.Address]bool{}}
	for _, a := range addressesOf(faultKeys()) {
		r.keys[a] = true
	}
	r.ensureOperator(t, ctx)
	r.ensureDevnode(t, ctx)
	var err error
	if r.nodeClient, err = node.New(r.nodeURL, rpcclient.WithTimeout(15*time.Second)); err != nil {
		t.Fatal(err)
	}
	r.pg = pgtest.StartOn(t, nodeIP, podNetwork, nodeIP+"/32")
	uri := r.pg.CreateDB(t)
	t.Cleanup(func() { // before Postgres stops: cleanups run last first
		e.run(t, ctx, e.kubectl, "delete", "faucetserver", "-n", ns, fsFaults, "--ignore-not-found", "--wait=true", "--timeout=2m")
		e.run(t, ctx, e.kubectl, "delete", "secret", "-n", ns, fsFaults+"-store", fsFaults+"-keys", "--ignore-not-found", "--wait=true")
	})
	e.apply(t, ctx, faultsManifest(uri, faultKeys(), r.nodeURL, r.perIP))
	waitReplicas(t, ctx, r.c, fsFaults, 2, 3*time.Minute)
	r.faucetURL = "http://" + serviceAddr(t, ctx, r.c, ns, fsFaults)
	waitServed(t, ctx, r.faucetURL)
	t.Logf("fault suite set up in %s", time.Since(start).Round(time.Millisecond))

	t.Run("Postgres restarted mid-burst: 503 with Retry-After while it is down, 200 again within 10 s of it accepting connections, nothing paid twice", func(t *testing.T) {
		r.postgresRestarted(t, ctx)
	})
	t.Run("the pods cut from Postgres for 20 s: 503 with Retry-After during the cut, 200 again within 10 s of it healing, nothing paid twice", func(t *testing.T) {
		r.postgresCut(t, ctx)
	})
	t.Run("one replica cut from the Stacks node: the other keeps answering 200, the cut one answers 503 in time, nothing paid twice", func(t *testing.T) {
		r.nodeCutFromOneReplica(t, ctx)
	})
	t.Run("the manager force-killed as a rollout starts: the rollout completes after it restarts, every drip answered 200, nothing paid twice", func(t *testing.T) {
		r.managerKilledMidRollout(t, ctx)
	})
	t.Run("BTC on both replicas through the delete of the key's holder and a rollout: every drip answered 200, every recipient paid once", func(t *testing.T) {
		r.btcThroughDeleteAndRollout(t, ctx)
	})
	t.Logf("fault suite done in %s", time.Since(start).Round(time.Millisecond))
}

// ensureOperator installs the chart unless a release is there (the user's
// path uninstalls its own before this test runs); one it installed is
// uninstalled at the end, with the CRD, as the user's path leaves it.
func (r *faultRig) ensureOperator(t *testing.T, ctx context.Context) {
	t.Helper()
	if exec.CommandContext(ctx, r.e.helm, "--kubeconfig", r.e.kubeconfig, "status", release, "--namespace", operatorNS).Run() == nil {
		return
	}
	start := time.Now()
	r.e.run(t, ctx, r.e.helm, "install", release, filepath.Join(r.e.repo, "charts", "faucet-operator"),
		"--namespace", operatorNS, "--create-namespace", "--wait", "--timeout", "3m")
	t.Logf("helm install took %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		r.e.run(t, ctx, r.e.helm, "uninstall", release, "--namespace", operatorNS, "--wait", "--timeout", "2m")
		r.e.run(t, ctx, r.e.kubectl, "delete", "crd", "faucetservers.faucet.stxfaucet.dev", "--ignore-not-found", "--wait", "--timeout", "1m")
	})
}

// ensureDevnode reuses the user's path's devnode, whose genesis funds
// faultKeys when both tests run in one binary; otherwise it (re)applies one
// that funds them.
func (r *faultRig) ensureDevnode(t *testing.T, ctx context.Context) {
	t.Helper()
	var d appsv1.Deployment
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "devnode"}, &d); err == nil {
		r.nodeURL = "http://" + serviceAddr(t, ctx, r.c, ns, "devnode")
		if bal, err := readBalance(r.nodeURL, faultKeys()[0].TestnetAddress()); err == nil && bal > 0 {
			return
		}
	}
	r.e.apply(t, ctx, devnodeManifest(r.e.image, addressesOf(faultKeys())...))
	waitAvailable(t, ctx, r.c, ns, "devnode", 2*time.Minute)
	r.nodeURL = "http://" + serviceAddr(t, ctx, r.c, ns, "devnode")
	poll(t, ctx, "the devnode funding the suite's keys", 2*time.Minute, func() error {
		bal, err := readBalance(r.nodeURL, faultKeys()[0].TestnetAddress())
		if err == nil && bal != keyFunding {
			return fmt.Errorf("balance %d", bal)
		}
		return err
	})
}

// faultsManifest is the suite's FaucetServer: two replicas on the Postgres
// database at uri, paying from keys, no budget (the suite drips thousands),
// a per-IP limit of perIP (the test's clients share one IP; a change rolls
// the pods).
func faultsManifest(uri string, keys []*stacks.PrivateKey, nodeURL string, perIP int) string {
	return postgresFaucetServerManifest(fsFaults, uri, keys, nodeURL, perIP) + `  budget: {amount: 0}
`
}

// --- the steps

// postgresRestarted stops the real Postgres process (a fast shutdown: the
// faucet's connections are cut) for pgDown mid-burst, then starts it again.
func (r *faultRig) postgresRestarted(t *testing.T, ctx context.Context) {
	r.healthy(t, ctx)
	b := startFaultBurst(ctx, r.faucetURL)
	b.waitAnswered(t, 30)
	down := time.Now()
	if err := r.pg.Stop(); err != nil {
		t.Fatalf("stop Postgres: %v", err)
	}
	stopped := time.Now()
	time.Sleep(pgDown)
	if err := r.pg.Start(); err != nil { // returns once it accepts a connection
		t.Fatalf("start Postgres: %v", err)
	}
	up := time.Now()
	t.Logf("Postgres stopped in %s, down for %s, accepting connections again %s after the stop began",
		stopped.Sub(down).Round(time.Millisecond), up.Sub(stopped).Round(time.Millisecond), up.Sub(down).Round(time.Millisecond))
	r.checkStoreOutage(t, ctx, b, down, up)
}

// postgresCut drops the pod network's packets to Postgres for pgCut: no
// reset, no refusal, the faucet's connections just go silent.
func (r *faultRig) postgresCut(t *testing.T, ctx context.Context) {
	r.healthy(t, ctx)
	rule := []string{"INPUT", "-s", podNetwork, "-d", nodeIP, "-p", "tcp", "--dport", strconv.Itoa(r.pg.Port()), "-j", "DROP"}
	b := startFaultBurst(ctx, r.faucetURL)
	b.waitAnswered(t, 30)
	down := time.Now()
	heal := r.iptables(t, ctx, nil, rule)
	time.Sleep(pgCut)
	heal()
	up := time.Now()
	t.Logf("the pods cut from Postgres (%s) for %s", strings.Join(rule, " "), up.Sub(down).Round(time.Millisecond))
	r.checkStoreOutage(t, ctx, b, down, up)
}

// checkStoreOutage runs the burst on until the store has been back for
// twice the promise, then checks the answers of a store outage from down
// to up: 200, or 503 with Retry-After, each within the client's timeout;
// 200 again within promiseStoreBack of up; then the money.
func (r *faultRig) checkStoreOutage(t *testing.T, ctx context.Context, b *faultBurst, down, up time.Time) {
	t.Helper()
	time.Sleep(2 * promiseStoreBack)
	shots := b.finish()
	logTally(t, shots, down)
	var back time.Duration = -1 // the first 200 to a drip sent after up
	var lastRefusal time.Time
	for _, s := range shots {
		switch {
		case s.code == http.StatusOK:
			if back < 0 && s.sent.After(up) {
				back = s.at.Sub(up)
			}
			continue
		case s.refusedWell():
		default:
			t.Errorf("drip (%s) sent at %s: %d %s (Retry-After %q) after %s; want 200, or 503 with Retry-After",
				s.door, rel(s.sent, down), s.code, shorten(s.body), s.retryAfter, s.at.Sub(s.sent).Round(time.Millisecond))
		}
		if s.at.After(lastRefusal) {
			lastRefusal = s.at
		}
	}
	t.Logf("PROMISE 200 again within %s of Postgres accepting connections: the first 200 came %s after; the last refusal at %s",
		promiseStoreBack, back.Round(time.Millisecond), rel(lastRefusal, up))
	if back < 0 || back > promiseStoreBack {
		t.Errorf("no drip answered 200 within %s of Postgres accepting connections (first after: %s)", promiseStoreBack, back)
	}
	r.checkMoney(t, ctx, shots)
}

// nodeCutFromOneReplica drops, inside one faucet pod's network namespace,
// its packets to the devnode (Service and pod address) for nodeCut. The
// replica keeps its keys (ownership lives in Postgres, which it still
// reaches): what it answers while cut is a quick 503, and the readiness
// probe takes it out of the Service; the other replica answers 200.
func (r *faultRig) nodeCutFromOneReplica(t *testing.T, ctx context.Context) {
	r.healthy(t, ctx)
	victim := onlyPodsOf(t, ctx, r.c, fsFaults)[0]
	pid := findProcess(t, string(victim.UID), "serve")
	var svc corev1.Service
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "devnode"}, &svc); err != nil {
		t.Fatal(err)
	}
	dn := onlyPod(t, ctx, r.c, ns, "app=devnode")
	b := startFaultBurst(ctx, r.faucetURL)
	b.waitAnswered(t, 30)
	down := time.Now()
	netns := []string{"nsenter", "--target", strconv.Itoa(pid), "--net", "--"}
	heal := r.iptables(t, ctx, netns, []string{"OUTPUT", "-d", svc.Spec.ClusterIP + "," + dn.Status.PodIP, "-j", "DROP"})
	outAt := waitPodUnready(t, ctx, r.c, victim, time.Minute)
	time.Sleep(max(0, nodeCut-time.Since(down)))
	heal()
	up := time.Now()
	waitPodReady(t, ctx, r.c, victim.Name, time.Minute)
	readyAgain := time.Now()
	time.Sleep(5 * time.Second)
	shots := b.finish()
	logTally(t, shots, down)
	t.Logf("the cut pod's warnings:\n%s", grepLines(r.e.kubectlOut(t, ctx, "logs", "-n", ns, victim.Name,
		"--since-time="+down.Add(-time.Second).UTC().Format(time.RFC3339)), `"level":"warn"`, `"level":"error"`, "ready", "rotation"))
	t.Logf("pod %s cut from the devnode for %s: out of its Service (not Ready) %s after the cut, Ready again %s after it healed",
		victim.Name, up.Sub(down).Round(time.Millisecond), outAt.Sub(down).Round(time.Millisecond), readyAgain.Sub(up).Round(time.Millisecond))
	if out := outAt.Sub(down); out > promiseNodeCutOut {
		t.Errorf("PROMISE the cut replica out of the Service within %s of the cut: it took %s", promiseNodeCutOut, out)
	}
	var slowest, gap time.Duration
	ok, late := 0, 0
	lastOK := down
	for _, s := range shots {
		took := s.at.Sub(s.sent)
		switch {
		case s.code == http.StatusOK:
			ok++
			if s.at.After(down) && s.at.Before(up) {
				gap, lastOK = max(gap, s.at.Sub(lastOK)), s.at
			}
			continue
		case s.code == 0 && s.sent.Sub(down) < promiseNodeNoticed:
			late++ // taken before the replica noticed: paid at most once (checkMoney)
			continue
		case s.refusedWell():
			slowest = max(slowest, took)
		default:
			t.Errorf("drip (%s) sent at %s: %d %s (Retry-After %q) after %s; want 200, or a refusal with Retry-After",
				s.door, rel(s.sent, down), s.code, shorten(s.body), s.retryAfter, took.Round(time.Millisecond))
		}
		// Past the endpoints' update (kube-proxy's resync, a second or two).
		if s.sent.After(outAt.Add(3*time.Second)) && s.sent.Before(up) {
			t.Errorf("drip (%s) sent at %s, after the cut replica left the Service: %d %s; want 200", s.door, rel(s.sent, down), s.code, shorten(s.body))
		}
	}
	t.Logf("PROMISE a refusal within %s: the slowest took %s; %d of %d drips answered 200, %d taken before the replica noticed went unanswered; the longest time without a 200 during the cut: %s",
		promiseNodeRefusal, slowest.Round(time.Millisecond), ok, len(shots), late, gap.Round(time.Millisecond))
	if slowest > promiseNodeRefusal {
		t.Errorf("a refusal took %s, more than %s", slowest, promiseNodeRefusal)
	}
	r.checkMoney(t, ctx, shots)
}

// managerKilledMidRollout changes a field that rolls the faucet pods and
// force-deletes the manager pod at once: the old manager may or may not
// have updated the Deployment; either way the new one, once it leads,
// must finish the job.
func (r *faultRig) managerKilledMidRollout(t *testing.T, ctx context.Context) {
	r.healthy(t, ctx)
	mp := onlyPod(t, ctx, r.c, operatorNS, "app.kubernetes.io/instance="+release)
	before := podsOf(ctx, r.c, fsFaults)
	var d0 appsv1.Deployment
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fsFaults}, &d0); err != nil {
		t.Fatal(err)
	}
	genBefore := d0.Generation
	b := startFaultBurst(ctx, r.faucetURL)
	b.waitAnswered(t, 30)
	r.perIP++
	killed := time.Now()
	r.e.apply(t, ctx, faultsManifest("", faultKeys(), r.nodeURL, r.perIP))
	r.e.run(t, ctx, r.e.kubectl, "delete", "pod", "-n", operatorNS, mp.Name, "--grace-period=0", "--force")
	var d appsv1.Deployment
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fsFaults}, &d); err != nil {
		t.Fatal(err)
	}
	t.Logf("when the manager died, the Deployment was at generation %d (%d before the change): the old manager had%s updated it",
		d.Generation, genBefore, map[bool]string{true: "", false: " not"}[d.Generation > genBefore])
	newMP := waitNewPodIn(t, ctx, r.c, operatorNS, "app.kubernetes.io/instance="+release, mp.UID, 2*time.Minute)
	managerBack := time.Since(killed)
	for _, p := range before {
		waitPodGone(t, ctx, r.c, p, promiseManagerRollout)
	}
	ready := r.waitFaultsReady(t, ctx, killed.Add(promiseManagerRollout))
	waitReplicas(t, ctx, r.c, fsFaults, 2, time.Minute)
	time.Sleep(3 * time.Second) // a few drips on the new pods
	shots := b.finish()
	logTally(t, shots, killed)
	t.Logf("manager %s force-deleted as the rollout began; %s Ready %s later", mp.Name, newMP.Name, managerBack.Round(time.Millisecond))
	t.Logf("PROMISE the FaucetServer Ready for its new generation within %s of the kill: it was after %s",
		promiseManagerRollout, ready.Round(time.Millisecond))
	for _, s := range shots {
		if s.code != http.StatusOK {
			t.Errorf("drip (%s) sent at %s: %d %s after %s; want 200", s.door, rel(s.sent, killed), s.code, shorten(s.body), s.at.Sub(s.sent).Round(time.Millisecond))
		}
	}
	now := podsOf(ctx, r.c, fsFaults)
	for _, p := range now {
		if slices.ContainsFunc(before, func(o corev1.Pod) bool { return o.UID == p.UID }) {
			t.Errorf("pod %s of before the change still runs: the rollout did not complete", p.Name)
		}
	}
	r.checkMoney(t, ctx, shots)
}

// healthy waits for both replicas Ready, every key owned and the Service
// answering: each step starts from a sound faucet.
func (r *faultRig) healthy(t *testing.T, ctx context.Context) {
	t.Helper()
	waitReplicas(t, ctx, r.c, fsFaults, 2, 3*time.Minute)
	waitServed(t, ctx, r.faucetURL)
}

// waitFaultsReady waits until the FaucetServer is Ready for its current
// generation, failing at deadline; it returns when, from the step's start.
func (r *faultRig) waitFaultsReady(t *testing.T, ctx context.Context, deadline time.Time) time.Duration {
	t.Helper()
	start := deadline.Add(-promiseManagerRollout)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var fs faucetv1alpha1.FaucetServer
		if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fsFaults}, &fs); err != nil {
			last = err.Error()
		} else if cond := meta.FindStatusCondition(fs.Status.Conditions, "Ready"); cond != nil && cond.Status == metav1.ConditionTrue &&
			cond.ObservedGeneration == fs.Generation && fs.Status.ObservedGeneration == fs.Generation {
			return time.Since(start)
		} else {
			last = fmt.Sprintf("generation %d, Ready %+v", fs.Generation, cond)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("the FaucetServer was not Ready for its new generation within %s: %s", promiseManagerRollout, last)
	return 0
}

// iptables inserts rule (chain first) in the network namespace prefix
// enters (nil: the test's own, the cluster's), and returns the function
// that deletes it; a cleanup deletes it too, should the step fail first.
func (r *faultRig) iptables(t *testing.T, ctx context.Context, prefix, rule []string) (heal func()) {
	t.Helper()
	cmd := func(op string) []string {
		return append(slices.Clone(prefix), append([]string{"iptables", "-w", op}, rule...)...)
	}
	r.e.run(t, ctx, cmd("-I")[0], cmd("-I")[1:]...)
	var once sync.Once
	heal = func() {
		once.Do(func() {
			del := cmd("-D")
			if out, err := exec.Command(del[0], del[1:]...).CombinedOutput(); err != nil {
				t.Errorf("remove the cut %s: %v: %s", strings.Join(rule, " "), err, out)
			}
		})
	}
	t.Cleanup(heal)
	return heal
}

// waitPodUnready waits until p is not Ready and returns when it saw that.
func waitPodUnready(t *testing.T, ctx context.Context, c client.Client, p corev1.Pod, timeout time.Duration) time.Time {
	t.Helper()
	poll(t, ctx, "pod "+p.Name+" not Ready", timeout, func() error {
		var got corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(&p), &got); err != nil {
			return err
		}
		if podReady(&got) {
			return errors.New("still Ready")
		}
		return nil
	})
	return time.Now()
}

// --- the burst

// faultClients never retry and wait faultClientTimeout at most. The first
// keeps its connections alive, as a browser or a script does: kube-proxy
// routes a connection once, so such a client stays with one replica until
// the connection closes. The second connects for every drip, as many
// clients do: the Service spreads those over the replicas in it.
var faultClients = [2]*http.Client{
	{Timeout: faultClientTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: faultWorkers}},
	{Timeout: faultClientTimeout, Transport: &http.Transport{DisableKeepAlives: true}},
}

// faultShot is one drip of a burst.
type faultShot struct {
	to         stacks.Address
	door       string // v1 or v3
	code       int    // 0: no answer within the client's timeout
	body       string
	retryAfter string
	reason     string // v1's reason field
	txid       string
	sent, at   time.Time
}

// refusedWell reports whether s is a refusal the promises allow: 503 with
// Retry-After, or with Retry-After v1's documented 500 for a node or keys
// unavailable on this replica (v1 keeps the seed's 500 for the engine's
// failures; the store's is 503 on every door).
func (s faultShot) refusedWell() bool {
	switch {
	case s.retryAfter == "":
		return false
	case s.code == http.StatusServiceUnavailable:
		return true
	}
	return s.code == http.StatusInternalServerError && s.door == "v1" && (s.reason == "node_unavailable" || s.reason == "busy")
}

// faultBurst drips to fresh addresses from faultWorkers workers, through
// v1 and v3, on a kept-alive connection or a new one each (a worker each
// way), until finish.
type faultBurst struct {
	mu    sync.Mutex
	shots []faultShot
	stop  chan struct{}
	wg    sync.WaitGroup
}

func startFaultBurst(ctx context.Context, faucetURL string) *faultBurst {
	b := &faultBurst{stop: make(chan struct{})}
	for w := range faultWorkers {
		door, hc := []string{"v1", "v3"}[w%2], faultClients[w/2%2]
		b.wg.Go(func() {
			for {
				select {
				case <-b.stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				k, err := stacks.GeneratePrivateKey()
				if err != nil {
					panic(err)
				}
				s := faultDrip(ctx, hc, faucetURL, door, k.TestnetAddress())
				b.mu.Lock()
				b.shots = append(b.shots, s)
				b.mu.Unlock()
				time.Sleep(faultPace)
			}
		})
	}
	return b
}

// waitAnswered waits until n drips got any answer: the burst is under way.
func (b *faultBurst) waitAnswered(t *testing.T, n int) {
	t.Helper()
	poll(t, context.Background(), "the burst under way", time.Minute, func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.shots) < n {
			return fmt.Errorf("%d answered", len(b.shots))
		}
		return nil
	})
}

// finish stops the burst and returns its drips in the order answered.
func (b *faultBurst) finish() []faultShot {
	close(b.stop)
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.shots)
}

// faultDrip is one drip through door, v1 (the address in the query) or v3
// (in a JSON body).
func faultDrip(ctx context.Context, hc *http.Client, faucetURL, door string, to stacks.Address) faultShot {
	s := faultShot{to: to, door: door, sent: time.Now()}
	defer func() { s.at = time.Now() }()
	var req *http.Request
	var err error
	if door == "v1" {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, faucetURL+"/extended/v1/faucets/stx?address="+to.String(), nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, faucetURL+"/extended/v3/faucets/stx",
			strings.NewReader(fmt.Sprintf(`{"address":%q}`, to.String())))
		if req != nil {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if err != nil {
		s.body = err.Error()
		s.at = time.Now()
		return s
	}
	resp, err := hc.Do(req)
	if err != nil {
		s.body = err.Error()
		s.at = time.Now()
		return s
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	s.code, s.body, s.retryAfter, s.at = resp.StatusCode, string(body), resp.Header.Get("Retry-After"), time.Now()
	var v struct {
		TxID        string `json:"txId"`
		Transaction struct {
			TxID string `json:"tx_id"`
		} `json:"transaction"`
		Reason string `json:"reason"`
	}
	if json.Unmarshal(body, &v) == nil {
		s.reason = v.Reason
		if s.code == http.StatusOK {
			s.txid = v.TxID + v.Transaction.TxID
		}
	}
	return s
}

// logTally logs the answers by door and status, and each second of the
// burst from t0 on whose answers were not all 200.
func logTally(t *testing.T, shots []faultShot, t0 time.Time) {
	t.Helper()
	tally := map[string]int{}
	type second struct{ ok, other int }
	bySecond := map[int]*second{}
	var codes []string
	for _, s := range shots {
		key := fmt.Sprintf("%s %d", s.door, s.code)
		if s.code != http.StatusOK && s.code != 0 {
			var v struct{ Reason, Error string }
			_ = json.Unmarshal([]byte(s.body), &v)
			key += " " + v.Reason
			if v.Reason == "" {
				key += v.Error
			}
		}
		if s.code == 0 {
			key += " " + shorten(s.body)
		}
		if tally[key]++; tally[key] == 1 {
			codes = append(codes, key)
		}
		sec := int(s.sent.Sub(t0).Seconds())
		if s.sent.Before(t0) {
			sec = -1
		}
		if bySecond[sec] == nil {
			bySecond[sec] = &second{}
		}
		if s.code == http.StatusOK {
			bySecond[sec].ok++
		} else {
			bySecond[sec].other++
		}
	}
	slices.Sort(codes)
	var lines []string
	for _, k := range codes {
		lines = append(lines, fmt.Sprintf("%6d  %s", tally[k], k))
	}
	var secs []int
	for s, v := range bySecond {
		if v.other > 0 {
			secs = append(secs, s)
		}
	}
	slices.Sort(secs)
	var timeline []string
	for _, s := range secs {
		timeline = append(timeline, fmt.Sprintf("+%ds: %d ok, %d not", s, bySecond[s].ok, bySecond[s].other))
	}
	t.Logf("burst of %d drips:\n%s\nseconds (by send time from the fault) with answers other than 200: %s",
		len(shots), strings.Join(lines, "\n"), strings.Join(timeline, "; "))
}

func rel(at, t0 time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return fmt.Sprintf("%+.1fs", at.Sub(t0).Seconds())
}

// --- the money check

// checkMoney is every step's last check, once the chain has settled:
//   - every drip answered 200 is paid exactly once: its txid is mined (on
//     the canonical chain, successfully) and pays its recipient the drip,
//     from one of the suite's keys; the recipient holds exactly one drip;
//   - a drip refused with a status paid nothing; one without an answer
//     paid nothing or one drip, never more;
//   - no two answered txids share a key's nonce, and the keys' nonces have
//     no gap: every replica's next nonce for each key it owns is the
//     node's, with nothing in flight.
func (r *faultRig) checkMoney(t *testing.T, ctx context.Context, shots []faultShot) {
	t.Helper()
	start := time.Now()
	want := map[stacks.Address]uint64{}
	unknown := map[stacks.Address]bool{}
	var refused []stacks.Address
	byTx := map[string][]stacks.Address{}
	for _, s := range shots {
		switch {
		case s.code == http.StatusOK:
			want[s.to] = dripUSTX
			if s.txid == "" {
				t.Errorf("drip to %s answered 200 without a txid: %s", s.to, s.body)
				continue
			}
			byTx[s.txid] = append(byTx[s.txid], s.to)
		case s.code == 0:
			unknown[s.to] = true
		default:
			refused = append(refused, s.to)
		}
	}
	waitBalances(t, ctx, r.nodeURL, want, unknown, 3*time.Minute)
	r.checkTxs(t, ctx, byTx)
	r.waitNoncesSettled(t, ctx)
	for _, a := range refused {
		if b, err := readBalance(r.nodeURL, a); err != nil || b != 0 {
			t.Errorf("%s, whose drip was refused, holds %d µSTX (%v): a refused drip must pay nothing", a, b, err)
		}
	}
	t.Logf("money: %d drips answered 200 in %d transactions, each mined once to its recipient; %d refused paid nothing; %d unanswered paid at most once; nonces without gaps (checked in %s)",
		len(want), len(byTx), len(refused), len(unknown), time.Since(start).Round(time.Millisecond))
}

// checkTxs reads each answered txid from the node's index and checks it
// pays exactly its recipients the drip, from one of the keys, at a nonce
// no other answered txid of the key has.
func (r *faultRig) checkTxs(t *testing.T, ctx context.Context, byTx map[string][]stacks.Address) {
	t.Helper()
	type keyNonce struct {
		key   stacks.Address
		nonce uint64
	}
	seen := map[keyNonce]string{}
	for txid, tos := range byTx {
		mined, err := r.nodeClient.Transaction(ctx, txid)
		if err != nil {
			t.Errorf("answered txid %s: %v", txid, err)
			continue
		}
		if !mined.IsOK() || (mined.IsCanonical != nil && !*mined.IsCanonical) {
			t.Errorf("answered txid %s mined with result %s, canonical %v", txid, mined.Result, mined.IsCanonical)
		}
		raw, err := hex.DecodeString(strings.TrimPrefix(mined.Tx, "0x"))
		if err != nil {
			t.Errorf("txid %s: %v", txid, err)
			continue
		}
		tx, err := stacks.DecodeTransaction(raw)
		if err != nil {
			t.Errorf("txid %s: decode: %v", txid, err)
			continue
		}
		sender := tx.SenderAddress()
		if !r.keys[sender] {
			t.Errorf("txid %s sent by %s, not one of the suite's keys", txid, sender)
		}
		kn := keyNonce{sender, tx.Auth.Nonce}
		if other, dup := seen[kn]; dup {
			t.Errorf("txids %s and %s both at nonce %d of %s", other, txid, kn.nonce, sender)
		}
		seen[kn] = txid
		paid := payments(tx)
		for _, to := range tos {
			if n := paid[to]; len(n) != 1 || n[0] != dripUSTX {
				t.Errorf("txid %s pays %s %v, want one drip of %d", txid, to, n, dripUSTX)
			}
		}
	}
}

// payments lists what a transfer or a send-many call pays each recipient.
func payments(tx *stacks.Transaction) map[stacks.Address][]uint64 {
	out := map[stacks.Address][]uint64{}
	if tx.ContractCall == nil {
		out[tx.Payload.Recipient.Address] = append(out[tx.Payload.Recipient.Address], tx.Payload.Amount)
		return out
	}
	if tx.ContractCall.Function != stacks.SendManyFunction || len(tx.ContractCall.Args) != 1 {
		return out
	}
	list, _ := tx.ContractCall.Args[0].(stacks.List)
	for _, v := range list {
		tuple, _ := v.(stacks.Tuple)
		var to stacks.Principal
		var amount uint64
		for _, e := range tuple {
			switch e.Name {
			case "to":
				to, _ = e.Value.(stacks.Principal)
			case "ustx":
				u, _ := e.Value.(stacks.UInt)
				amount, _ = u.Uint64()
			}
		}
		out[to.Address] = append(out[to.Address], amount)
	}
	return out
}

// waitNoncesSettled waits until, on every faucet pod, each key it owns has
// nothing in flight and a next nonce equal to the node's account nonce, and
// every key is owned by exactly one pod.
func (r *faultRig) waitNoncesSettled(t *testing.T, ctx context.Context) {
	t.Helper()
	poll(t, ctx, "the keys' nonces settled on every replica", 2*time.Minute, func() error {
		owners := map[string]int{}
		for _, p := range podsOf(ctx, r.c, fsFaults) {
			if !podReady(&p) {
				return fmt.Errorf("pod %s not Ready", p.Name)
			}
			m, err := scrape(ctx, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(p.Spec.Containers[0].Ports[0].ContainerPort)))+"/metrics")
			if err != nil {
				return err
			}
			for _, k := range faultKeys() {
				a := k.TestnetAddress().String()
				if m[`faucet_key_owned{address="`+a+`"}`] != 1 {
					continue
				}
				owners[a]++
				acct, err := r.nodeClient.Account(ctx, a)
				if err != nil {
					return err
				}
				next, inFlight := m[`faucet_key_nonce{address="`+a+`",kind="next"}`], m[`faucet_key_in_flight{address="`+a+`"}`]
				if inFlight != 0 || uint64(next) != acct.Nonce {
					return fmt.Errorf("key %s on %s: next nonce %v, in flight %v; the node's nonce %d", a, p.Name, next, inFlight, acct.Nonce)
				}
			}
		}
		for _, k := range faultKeys() {
			if a := k.TestnetAddress().String(); owners[a] != 1 {
				return fmt.Errorf("key %s owned by %d replicas", a, owners[a])
			}
		}
		return nil
	})
}

// scrape reads a Prometheus text page into series → value.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	code, body := get(ctx, url)
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", url, code, shorten(body))
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

func shorten(s string) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
