//go:build e2ecluster

package e2ecluster

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The backup step runs docs/backups.md on the real cluster: the online
// backup of the embedded store with `kubectl exec` under a burst of drips,
// and the restore into a new FaucetServer, as the page's commands are
// written (its namespace and names: faucet-testnet, faucet, faucet-data).
const (
	backupNS    = "faucet-testnet"
	backupFS    = "faucet"
	backupClaim = backupFS + "-data"
	backupDoc   = "docs/backups.md"
	// backupDrips drips to fresh addresses from backupWorkers workers;
	// the backup is taken once backupAt are answered.
	backupDrips   = 300
	backupAt      = 100
	backupWorkers = 6
	backupPace    = 100 * time.Millisecond
	// backupAgain addresses that dripped only after the backup drip again
	// on the restored faucet: the page says they may, once.
	backupAgain = 5
	// backupFresh fresh addresses drip on the restored faucet.
	backupFresh = 20
)

// backupKeys are the step's faucet keys, generated once per test binary so
// that the user's path funds them in its devnode's genesis.
var backupKeys = keysOnce(2)

// backupShot is one drip of the step.
type backupShot struct {
	to         stacks.Address
	code       int
	body       string
	retryAfter string
	txid       string
	sent, at   time.Time
}

// backupRestoreStep: a FaucetServer on the embedded store (a limit of 1
// drip per address a day) answers a burst of drips; mid-burst the page's
// `kubectl exec … faucet store backup --out -` backs it up; the
// FaucetServer is deleted with its key Secret, and once its transactions
// are mined, the page's "Into a new FaucetServer" procedure restores the
// backup into a new FaucetServer on a new volume, and its "Into the
// existing FaucetServer" restores it again over that. The restored faucet
// refuses every address answered before the backup (429), pays fresh ones,
// and across both pods every drip answered 200 is mined exactly once to its
// recipient with no key's nonce used twice or skipped. It needs the
// operator installed and a devnode at nodeURL funding backupKeys; it leaves
// nothing behind, passed or failed.
func backupRestoreStep(t *testing.T, ctx context.Context, e env, c client.Client, nodeURL string) {
	md, err := os.ReadFile(filepath.Join(e.repo, backupDoc))
	if err != nil {
		t.Fatal(err)
	}
	doc := backupDocCommands(t, md)
	nc, err := node.New(nodeURL, rpcclient.WithTimeout(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir() // the reader's working directory: the backup file, restore-pod.json
	oldDir := filepath.Join(e.state, "volumes", "backup-old")
	newDir := filepath.Join(e.state, "volumes", "backup-new")
	t.Cleanup(func() { cleanUpBackupStep(t, e, oldDir, newDir) })

	// The faucet that is backed up.
	e.apply(t, ctx, backupNamespaceManifest())
	staticVolume(t, ctx, e, "backup-old", backupNS, backupClaim, oldDir)
	e.apply(t, ctx, backupKeySecretManifest(backupKeys()))
	e.apply(t, ctx, backupFaucetServerManifest(nodeURL))
	waitFaucetServerReady(t, ctx, c, backupNS, backupFS, 3*time.Minute)
	oldURL := "http://" + serviceAddr(t, ctx, c, backupNS, backupFS)
	waitServed(t, ctx, oldURL)

	// The burst, and the backup as the page writes it, mid-burst.
	var answered atomic.Int32
	reached := make(chan struct{})
	var once sync.Once
	shots := make([]backupShot, backupDrips)
	var next atomic.Int32
	var wg sync.WaitGroup
	for range backupWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= backupDrips {
					return
				}
				shots[i] = backupDrip(ctx, oldURL, newKey(t).TestnetAddress())
				if answered.Add(1) >= backupAt {
					once.Do(func() { close(reached) })
				}
				time.Sleep(backupPace)
			}
		})
	}
	select {
	case <-reached:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	backupStart := time.Now()
	_, backupLog := runDocCommand(t, ctx, e, work, doc.backup)
	backupEnd := time.Now()
	answeredAtBackup := answered.Load()
	wg.Wait()
	backupFile := filepath.Join(work, "faucet-backup.db") // what the page's command writes and its restore reads
	fi, err := os.Stat(backupFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the backup (%s's kubectl exec), taken after %d answers while the burst went on: %d bytes in %.2f s; its summary:\n%s",
		backupDoc, answeredAtBackup, fi.Size(), backupEnd.Sub(backupStart).Seconds(), backupLog)
	if !strings.Contains(backupLog, "online: a faucet was running on it") {
		t.Errorf("the backup did not say it was taken online:\n%s", backupLog)
	}

	// Classify the burst's drips: answered before the backup began (in it),
	// or sent after it ended (not in it).
	var before, after []stacks.Address
	ok := map[stacks.Address]uint64{}
	byTx := map[string][]stacks.Address{}
	for _, s := range shots {
		if s.code != http.StatusOK || s.txid == "" {
			t.Errorf("drip to %s during the burst: %d %s", s.to, s.code, shorten(s.body))
			continue
		}
		ok[s.to] = dripUSTX
		byTx[s.txid] = append(byTx[s.txid], s.to)
		switch {
		case s.at.Before(backupStart):
			before = append(before, s.to)
		case s.sent.After(backupEnd):
			after = append(after, s.to)
		}
	}
	t.Logf("burst: %d drips, %d answered 200 in %d transactions; %d answered before the backup began, %d sent after it ended",
		len(shots), len(ok), len(byTx), len(before), len(after))
	if t.Failed() {
		t.FailNow()
	}

	// The old faucet goes, its key Secret with it (a new cluster has
	// neither; the new FaucetServer gets it as usual), and its
	// transactions are mined.
	deleted := time.Now()
	e.run(t, ctx, e.kubectl, "delete", "fsrv", "-n", backupNS, backupFS, "--wait", "--timeout", "2m")
	e.run(t, ctx, e.kubectl, "delete", "secret", "-n", backupNS, "faucet-keys", "--wait")
	runDocCommand(t, ctx, e, work, doc.claimGone)
	poll(t, ctx, "the old FaucetServer's pod and claim gone", 2*time.Minute, func() error {
		left := e.kubectlOut(t, ctx, "get", "deploy,rs,pod,svc,sa,pvc", "-n", backupNS, "-l", "app.kubernetes.io/instance="+backupFS, "-o", "name")
		if strings.TrimSpace(left) != "" {
			return fmt.Errorf("left: %s", strings.Join(strings.Fields(left), " "))
		}
		return nil
	})
	waitBalances(t, ctx, nodeURL, ok, nil, 2*time.Minute)
	t.Logf("the old FaucetServer deleted; its pod and claim gone and its %d drips mined %.1f s later", len(ok), time.Since(deleted).Seconds())

	// The page's "Into a new FaucetServer", on a new volume, then "Into the
	// existing FaucetServer" on the restored one before it answers a drip
	// (the same backup again: the same state).
	staticVolume(t, ctx, e, "backup-new", backupNS, backupClaim, newDir)
	restoreIntoNew(t, ctx, e, c, doc, work, nodeURL)
	restoreIntoExisting(t, ctx, e, c, doc, work)
	newURL := "http://" + serviceAddr(t, ctx, c, backupNS, backupFS)
	waitServed(t, ctx, newURL)
	pod := onlyPod(t, ctx, c, backupNS, "app.kubernetes.io/instance="+backupFS)
	if !usesClaim(pod, backupClaim) {
		t.Fatalf("the restored pod %s does not mount the claim %s", pod.Name, backupClaim)
	}

	checkRestoredFaucet(t, ctx, e, c, nc, nodeURL, newURL, before, after, ok, byTx)
}

// restoreIntoNew runs the page's "Into a new FaucetServer": the key Secret
// and the FaucetServer with replicas 0 applied, the page's wait for
// Stopped (checked: the claim is the FaucetServer's, its Deployment at 0,
// no pod, neither Reconciling nor Stalled), the restore, then the page's
// scale to 1 and wait for Ready.
func restoreIntoNew(t *testing.T, ctx context.Context, e env, c client.Client, doc backupDocSteps, work, nodeURL string) {
	t.Helper()
	e.apply(t, ctx, backupKeySecretManifest(backupKeys()))
	applied := time.Now()
	e.apply(t, ctx, strings.Replace(backupFaucetServerManifest(nodeURL), "spec:\n", "spec:\n  replicas: 0\n", 1))
	runDocCommand(t, ctx, e, work, doc.restorePod)
	runDocCommand(t, ctx, e, work, doc.stopped)
	stoppedIn := time.Since(applied)
	checkStopped(t, ctx, c)
	restoreStart := time.Now()
	restoreOut, _ := runDocCommand(t, ctx, e, work, doc.restore)
	restoreTook := time.Since(restoreStart)
	rows := restoredRows(restoreOut)
	if !strings.Contains(restoreOut, "restored ") || rows["limit_slots"] == 0 || rows["drips"] == 0 {
		t.Fatalf("the restore printed no rows of limit_slots or drips:\n%s", restoreOut)
	}
	startAt := time.Now()
	runDocCommand(t, ctx, e, work, doc.start)
	waitFaucetServerReady(t, ctx, c, backupNS, backupFS, 3*time.Minute)
	readyIn := time.Since(startAt)
	pod := onlyPod(t, ctx, c, backupNS, "app.kubernetes.io/instance="+backupFS)
	t.Logf("into a new FaucetServer: Stopped %.1f s after it was applied with replicas 0; the restore (kubectl run -i --rm) took %.2f s; Ready %.1f s after kubectl scale --replicas=1 (its pod %s created at +%s, to the API server's second); the restore printed:\n%s",
		stoppedIn.Seconds(), restoreTook.Seconds(), readyIn.Seconds(), pod.Name, max(0, pod.CreationTimestamp.Sub(startAt).Round(time.Second)), restoreOut)
}

// restoreIntoExisting runs the page's "Into the existing FaucetServer" on
// the running faucet: the page's scale to 0 and wait for Stopped (checked
// as in restoreIntoNew), the restore over the store there, the page's
// scale to 1, then Ready.
func restoreIntoExisting(t *testing.T, ctx context.Context, e env, c client.Client, doc backupDocSteps, work string) {
	t.Helper()
	stopAt := time.Now()
	runDocCommand(t, ctx, e, work, doc.stop)
	stoppedIn := time.Since(stopAt)
	checkStopped(t, ctx, c)
	restoreStart := time.Now()
	restoreOut, restoreErr := runDocCommand(t, ctx, e, work, doc.restore)
	restoreTook := time.Since(restoreStart)
	if rows := restoredRows(restoreOut); rows["limit_slots"] == 0 || rows["drips"] == 0 {
		t.Fatalf("the restore over the existing store printed no rows of limit_slots or drips:\n%s\n%s", restoreOut, restoreErr)
	}
	if !strings.Contains(restoreOut+restoreErr, ".before-restore") {
		t.Errorf("the restore over the existing store did not say it kept it as faucet.db.before-restore:\n%s\n%s", restoreOut, restoreErr)
	}
	startAt := time.Now()
	runDocCommand(t, ctx, e, work, doc.startAgain)
	waitFaucetServerReady(t, ctx, c, backupNS, backupFS, 3*time.Minute)
	t.Logf("into the existing FaucetServer: Stopped %.1f s after kubectl scale --replicas=0 (the pod gone); the restore with --force took %.2f s; Ready %.1f s after kubectl scale --replicas=1",
		stoppedIn.Seconds(), restoreTook.Seconds(), time.Since(startAt).Seconds())
}

// checkStopped checks a FaucetServer the page's wait found Stopped: Ready
// False with reason Stopped at its generation, neither Reconciling nor
// Stalled (kstatus Current), status.replicas 0, its Deployment at 0
// replicas with no faucet pod left, and its claim there and controlled by
// it.
func checkStopped(t *testing.T, ctx context.Context, c client.Client) {
	t.Helper()
	var fs faucetv1alpha1.FaucetServer
	if err := c.Get(ctx, client.ObjectKey{Namespace: backupNS, Name: backupFS}, &fs); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != faucetv1alpha1.ReasonStopped || ready.ObservedGeneration != fs.Generation {
		t.Fatalf("Ready %+v, want False Stopped at generation %d", ready, fs.Generation)
	}
	for _, typ := range []string{faucetv1alpha1.ConditionReconciling, faucetv1alpha1.ConditionStalled} {
		if cond := meta.FindStatusCondition(fs.Status.Conditions, typ); cond != nil {
			t.Errorf("a stopped FaucetServer has %+v", cond)
		}
	}
	if fs.Status.Replicas != 0 || fs.Status.Selector == "" {
		t.Errorf("status.replicas %d, status.selector %q; want 0 and the pods' selector", fs.Status.Replicas, fs.Status.Selector)
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: backupNS, Name: backupFS}, &d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 0 || d.Status.Replicas != 0 {
		t.Errorf("Deployment replicas %v, %d in its status; want 0", d.Spec.Replicas, d.Status.Replicas)
	}
	// A pod counts while it runs or is being deleted (the operator's rule);
	// an evicted one, terminated and not deleted, would not.
	list, err := pods(ctx, c, backupNS, fs.Status.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list {
		if p.DeletionTimestamp != nil || (p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed) {
			t.Errorf("a stopped FaucetServer's pod %s is left: phase %s, deleted at %v", p.Name, p.Status.Phase, p.DeletionTimestamp)
		}
	}
	var pvc corev1.PersistentVolumeClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: backupNS, Name: backupClaim}, &pvc); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&pvc, &fs) {
		t.Errorf("claim %s is not controlled by the FaucetServer: %+v", backupClaim, pvc.OwnerReferences)
	}
}

// checkRestoredFaucet checks what the restored faucet at newURL answers:
// 429 with Retry-After for every address of before, 200 for backupAgain of
// after (they may drip once more) and for fresh ones; then the money of
// both faucets, ok and byTx the old one's answered drips.
func checkRestoredFaucet(t *testing.T, ctx context.Context, e env, c client.Client, nc *node.Client, nodeURL, newURL string,
	before, after []stacks.Address, ok map[stacks.Address]uint64, byTx map[string][]stacks.Address) {
	t.Helper()
	refused := 0
	for _, a := range before {
		s := backupDrip(ctx, newURL, a)
		if s.code == http.StatusTooManyRequests && s.retryAfter != "" {
			refused++
			continue
		}
		t.Errorf("%s, answered 200 before the backup, dripped again on the restored faucet: %d %s (Retry-After %q); want 429, its limit carried over",
			a, s.code, shorten(s.body), s.retryAfter)
	}
	answer := func(a stacks.Address, what string) {
		s := backupDrip(ctx, newURL, a)
		if s.code != http.StatusOK || s.txid == "" {
			t.Errorf("%s on the restored faucet: %d %s", what, s.code, shorten(s.body))
			return
		}
		ok[a] += dripUSTX
		byTx[s.txid] = append(byTx[s.txid], a)
	}
	again := after[:min(backupAgain, len(after))]
	for _, a := range again {
		answer(a, "a drip to "+a.String()+", which dripped only after the backup")
	}
	for range backupFresh {
		answer(newKey(t).TestnetAddress(), "a fresh drip")
	}
	t.Logf("after the restore: %d of %d addresses answered before the backup refused 429 with Retry-After; %d that dripped only after it paid again, as %s says; %d fresh drips answered 200",
		refused, len(before), len(again), backupDoc, backupFresh)
	if t.Failed() {
		t.FailNow()
	}

	// The money, across both pods.
	waitBalances(t, ctx, nodeURL, ok, nil, 2*time.Minute)
	keys := map[stacks.Address]bool{}
	for _, a := range addressesOf(backupKeys()) {
		keys[a] = true
	}
	r := &faultRig{e: e, c: c, nodeURL: nodeURL, keys: keys, nodeClient: nc}
	r.checkTxs(t, ctx, byTx)
	waitRestoredSettled(t, ctx, c, nc)
	drips := 0
	for _, tos := range byTx {
		drips += len(tos)
	}
	nonces := checkNoncesCovered(t, ctx, nc, byTx)
	t.Logf("money: %d drips answered 200 across both pods (%d recipients) in %d transactions, each mined once to its recipient; the keys' nonces %v used once each, none skipped",
		drips, len(ok), len(byTx), nonces)
}

// checkNoncesCovered reads each txid's sender and nonce from the node and
// checks that, for each key, the answered transactions hold every nonce
// below the node's account nonce exactly once: nothing was sent that no
// drip answered, and no nonce was skipped. It returns each key's nonce.
func checkNoncesCovered(t *testing.T, ctx context.Context, nc *node.Client, byTx map[string][]stacks.Address) map[string]uint64 {
	t.Helper()
	used := map[stacks.Address]map[uint64]bool{}
	for txid := range byTx {
		mined, err := nc.Transaction(ctx, txid)
		if err != nil {
			t.Fatalf("txid %s: %v", txid, err)
		}
		raw, err := hex.DecodeString(strings.TrimPrefix(mined.Tx, "0x"))
		if err != nil {
			t.Fatalf("txid %s: %v", txid, err)
		}
		tx, err := stacks.DecodeTransaction(raw)
		if err != nil {
			t.Fatalf("txid %s: decode: %v", txid, err)
		}
		if used[tx.SenderAddress()] == nil {
			used[tx.SenderAddress()] = map[uint64]bool{}
		}
		used[tx.SenderAddress()][tx.Auth.Nonce] = true
	}
	out := map[string]uint64{}
	for _, k := range addressesOf(backupKeys()) {
		acct, err := nc.Account(ctx, k.String())
		if err != nil {
			t.Fatal(err)
		}
		out[k.String()] = acct.Nonce
		for n := range acct.Nonce {
			if !used[k][n] {
				t.Errorf("key %s: nonce %d is mined (the node's nonce is %d) but no drip answered 200 holds it", k, n, acct.Nonce)
			}
		}
		for n := range used[k] {
			if n >= acct.Nonce {
				t.Errorf("key %s: an answered transaction at nonce %d, above the node's nonce %d", k, n, acct.Nonce)
			}
		}
	}
	return out
}

// waitRestoredSettled waits until the restored pod's metrics show, for each
// key, nothing in flight and a next nonce equal to the node's.
func waitRestoredSettled(t *testing.T, ctx context.Context, c client.Client, nc *node.Client) {
	t.Helper()
	poll(t, ctx, "the restored faucet's keys settled", 2*time.Minute, func() error {
		list, err := pods(ctx, c, backupNS, "app.kubernetes.io/instance="+backupFS)
		if err != nil {
			return err
		}
		if len(list) != 1 || !podReady(&list[0]) {
			return fmt.Errorf("%d pods", len(list))
		}
		p := list[0]
		m, err := scrape(ctx, "http://"+net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(p.Spec.Containers[0].Ports[0].ContainerPort)))+"/metrics")
		if err != nil {
			return err
		}
		for _, k := range addressesOf(backupKeys()) {
			acct, err := nc.Account(ctx, k.String())
			if err != nil {
				return err
			}
			next, inFlight := m[`faucet_key_nonce{address="`+k.String()+`",kind="next"}`], m[`faucet_key_in_flight{address="`+k.String()+`"}`]
			if inFlight != 0 || uint64(next) != acct.Nonce {
				return fmt.Errorf("key %s: next nonce %v, in flight %v; the node's nonce %d", k, next, inFlight, acct.Nonce)
			}
		}
		return nil
	})
}

// backupDrip is a v1 drip through the test's client.
func backupDrip(ctx context.Context, faucetURL string, to stacks.Address) backupShot {
	s := backupShot{to: to, sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, faucetURL+"/extended/v1/faucets/stx?address="+to.String(), nil)
	if err != nil {
		s.body, s.at = err.Error(), time.Now()
		return s
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		s.body, s.at = err.Error(), time.Now()
		return s
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	s.code, s.body, s.retryAfter, s.at = resp.StatusCode, body.String(), resp.Header.Get("Retry-After"), time.Now()
	var v1 struct {
		TxID string `json:"txId"`
	}
	if s.code == http.StatusOK && json.Unmarshal(body.Bytes(), &v1) == nil {
		s.txid = v1.TxID
	}
	return s
}

// --- the page's commands

// backupDocSteps are the commands of docs/backups.md the step runs.
type backupDocSteps struct {
	backup     string // "Back up": kubectl exec … --out - > faucet-backup.db
	restorePod string // "Restore on Kubernetes": IMAGE=…, restore-pod.json
	claimGone  string // "Into a new FaucetServer" 1: wait until the old claim is gone
	stopped    string // 1: kubectl wait … until Ready's reason is Stopped
	restore    string // 2: kubectl run faucet-restore -i --rm …
	start      string // 3: kubectl scale … --replicas=1, wait Ready
	stop       string // "Into the existing FaucetServer" 1: scale to 0, wait Stopped
	startAgain string // 3: kubectl scale … --replicas=1
}

// backupDocCommands finds the commands in the page's sh blocks.
func backupDocCommands(t *testing.T, md []byte) backupDocSteps {
	t.Helper()
	var s backupDocSteps
	find := func(from, to string, want ...string) string {
		for _, b := range shBlocks(md, from, to) {
			if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(b, w) }) {
				return b
			}
		}
		t.Fatalf("%s: no sh block between %q and %q with %q", backupDoc, from, to, want)
		return ""
	}
	s.backup = find("### Back up", "### Restore", "kubectl", "exec deploy/faucet", "--out -")
	s.restorePod = find("### Restore on Kubernetes", "#### Into a new FaucetServer", "IMAGE=", "restore-pod.json")
	const intoNew, intoExisting, postgres = "#### Into a new FaucetServer", "#### Into the existing FaucetServer", "## Postgres"
	s.stopped = find(intoNew, intoExisting, "kubectl", "wait fsrv/faucet", `=="Ready"`, "=Stopped")
	s.start = find(intoNew, intoExisting, "kubectl", "scale fsrv/faucet --replicas=1", "--for=condition=Ready")
	s.stop = find(intoExisting, postgres, "kubectl", "scale fsrv/faucet --replicas=0", "wait fsrv/faucet", "=Stopped")
	s.startAgain = find(intoExisting, postgres, "kubectl", "scale fsrv/faucet --replicas=1")
	_, section, found := bytes.Cut(md, []byte("#### Into a new FaucetServer"))
	if !found {
		t.Fatalf("%s has no \"Into a new FaucetServer\"", backupDoc)
	}
	if m := regexp.MustCompile("`(kubectl [^`]*wait pvc/faucet-data --for=delete[^`]*)`").FindSubmatch(section); m != nil {
		s.claimGone = string(m[1])
	} else {
		t.Fatalf("%s: \"Into a new FaucetServer\" says no kubectl wait pvc/faucet-data --for=delete", backupDoc)
	}
	s.restore = find(intoNew, intoExisting, "kubectl", "run faucet-restore", "--overrides")
	return s
}

// shBlocks returns the ```sh blocks of md between the lines from and to,
// each without the indentation of its fence (a block in a list item).
func shBlocks(md []byte, from, to string) []string {
	var blocks []string
	in, indent := false, ""
	var cur []string
	inside := false
	for _, line := range strings.Split(string(md), "\n") {
		switch {
		case line == from:
			inside = true
		case line == to:
			inside = false
		}
		if !inside {
			continue
		}
		switch trimmed := strings.TrimSpace(line); {
		case !in && trimmed == "```sh":
			in, indent, cur = true, line[:len(line)-len(strings.TrimLeft(line, " "))], nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

// imageLine is the page's IMAGE=… line, set to the image under test.
var imageLine = regexp.MustCompile(`(?m)^IMAGE=\S+`)

// runDocCommand runs a command of the page in bash in dir, as a reader
// would: kubectl on PATH, the cluster's kubeconfig, IMAGE kept from the
// restore-pod.json block. It returns stdout and stderr; a failure fails the
// test with both.
func runDocCommand(t *testing.T, ctx context.Context, e env, dir, command string) (string, string) {
	t.Helper()
	command = imageLine.ReplaceAllLiteralString(command, "IMAGE="+e.image)
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig, "IMAGE="+e.image,
		"PATH="+filepath.Dir(e.kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s's command failed: %v\n%s\nstdout: %s\nstderr: %s", backupDoc, err, command, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// restoredRows reads the table of `faucet store restore`'s summary.
func restoredRows(out string) map[string]int64 {
	rows := map[string]int64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if n, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			rows[f[0]] = n
		}
	}
	return rows
}

// --- the cluster

// cleanUpBackupStep shows what was there after a failure, then deletes the
// namespace, both volumes and their directories.
func cleanUpBackupStep(t *testing.T, e env, dirs ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string {
		cmd := exec.CommandContext(ctx, e.kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if t.Failed() {
		t.Logf("after the failure:\n%s\nthe faucet's log:\n%s", kubectl("get", "fsrv,pods,pvc,pv", "-n", backupNS, "-o", "wide"),
			kubectl("logs", "-n", backupNS, "deploy/"+backupFS, "--tail", "40"))
	}
	if out := kubectl("delete", "namespace", backupNS, "--ignore-not-found", "--wait", "--timeout", "3m"); strings.Contains(out, "error") {
		t.Errorf("clean-up: %s", out)
	}
	if out := kubectl("delete", "pv", "backup-old", "backup-new", "--ignore-not-found", "--wait", "--timeout", "1m"); strings.Contains(out, "error") {
		t.Errorf("clean-up: %s", out)
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			t.Error(err)
		}
	}
}

// backupNamespaceManifest is the page's namespace, enforcing the restricted
// Pod Security level: the page says the restore pod passes it.
func backupNamespaceManifest() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
`, backupNS)
}

func backupKeySecretManifest(keys []*stacks.PrivateKey) string {
	hexes := make([]string, len(keys))
	for i, k := range keys {
		hexes[i] = k.Hex()
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: faucet-keys
  namespace: %s
type: Opaque
stringData:
  keys: "%s"
`, backupNS, strings.Join(hexes, `\n`))
}

// backupFaucetServerManifest is the FaucetServer faucet on the embedded
// store, with a limit of 1 drip per address a day (the test's clients
// share one IP: its limit is high).
func backupFaucetServerManifest(nodeURL string) string {
	return fmt.Sprintf(`apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata:
  name: %s
  namespace: %s
spec:
  node:
    url: %s
  keySecretRef:
    name: faucet-keys
  rateLimits:
    perAddress: {requests: 1, window: 24h}
    perIP: {requests: 100000, window: 5m}
`, backupFS, backupNS, nodeURL)
}

// TestBackupOnly runs the backup step alone on a cluster: the operator
// installed by helm and a devnode funding backupKeys. E2E_ONLY_BACKUP=1,
// for working on the step (TestUserPathOnARealCluster runs it in `make
// e2e-cluster`).
func TestBackupOnly(t *testing.T) {
	if os.Getenv("E2E_ONLY_BACKUP") != "1" {
		t.Skip("E2E_ONLY_BACKUP=1 runs the backup step alone; make e2e-cluster runs it in TestUserPathOnARealCluster")
	}
	e := loadEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := newClient(t, e.kubeconfig)
	installOperatorAlone(t, ctx, e)
	defer e.run(t, ctx, e.kubectl, "delete", "namespace", ns, "--ignore-not-found", "--wait", "--timeout", "2m")
	e.apply(t, ctx, devnodeManifest(e.image, addressesOf(backupKeys())...))
	waitAvailable(t, ctx, c, ns, "devnode", 2*time.Minute)
	nodeURL := "http://" + serviceAddr(t, ctx, c, ns, "devnode")
	poll(t, ctx, "the devnode funding the step's keys", time.Minute, func() error {
		bal, err := readBalance(nodeURL, backupKeys()[0].TestnetAddress())
		if err == nil && bal != keyFunding {
			return fmt.Errorf("balance %d", bal)
		}
		return err
	})
	t.Run("a backup taken under a drip burst, restored into a new pod: limits carried over, every drip paid once", func(t *testing.T) {
		backupRestoreStep(t, ctx, e, c, nodeURL)
	})
	// The namespace is gone once the step ends.
	err := c.Get(ctx, client.ObjectKey{Name: backupNS}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after the step: %v, want it gone", backupNS, err)
	}
}
