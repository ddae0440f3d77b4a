//go:build e2ecluster

package e2ecluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

const (
	// pullFailureName is the FaucetServer of imagePullFailureStep.
	pullFailureName = "pull-failure"
	// unpullableImage is in no registry: the node's containerd finds no
	// registry at localhost.
	unpullableImage = "localhost/faucet-operator/does-not-exist:1"
)

// imagePullFailureStep creates a FaucetServer whose spec.image no node can
// pull and checks that, within a minute of `kubectl apply`, its Ready
// condition is False with reason ImagePullFailed and a message naming the
// image, and that it is Stalled: the kubelet reports ErrImagePull within
// seconds, and the operator watches the faucet's pods. It runs on a Postgres
// store whose URI nothing connects to (the container never starts), as the
// cluster has no StorageClass: an embedded store's pod would wait for a
// volume, not pull. Everything it creates is deleted when it ends, passed
// or failed. It needs the operator installed and the namespace ns; nodeURL
// is any Stacks node (the funding monitor reads it meanwhile).
func imagePullFailureStep(t *testing.T, ctx context.Context, e env, c client.Client, nodeURL string) {
	t.Cleanup(func() {
		e.run(t, ctx, e.kubectl, "delete", "faucetserver", "-n", ns, pullFailureName, "--ignore-not-found", "--wait=true", "--timeout=2m")
		e.run(t, ctx, e.kubectl, "delete", "secret", "-n", ns, pullFailureName+"-keys", pullFailureName+"-store", "--ignore-not-found", "--wait=true")
		poll(t, ctx, "every object of the FaucetServer "+pullFailureName+" gone", 2*time.Minute, func() error {
			out := e.kubectlOut(t, ctx, "get", "deploy,rs,pods,svc,sa,configmaps,secrets", "-n", ns, "-o", "name")
			if left := grepLines(out, pullFailureName); left != "" {
				return errors.New(left)
			}
			return nil
		})
	})

	start := time.Now()
	e.apply(t, ctx, pullFailureManifest(newKey(t), nodeURL))
	var fs faucetv1alpha1.FaucetServer
	var ready *metav1.Condition
	poll(t, ctx, "Ready=False "+faucetv1alpha1.ReasonImagePullFailed+" naming "+unpullableImage, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pullFailureName}, &fs); err != nil {
			return err
		}
		ready = meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionReady)
		switch {
		case ready == nil:
			return errors.New("no Ready condition yet")
		case ready.Status != metav1.ConditionFalse || ready.Reason != faucetv1alpha1.ReasonImagePullFailed:
			return fmt.Errorf("Ready=%s %s: %s", ready.Status, ready.Reason, ready.Message)
		case !strings.Contains(ready.Message, `"`+unpullableImage+`"`):
			return fmt.Errorf("the message does not name the image: %s", ready.Message)
		}
		return nil
	})
	t.Logf("Ready=False %s %.1f s after kubectl apply: %s", ready.Reason, time.Since(start).Seconds(), ready.Message)
	stalled := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionStalled)
	if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != faucetv1alpha1.ReasonImagePullFailed {
		t.Errorf("Stalled %+v, want True %s: kstatus tools should report the FaucetServer failed", stalled, faucetv1alpha1.ReasonImagePullFailed)
	}
	if !strings.Contains(ready.Message, "spec.image") {
		t.Errorf("the message does not say the image comes from spec.image: %s", ready.Message)
	}
	t.Logf("kubectl get fsrv:\n%s", e.kubectlOut(t, ctx, "get", "fsrv", "-n", ns, pullFailureName))
}

// pullFailureManifest is the FaucetServer pullFailureName running
// unpullableImage, with its key Secret (k) and a store Secret whose URI
// points nowhere.
func pullFailureManifest(k *stacks.PrivateKey, nodeURL string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %[1]s-keys
  namespace: %[2]s
type: Opaque
stringData:
  keys: %[3]s
---
apiVersion: v1
kind: Secret
metadata:
  name: %[1]s-store
  namespace: %[2]s
type: Opaque
stringData:
  uri: postgres://faucet@127.0.0.1:1/unused
---
apiVersion: faucet.stxfaucet.dev/v1alpha1
kind: FaucetServer
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  image: %[4]s
  node:
    url: %[5]s
  keySecretRef:
    name: %[1]s-keys
  store:
    postgres:
      uriSecretRef: {name: %[1]s-store}
`, pullFailureName, ns, k.Hex(), unpullableImage, nodeURL)
}
