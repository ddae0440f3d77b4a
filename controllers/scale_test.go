package controllers

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

func withReplicas(n int32) func(*faucetv1alpha1.FaucetServer) {
	return func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Replicas = ptr.To(n) }
}

func withPostgres(fs *faucetv1alpha1.FaucetServer) {
	fs.Spec.Store = &faucetv1alpha1.StoreSpec{Postgres: &faucetv1alpha1.PostgresStore{URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "db"}}}
}

// scaledDown is a Deployment of 0 replicas at generation 2 whose status
// says it has replicas pods left, observed at generation observed.
func scaledDown(observed int64, replicas int32) *appsv1.Deployment {
	d := deployment(func(s *appsv1.DeploymentStatus) {
		s.ObservedGeneration, s.Replicas, s.UpdatedReplicas = observed, replicas, replicas
		s.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}}
	})
	d.Spec.Replicas = ptr.To(int32(0))
	return d
}

func leftPod(name string, phase corev1.PodPhase, terminating bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase}}
	if terminating {
		p.DeletionTimestamp = ptr.To(metav1.Now())
	}
	return p
}

func TestReplicasOf(t *testing.T) {
	tests := map[string]struct {
		opts []func(*faucetv1alpha1.FaucetServer)
		want int32
		pdb  bool
	}{
		"embedded, default":    {want: 1},
		"embedded, 0":          {opts: []func(*faucetv1alpha1.FaucetServer){withReplicas(0)}, want: 0},
		"embedded, 1":          {opts: []func(*faucetv1alpha1.FaucetServer){withReplicas(1)}, want: 1},
		"embedded, 3 (capped)": {opts: []func(*faucetv1alpha1.FaucetServer){withReplicas(3)}, want: 1},
		"postgres, 0":          {opts: []func(*faucetv1alpha1.FaucetServer){withPostgres, withReplicas(0)}, want: 0},
		"postgres, 3":          {opts: []func(*faucetv1alpha1.FaucetServer){withPostgres, withReplicas(3)}, want: 3, pdb: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture(tt.opts...)
			if got := replicasOf(fs); got != tt.want {
				t.Errorf("replicasOf = %d, want %d", got, tt.want)
			}
			if got := *deploymentFor(fs, "img", secretDigests{}).Spec.Replicas; got != tt.want {
				t.Errorf("Deployment replicas = %d, want %d", got, tt.want)
			}
			if got := podDisruptionBudgetFor(fs) != nil; got != tt.pdb {
				t.Errorf("PodDisruptionBudget: %v, want %v", got, tt.pdb)
			}
		})
	}
}

func TestComputeStatusStopped(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	svc := serviceFor(fixture())
	const stoppedMsg = "spec.replicas is 0: no faucet pod runs; scale it up to serve (kubectl scale fsrv/faucet --replicas=1)"
	tests := map[string]struct {
		opts []func(*faucetv1alpha1.FaucetServer)
		obs  observation
		// reason of Ready (False); reconciling and stalled say which of
		// those conditions must be present, with the same reason
		reason               string
		reconciling, stalled bool
		message              string // of Ready, when not ""
		replicas             int32  // status.replicas
	}{
		"stopped": {
			obs:    observation{keys: goodKeys, service: svc, deployment: scaledDown(2, 0)},
			reason: faucetv1alpha1.ReasonStopped, message: stoppedMsg,
		},
		"stopped, an evicted pod left": {
			obs:    observation{keys: goodKeys, service: svc, deployment: scaledDown(2, 0), pods: []corev1.Pod{leftPod("faucet-x", corev1.PodFailed, false)}},
			reason: faucetv1alpha1.ReasonStopped, message: stoppedMsg,
		},
		"stopped with a Postgres store": {
			opts:   []func(*faucetv1alpha1.FaucetServer){withPostgres},
			obs:    observation{keys: goodKeys, service: svc, deployment: scaledDown(2, 0)},
			reason: faucetv1alpha1.ReasonStopped, message: stoppedMsg,
		},
		"scale-down not observed yet": {
			obs:    observation{keys: goodKeys, service: svc, deployment: scaledDown(1, 1)},
			reason: faucetv1alpha1.ReasonProgressing, reconciling: true, replicas: 1,
			message: `spec.replicas is 0: waiting for Deployment "faucet" to observe generation 2`,
		},
		"pod still counted by the Deployment": {
			obs:    observation{keys: goodKeys, service: svc, deployment: scaledDown(2, 1)},
			reason: faucetv1alpha1.ReasonProgressing, reconciling: true, replicas: 1,
			message: "spec.replicas is 0: waiting for the faucet's pods to stop (1 left)",
		},
		"pod deleted, its containers exited": {
			obs:    observation{keys: goodKeys, service: svc, deployment: scaledDown(2, 0), pods: []corev1.Pod{leftPod("faucet-x", corev1.PodSucceeded, true)}},
			reason: faucetv1alpha1.ReasonProgressing, reconciling: true,
			message: "spec.replicas is 0: waiting for the faucet's pods to stop (1 left)",
		},
		"pod terminating": {
			obs:    observation{keys: goodKeys, service: svc, deployment: scaledDown(2, 0), pods: []corev1.Pod{leftPod("faucet-x", corev1.PodRunning, true)}},
			reason: faucetv1alpha1.ReasonProgressing, reconciling: true,
			message: "spec.replicas is 0: waiting for the faucet's pods to stop (1 left)",
		},
		"a missing key Secret still stalls": {
			obs:    observation{keys: secretState{reason: faucetv1alpha1.ReasonKeySecretNotFound, message: "not found"}, service: svc, deployment: scaledDown(2, 0)},
			reason: faucetv1alpha1.ReasonKeySecretNotFound, stalled: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture(append([]func(*faucetv1alpha1.FaucetServer){withReplicas(0)}, tt.opts...)...)
			st := computeStatus(fs, tt.obs, t0)
			ready := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReady)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != tt.reason {
				t.Fatalf("Ready = %+v, want False %s", ready, tt.reason)
			}
			if tt.message != "" && ready.Message != tt.message {
				t.Errorf("Ready message %q, want %q", ready.Message, tt.message)
			}
			for typ, want := range map[string]bool{faucetv1alpha1.ConditionReconciling: tt.reconciling, faucetv1alpha1.ConditionStalled: tt.stalled} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if (c != nil) != want || (c != nil && c.Reason != tt.reason) {
					t.Errorf("%s = %+v, want present %v", typ, c, want)
				}
			}
			if st.Replicas != tt.replicas || st.ReadyReplicas != 0 {
				t.Errorf("replicas %d ready %d, want %d 0", st.Replicas, st.ReadyReplicas, tt.replicas)
			}
			if want := "app.kubernetes.io/instance=faucet,app.kubernetes.io/name=faucet-server"; st.Selector != want {
				t.Errorf("selector %q, want %q", st.Selector, want)
			}
		})
	}
}

func TestComputeStatusReplicas(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	fs := fixture()
	fs.Status = computeStatus(fs, observation{keys: goodKeys, service: serviceFor(fs), deployment: deployment(available)}, t0)
	if fs.Status.Replicas != 1 || fs.Status.ReadyReplicas != 1 {
		t.Fatalf("replicas %d ready %d, want 1 1", fs.Status.Replicas, fs.Status.ReadyReplicas)
	}
	// A failed reconcile that did not read the Deployment keeps the counts.
	st := computeStatus(fs, observation{err: errors.New("failed to read key Secret: timeout")}, t0.Add(time.Minute))
	if st.Replicas != 1 || st.ReadyReplicas != 1 || st.Selector != fs.Status.Selector {
		t.Errorf("after an error: replicas %d ready %d selector %q, want 1 1 %q", st.Replicas, st.ReadyReplicas, st.Selector, fs.Status.Selector)
	}
}
