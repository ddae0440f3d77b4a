//go:build e2ecluster

package e2ecluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The in-cluster devnet sample (config/samples/devnet): the chains in a pod
// of their own and a FaucetServer on them, applied as the user applies it.
const (
	devnetSample = "config/samples/devnet"
	devnetNS     = "faucet-devnet"
	devnetFS     = "faucet"
	// devnetVolume is the static volume standing in for the default
	// StorageClass a kind cluster has and this one has not.
	devnetVolume = "faucet-devnet-faucet-data"
)

// devnetSampleStep applies the devnet sample with `kubectl apply -k` to a
// cluster running the operator, waits for its FaucetServer to be Ready,
// drips STX (v1), sBTC and BTC (v3) through the faucet's Service until
// each is confirmed in /faucet/v1/drips/{txid}, then deletes the sample
// with `kubectl delete -k` and checks nothing of it is left.
func devnetSampleStep(t *testing.T, e env, ctx context.Context, c client.Client) {
	// The sample's claim, faucet-data, names no class: on kind the default
	// StorageClass provisions it; here a volume prepared by hand, owned by
	// the faucet's user as an administrator would leave it, binds it.
	dir := filepath.Join(e.state, "volumes", devnetVolume)
	staticVolume(t, ctx, e, devnetVolume, devnetNS, devnetFS+"-data", dir)

	sample := filepath.Join(e.repo, devnetSample)
	t.Cleanup(func() {
		if t.Failed() {
			cleanUpDevnet(t, e, sample, dir)
		}
	})
	applied := time.Now()
	t.Logf("kubectl apply -k %s:\n%s", devnetSample, e.run(t, ctx, e.kubectl, "apply", "-k", sample))
	waitFaucetServerReady(t, ctx, c, devnetNS, devnetFS, 5*time.Minute)
	readyIn := time.Since(applied)
	faucetURL := "http://" + serviceAddr(t, ctx, c, devnetNS, devnetFS)
	waitServed(t, ctx, faucetURL)
	poll(t, ctx, "BTC ready in /faucet/v1/info", 2*time.Minute, func() error {
		return assetsReady(ctx, faucetURL, "stx", "sbtc", "btc")
	})
	btcReadyIn := time.Since(applied)

	stxTo, sbtcTo := newKey(t).TestnetAddress(), newKey(t).TestnetAddress()
	btcKey, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
	if err != nil {
		t.Fatal(err)
	}
	code, body := drip(ctx, faucetURL, stxTo)
	var v1 struct {
		TxID string `json:"txId"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &v1) != nil || v1.TxID == "" {
		t.Fatalf("STX drip (v1): %d %s", code, body)
	}
	txids := map[string]string{"stx": v1.TxID}
	for asset, to := range map[string]string{"sbtc": sbtcTo.String(), "btc": btcKey.Address().String()} {
		code, body := postJSON(ctx, faucetURL+"/extended/v3/faucets/"+asset, fmt.Sprintf(`{"address":%q}`, to))
		var v3 struct {
			Transaction struct {
				TxID string `json:"tx_id"`
			} `json:"transaction"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &v3) != nil || v3.Transaction.TxID == "" {
			t.Fatalf("%s drip (v3): %d %s", asset, code, body)
		}
		txids[asset] = v3.Transaction.TxID
	}
	var confirmed []string
	for _, asset := range []string{"stx", "sbtc", "btc"} {
		var block int64
		poll(t, ctx, asset+" drip "+txids[asset]+" confirmed", 2*time.Minute, func() error {
			var err error
			block, err = dripConfirmed(ctx, faucetURL, txids[asset], asset)
			return err
		})
		confirmed = append(confirmed, fmt.Sprintf("%s in block %d", asset, block))
	}
	// The STX landed, exactly once, on the devnet's node.
	waitBalances(t, ctx, "http://"+serviceAddr(t, ctx, c, devnetNS, "devnet"), map[stacks.Address]uint64{stxTo: dripUSTX}, nil, time.Minute)
	t.Logf("PROMISE the devnet sample (kubectl apply -k %s) gave a Ready FaucetServer %.1f s after the apply (BTC ready at %.1f s); drips confirmed: %s",
		devnetSample, readyIn.Seconds(), btcReadyIn.Seconds(), strings.Join(confirmed, ", "))

	deleted := time.Now()
	e.run(t, ctx, e.kubectl, "delete", "-k", sample, "--wait", "--timeout", "3m")
	poll(t, ctx, "namespace "+devnetNS+" gone", 3*time.Minute, func() error {
		var n corev1.Namespace
		err := c.Get(ctx, client.ObjectKey{Name: devnetNS}, &n)
		switch {
		case err == nil:
			return fmt.Errorf("still there (%s)", n.Status.Phase)
		case !apierrors.IsNotFound(err):
			return err
		}
		return nil
	})
	t.Logf("kubectl delete -k %s: the namespace and everything in it gone in %.1f s", devnetSample, time.Since(deleted).Seconds())
	left := e.kubectlOut(t, ctx, "get", "namespaces,pv,clusterroles,clusterrolebindings", "-l", "app.kubernetes.io/part-of=faucet-devnet", "-o", "name")
	if strings.TrimSpace(left) != "" {
		t.Errorf("kubectl delete -k left: %s", strings.Join(strings.Fields(left), " "))
	}
	var pv corev1.PersistentVolume
	if err := c.Get(ctx, client.ObjectKey{Name: devnetVolume}, &pv); err != nil || pv.Status.Phase != corev1.VolumeReleased {
		t.Errorf("the devnet faucet's volume after the delete: %s, %v; want Released (the claim deleted with the namespace)", pv.Status.Phase, err)
	}
	e.run(t, ctx, e.kubectl, "delete", "pv", devnetVolume, "--wait", "--timeout", "1m")
	if err := os.RemoveAll(dir); err != nil {
		t.Error(err)
	}
}

// cleanUpDevnet shows the devnet's pods and logs after a failure, then
// removes the sample and its volume, so the rest of the test runs on a
// clean cluster.
func cleanUpDevnet(t *testing.T, e env, sample, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string {
		cmd := exec.CommandContext(ctx, e.kubectl, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	t.Logf("after the failure: %s\nthe devnet pod's log:\n%s\nthe faucet pod's log:\n%s",
		kubectl("get", "pods,pvc,fsrv", "-n", devnetNS, "-o", "wide"),
		kubectl("logs", "-n", devnetNS, "deploy/devnet", "--tail", "30"),
		kubectl("logs", "-n", devnetNS, "deploy/"+devnetFS, "--tail", "30"))
	t.Log(kubectl("delete", "-k", sample, "--wait", "--timeout", "3m", "--ignore-not-found"))
	t.Log(kubectl("delete", "pv", devnetVolume, "--wait", "--timeout", "1m", "--ignore-not-found"))
	_ = os.RemoveAll(dir)
}

// TestDevnetSampleOnly runs the devnet sample's step alone on a cluster
// with the operator installed by helm: E2E_ONLY_DEVNET=1, for working on
// the sample (TestUserPathOnARealCluster runs the step in `make
// e2e-cluster`).
func TestDevnetSampleOnly(t *testing.T) {
	if os.Getenv("E2E_ONLY_DEVNET") != "1" {
		t.Skip("E2E_ONLY_DEVNET=1 runs the devnet sample alone; make e2e-cluster runs it in TestUserPathOnARealCluster")
	}
	e := loadEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := newClient(t, e.kubeconfig)
	installOperatorAlone(t, ctx, e)
	t.Run("the devnet sample", func(t *testing.T) { devnetSampleStep(t, e, ctx, c) })
}

// installOperatorAlone helm-installs the operator for a step run on its
// own (TestDevnetSampleOnly, TestBackupOnly), and removes it, its CRD and
// its namespace when the test ends.
func installOperatorAlone(t *testing.T, ctx context.Context, e env) {
	t.Helper()
	e.run(t, ctx, e.helm, "install", release, filepath.Join(e.repo, "charts", "faucet-operator"),
		"--namespace", operatorNS, "--create-namespace", "--wait", "--timeout", "3m")
	t.Cleanup(func() {
		// The test's own context has ended by now.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		e.run(t, ctx, e.helm, "uninstall", release, "--namespace", operatorNS, "--wait", "--timeout", "2m")
		e.run(t, ctx, e.kubectl, "delete", "crd", "faucetservers.faucet.stxfaucet.dev", "--wait", "--timeout", "1m")
		e.run(t, ctx, e.kubectl, "delete", "namespace", operatorNS, "--wait", "--timeout", "2m")
	})
}

// waitFaucetServerReady waits for namespace/name's Ready condition, true
// for its current generation.
func waitFaucetServerReady(t *testing.T, ctx context.Context, c client.Client, namespace, name string, timeout time.Duration) {
	t.Helper()
	poll(t, ctx, "FaucetServer "+namespace+"/"+name+" to be Ready", timeout, func() error {
		var fs faucetv1alpha1.FaucetServer
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &fs); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(fs.Status.Conditions, "Ready")
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != fs.Generation {
			return fmt.Errorf("Ready: %+v", cond)
		}
		return nil
	})
}

// assetsReady reads /faucet/v1/info and wants each of assets listed in
// state ready.
func assetsReady(ctx context.Context, faucetURL string, assets ...string) error {
	code, body := get(ctx, faucetURL+"/faucet/v1/info")
	if code != http.StatusOK {
		return fmt.Errorf("info: %d %s", code, body)
	}
	var info struct {
		Assets []struct {
			Asset   string `json:"asset"`
			State   string `json:"state"`
			Message string `json:"state_message"`
		} `json:"assets"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		return err
	}
	states, ready := map[string]string{}, map[string]bool{}
	for _, a := range info.Assets {
		states[a.Asset] = strings.TrimSpace(a.State + " " + a.Message)
		ready[a.Asset] = a.State == "ready"
	}
	for _, a := range assets {
		if !ready[a] {
			return fmt.Errorf("assets %v", states)
		}
	}
	return nil
}

// dripConfirmed reads /faucet/v1/drips/{txid}: the block of a confirmed
// drip of asset, else an error saying its state.
func dripConfirmed(ctx context.Context, faucetURL, txid, asset string) (int64, error) {
	code, body := get(ctx, faucetURL+"/faucet/v1/drips/"+txid)
	if code != http.StatusOK {
		return 0, fmt.Errorf("%d %s", code, body)
	}
	var d struct {
		State       string `json:"state"`
		Asset       string `json:"asset"`
		BlockHeight *int64 `json:"block_height"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		return 0, err
	}
	if d.Asset != asset {
		return 0, fmt.Errorf("the drip is of %q, want %q: %s", d.Asset, asset, body)
	}
	if d.State != "confirmed" || d.BlockHeight == nil {
		return 0, errors.New(body)
	}
	return *d.BlockHeight, nil
}

// postJSON POSTs body as JSON through the test's client; code 0 means no
// answer.
func postJSON(ctx context.Context, url, body string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
