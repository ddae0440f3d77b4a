package controllers

import (
	"errors"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

var goodKeys = secretState{addresses: []string{"ST1", "ST2"}, digest: "d"}

// deployment returns the faucet Deployment at generation 2 with status set
// by mutate, as the Deployment controller would report it.
func deployment(mutate func(*appsv1.DeploymentStatus)) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "faucet", Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))},
	}
	if mutate != nil {
		mutate(&d.Status)
	}
	return d
}

func rolledOut(s *appsv1.DeploymentStatus) {
	s.ObservedGeneration, s.Replicas, s.UpdatedReplicas = 2, 1, 1
	s.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}}
}

func available(s *appsv1.DeploymentStatus) {
	rolledOut(s)
	s.ReadyReplicas, s.AvailableReplicas = 1, 1
}

func TestComputeStatus(t *testing.T) {
	svc := serviceFor(fixture())
	tests := map[string]struct {
		// spec changes applied to the fixture (generation 3)
		mutate func(*faucetv1alpha1.FaucetServer)
		// obs is what the reconcile observed
		obs observation
		// ready is the expected Ready status and reason
		ready       metav1.ConditionStatus
		readyReason string
		// reconciling and stalled are the expected reasons, "" when absent
		reconciling, stalled string
		// observed is whether observedGeneration must equal the generation
		observed bool
		// readyReplicas and addresses are expected in the status
		readyReplicas int32
		addresses     []string
	}{
		"available": {
			obs:   observation{keys: goodKeys, service: svc, deployment: deployment(available)},
			ready: metav1.ConditionTrue, readyReason: faucetv1alpha1.ReasonAvailable,
			observed: true, readyReplicas: 1, addresses: goodKeys.addresses,
		},
		"suspended stays ready": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Suspend = true },
			obs:    observation{keys: goodKeys, service: svc, deployment: deployment(available)},
			ready:  metav1.ConditionTrue, readyReason: faucetv1alpha1.ReasonSuspended,
			observed: true, readyReplicas: 1, addresses: goodKeys.addresses,
		},
		"new Deployment not yet observed": {
			obs:   observation{keys: goodKeys, service: svc, deployment: deployment(nil)},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonProgressing,
			reconciling: faucetv1alpha1.ReasonProgressing, observed: true, addresses: goodKeys.addresses,
		},
		"pod starting": {
			obs: observation{keys: goodKeys, service: svc, deployment: deployment(func(s *appsv1.DeploymentStatus) {
				s.ObservedGeneration, s.Replicas, s.UpdatedReplicas = 2, 1, 1
			})},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonProgressing,
			reconciling: faucetv1alpha1.ReasonProgressing, observed: true, addresses: goodKeys.addresses,
		},
		"old pod terminating (Recreate)": {
			obs: observation{keys: goodKeys, service: svc, deployment: deployment(func(s *appsv1.DeploymentStatus) {
				available(s)
				s.Replicas, s.UpdatedReplicas = 1, 0
			})},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonProgressing,
			reconciling: faucetv1alpha1.ReasonProgressing, observed: true, readyReplicas: 1, addresses: goodKeys.addresses,
		},
		"rolled out, then the pod became unready": {
			obs:   observation{keys: goodKeys, service: svc, deployment: deployment(rolledOut)},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonDeploymentUnavailable,
			reconciling: faucetv1alpha1.ReasonDeploymentUnavailable, observed: true, addresses: goodKeys.addresses,
		},
		"progress deadline exceeded stalls": {
			obs: observation{keys: goodKeys, service: svc, deployment: deployment(func(s *appsv1.DeploymentStatus) {
				s.ObservedGeneration, s.Replicas, s.UpdatedReplicas = 2, 1, 1
				s.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
			})},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonProgressDeadlineExceeded,
			stalled: faucetv1alpha1.ReasonProgressDeadlineExceeded, observed: true, addresses: goodKeys.addresses,
		},
		"missing Secret stalls, keeping the running pod's count": {
			obs: observation{
				keys:       secretState{reason: faucetv1alpha1.ReasonKeySecretNotFound, message: "not found"},
				service:    svc,
				deployment: deployment(available),
			},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonKeySecretNotFound,
			stalled: faucetv1alpha1.ReasonKeySecretNotFound, observed: true, readyReplicas: 1,
		},
		"invalid keys stall": {
			obs:   observation{keys: secretState{reason: faucetv1alpha1.ReasonInvalidKeys, message: "key #2: bad"}, service: svc},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonInvalidKeys,
			stalled: faucetv1alpha1.ReasonInvalidKeys, observed: true,
		},
		"an asset identifier that does not parse stalls, keeping the running pod's count": {
			obs: observation{
				keys: goodKeys, service: svc, deployment: deployment(available),
				invalidAsset: `spec.assets[name=sbtc].token.assetIdentifier: bad asset identifier "ST1…": bad checksum`,
			},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonInvalidAsset,
			stalled: faucetv1alpha1.ReasonInvalidAsset, observed: true, readyReplicas: 1, addresses: goodKeys.addresses,
		},
		"a child's name taken by someone else's object stalls, with no retry": {
			obs:   observation{keys: goodKeys, conflict: `Service "faucet" already exists and is not controlled by this FaucetServer`},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonNameConflict,
			stalled: faucetv1alpha1.ReasonNameConflict, observed: true, addresses: goodKeys.addresses,
		},
		"a name conflict outranks unusable keys: both need the user, the conflict first": {
			obs: observation{
				keys:     secretState{reason: faucetv1alpha1.ReasonKeySecretNotFound, message: "not found"},
				conflict: `Deployment "faucet" already exists and is not controlled by this FaucetServer`,
			},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonNameConflict,
			stalled: faucetv1alpha1.ReasonNameConflict, observed: true,
		},
		"missing store Secret stalls, keeping the running pods' count": {
			mutate: postgres(2),
			obs: observation{
				keys: goodKeys, store: secretState{reason: faucetv1alpha1.ReasonStoreSecretNotFound, message: "not found"},
				service: svc, deployment: deployment(available),
			},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonStoreSecretNotFound,
			stalled: faucetv1alpha1.ReasonStoreSecretNotFound, observed: true, readyReplicas: 1, addresses: goodKeys.addresses,
		},
		"invalid store Secret stalls": {
			mutate: postgres(2),
			obs: observation{
				keys: goodKeys, store: secretState{reason: faucetv1alpha1.ReasonInvalidStoreSecret, message: "not a postgres:// URI"}, service: svc,
			},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonInvalidStoreSecret,
			stalled: faucetv1alpha1.ReasonInvalidStoreSecret, observed: true, addresses: goodKeys.addresses,
		},
		"missing API tokens Secret stalls, keeping the running pods' count": {
			mutate: apiTokens("faucet-api-tokens", ""),
			obs: observation{
				keys: goodKeys, tokens: secretState{reason: faucetv1alpha1.ReasonAPITokensSecretNotFound, message: "not found"},
				service: svc, deployment: deployment(available),
			},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonAPITokensSecretNotFound,
			stalled: faucetv1alpha1.ReasonAPITokensSecretNotFound, observed: true, readyReplicas: 1, addresses: goodKeys.addresses,
		},
		"API tokens Secret without the data key stalls": {
			mutate: apiTokens("faucet-api-tokens", ""),
			obs: observation{
				keys: goodKeys, tokens: secretState{reason: faucetv1alpha1.ReasonInvalidAPITokensSecret, message: "no data key"}, service: svc,
			},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonInvalidAPITokensSecret,
			stalled: faucetv1alpha1.ReasonInvalidAPITokensSecret, observed: true, addresses: goodKeys.addresses,
		},
		"several replicas: one of two available is not Ready yet": {
			mutate: postgres(2),
			obs: observation{keys: goodKeys, service: svc, deployment: func() *appsv1.Deployment {
				d := deployment(available)
				d.Spec.Replicas = ptr.To(int32(2))
				d.Status.Replicas, d.Status.UpdatedReplicas = 2, 2
				return d
			}()},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonDeploymentUnavailable,
			reconciling: faucetv1alpha1.ReasonDeploymentUnavailable, observed: true, readyReplicas: 1, addresses: goodKeys.addresses,
		},
		"reconcile error retries without observing the generation": {
			obs:   observation{keys: goodKeys, err: errors.New("failed to apply Service: conflict")},
			ready: metav1.ConditionFalse, readyReason: faucetv1alpha1.ReasonReconcileFailed,
			reconciling: faucetv1alpha1.ReasonReconcileFailed, addresses: goodKeys.addresses,
		},
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			fs.Status.ObservedGeneration = 1
			st := computeStatus(fs, tt.obs, now)

			ready := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReady)
			if ready == nil || ready.Status != tt.ready || ready.Reason != tt.readyReason || ready.Message == "" || ready.ObservedGeneration != 3 {
				t.Errorf("Ready = %+v, want %s/%s", ready, tt.ready, tt.readyReason)
			}
			for typ, want := range map[string]string{faucetv1alpha1.ConditionReconciling: tt.reconciling, faucetv1alpha1.ConditionStalled: tt.stalled} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				switch {
				case want == "" && c != nil:
					t.Errorf("%s present (%s), want absent", typ, c.Reason)
				case want != "" && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != want):
					t.Errorf("%s = %+v, want True/%s", typ, c, want)
				}
			}
			if got := st.ObservedGeneration == 3; got != tt.observed {
				t.Errorf("observedGeneration %d", st.ObservedGeneration)
			}
			if st.ReadyReplicas != tt.readyReplicas || !slices.Equal(st.FaucetAddresses, tt.addresses) {
				t.Errorf("readyReplicas %d addresses %v", st.ReadyReplicas, st.FaucetAddresses)
			}
			if tt.obs.service != nil && st.URL != "http://faucet.testnet.svc:3999" {
				t.Errorf("url %q", st.URL)
			}
			if tt.obs.service == nil && tt.obs.err == nil && st.URL != "" {
				t.Errorf("url %q without an applied Service", st.URL)
			}
			if want := fs.StoreKind(); st.Store != want {
				t.Errorf("store %q, want %q", st.Store, want)
			}
		})
	}
}

func TestStoreKind(t *testing.T) {
	if got := fixture().StoreKind(); got != faucetv1alpha1.StoreEmbedded {
		t.Errorf("no store: %q, want embedded", got)
	}
	if got := fixture(func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.Store = &faucetv1alpha1.StoreSpec{Embedded: &faucetv1alpha1.EmbeddedStore{}}
	}).StoreKind(); got != faucetv1alpha1.StoreEmbedded {
		t.Errorf("embedded: %q", got)
	}
	if got := fixture(postgres(2)).StoreKind(); got != faucetv1alpha1.StorePostgres {
		t.Errorf("postgres: %q", got)
	}
}

func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	fs := fixture()
	obs := observation{keys: goodKeys, service: serviceFor(fs), deployment: deployment(available)}
	fs.Status = computeStatus(fs, obs, t0)

	again := computeStatus(fs, obs, t0.Add(time.Hour))
	if !equalJSON(again, fs.Status) {
		t.Errorf("an unchanged observation changed the status:\n%+v\n%+v", fs.Status, again)
	}

	obs.deployment = deployment(rolledOut)
	before := fs.Status.DeepCopy()
	later := computeStatus(fs, obs, t0.Add(time.Hour))
	if !equalJSON(before, &fs.Status) {
		t.Error("computeStatus modified its input")
	}
	ready := meta.FindStatusCondition(later.Conditions, faucetv1alpha1.ConditionReady)
	if !ready.LastTransitionTime.Time.Equal(t0.Add(time.Hour)) {
		t.Errorf("transition time %v, want the new one", ready.LastTransitionTime)
	}
}

func TestComputeStatusKeepsUnobservedFieldsOnError(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	fs := fixture()
	fs.Status = computeStatus(fs, observation{keys: goodKeys, service: serviceFor(fs), deployment: deployment(available)}, t0)

	tests := map[string]struct {
		// obs is the failed reconcile's observation
		obs observation
		// addresses is what status.faucetAddresses must hold afterwards
		addresses []string
	}{
		"reading the Secret failed": {
			obs:       observation{err: errors.New("failed to read key Secret: timeout")},
			addresses: goodKeys.addresses,
		},
		"applying the Service failed": {
			obs:       observation{keys: goodKeys, err: errors.New("failed to apply Service: timeout")},
			addresses: goodKeys.addresses,
		},
		"applying the Deployment failed after rotating keys": {
			obs:       observation{keys: secretState{addresses: []string{"ST3"}, digest: "e"}, service: serviceFor(fs), err: errors.New("failed to apply Deployment: timeout")},
			addresses: []string{"ST3"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			st := computeStatus(fs, tt.obs, t0.Add(time.Minute))
			if st.URL != fs.Status.URL || st.ReadyReplicas != 1 || !slices.Equal(st.FaucetAddresses, tt.addresses) {
				t.Errorf("url %q readyReplicas %d addresses %v, want %q 1 %v", st.URL, st.ReadyReplicas, st.FaucetAddresses, fs.Status.URL, tt.addresses)
			}
			if ready := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReady); ready.Reason != faucetv1alpha1.ReasonReconcileFailed {
				t.Errorf("Ready reason %s", ready.Reason)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	tests := map[string]struct {
		// in is truncated to n bytes
		in string
		n  int
		// want is the result
		want string
	}{
		"short enough":             {in: "abc", n: 3, want: "abc"},
		"cut with an ellipsis":     {in: "abcdefgh", n: 6, want: "abc…"},
		"never splits a character": {in: "aéééé", n: 6, want: "aé…"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := truncate(tt.in, tt.n)
			if got != tt.want || len(got) > tt.n || !utf8.ValidString(got) {
				t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

// TestObservationSecrets: obs.secrets() lists the fields in the order of
// secretUses, which readSecrets fills them in and the status reports them in.
func TestObservationSecrets(t *testing.T) {
	var obs observation
	for i, s := range obs.secrets() {
		*s = secretState{reason: secretUses[i].notFound}
	}
	got := []string{obs.keys.reason, obs.store.reason, obs.tokens.reason, obs.treasury.reason, obs.btcKey.reason, obs.btcCreds.reason,
		obs.oidc.reason, obs.session.reason, obs.headers.reason}
	want := []string{
		faucetv1alpha1.ReasonKeySecretNotFound, faucetv1alpha1.ReasonStoreSecretNotFound, faucetv1alpha1.ReasonAPITokensSecretNotFound,
		faucetv1alpha1.ReasonTreasurySecretNotFound, faucetv1alpha1.ReasonBTCKeySecretNotFound, faucetv1alpha1.ReasonBTCCredentialsSecretNotFound,
		faucetv1alpha1.ReasonOIDCClientSecretNotFound, faucetv1alpha1.ReasonSessionKeySecretNotFound,
		faucetv1alpha1.ReasonNodeHeadersSecretNotFound,
	}
	if !slices.Equal(got, want) {
		t.Errorf("fields %q, want %q", got, want)
	}
	if s := obs.unusableSecret(); s != &obs.keys {
		t.Errorf("first unusable %+v, want the keys", s)
	}
	obs.keys, obs.store, obs.tokens = secretState{}, secretState{}, secretState{}
	if s := obs.unusableSecret(); s != &obs.treasury {
		t.Errorf("first unusable %+v, want the treasury", s)
	}
	if s := (&observation{}).unusableSecret(); s != nil {
		t.Errorf("unused Secrets: %+v unusable, want none", s)
	}
}

func TestReadinessOf(t *testing.T) {
	const url = "http://faucet.testnet.svc:3999"
	bad := secretState{reason: faucetv1alpha1.ReasonInvalidTreasuryKey, message: "want exactly one private key"}
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// obs is what the reconcile observed
		obs observation
		// want is the readiness
		want readiness
	}{
		"available": {
			obs:  observation{keys: goodKeys, deployment: deployment(available)},
			want: readiness{status: metav1.ConditionTrue, reason: faucetv1alpha1.ReasonAvailable, message: "the faucet serves at " + url},
		},
		"suspended": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Suspend = true },
			obs:    observation{keys: goodKeys, deployment: deployment(available)},
			want: readiness{status: metav1.ConditionTrue, reason: faucetv1alpha1.ReasonSuspended,
				message: "the faucet at " + url + " is suspended: drips answer 403, status is served"},
		},
		"some assets suspended": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.SuspendedAssets = []string{"stx", "sbtc"} },
			obs:    observation{keys: goodKeys, deployment: deployment(available)},
			want: readiness{status: metav1.ConditionTrue, reason: faucetv1alpha1.ReasonAvailable,
				message: "the faucet serves at " + url + "; suspended: stx, sbtc (drips answer 403)"},
		},
		"some assets turned off": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.SuspendedAssets, fs.Spec.DisabledAssets = []string{"sbtc"}, []string{"stx", "btc"}
			},
			obs: observation{keys: goodKeys, deployment: deployment(available)},
			want: readiness{status: metav1.ConditionTrue, reason: faucetv1alpha1.ReasonAvailable,
				message: "the faucet serves at " + url + "; suspended: sbtc (drips answer 403); turned off: stx, btc"},
		},
		"an error outranks everything, and is retried": {
			obs: observation{keys: bad, conflict: "taken", invalidAsset: "bad", err: errors.New("boom")},
			want: readiness{status: metav1.ConditionFalse, reason: faucetv1alpha1.ReasonReconcileFailed,
				message: "reconcile failed, retrying: boom", reconciling: true},
		},
		"a conflict outranks a Secret": {
			obs:  observation{keys: goodKeys, treasury: bad, conflict: "taken"},
			want: readiness{status: metav1.ConditionFalse, reason: faucetv1alpha1.ReasonNameConflict, message: "taken", stalled: true},
		},
		"a Secret outranks an asset, with its own reason and message": {
			obs:  observation{keys: goodKeys, treasury: bad, invalidAsset: "bad asset", deployment: deployment(available)},
			want: readiness{status: metav1.ConditionFalse, reason: bad.reason, message: bad.message, stalled: true},
		},
		"an invalid asset": {
			obs:  observation{keys: goodKeys, invalidAsset: "bad asset", deployment: deployment(available)},
			want: readiness{status: metav1.ConditionFalse, reason: faucetv1alpha1.ReasonInvalidAsset, message: "bad asset", stalled: true},
		},
		"no Deployment yet": {
			obs: observation{keys: goodKeys},
			want: readiness{status: metav1.ConditionFalse, reason: faucetv1alpha1.ReasonProgressing,
				message: "waiting for the Deployment to be created", reconciling: true},
		},
		"rolled out, then unready: in progress for kstatus": {
			obs: observation{keys: goodKeys, deployment: deployment(rolledOut)},
			want: readiness{status: metav1.ConditionFalse, reason: faucetv1alpha1.ReasonDeploymentUnavailable,
				message:     `Deployment "faucet" has 0 of 1 pods available; the faucet's /readyz fails while its node is unreachable, no key is funded, or (with several replicas) the pod owns no key`,
				reconciling: true},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			if got := readinessOf(fs, tt.obs, url); got != tt.want {
				t.Errorf("readiness\n%+v, want\n%+v", got, tt.want)
			}
		})
	}
}

func TestSetReadiness(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var st faucetv1alpha1.FaucetServerStatus
	setReadiness(&st, 3, t0, inProgress(faucetv1alpha1.ReasonProgressing, "rolling out"))
	var types []string
	for _, c := range st.Conditions {
		types = append(types, c.Type)
		if c.Reason != faucetv1alpha1.ReasonProgressing || c.Message != "rolling out" || c.ObservedGeneration != 3 {
			t.Errorf("condition %+v", c)
		}
	}
	if !slices.Equal(types, []string{faucetv1alpha1.ConditionReady, faucetv1alpha1.ConditionReconciling}) {
		t.Errorf("conditions %q, want Ready and Reconciling", types)
	}

	setReadiness(&st, 4, t0.Add(time.Hour), stalledOn(faucetv1alpha1.ReasonNameConflict, "taken"))
	ready := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || !ready.LastTransitionTime.Time.Equal(t0) || ready.ObservedGeneration != 4 {
		t.Errorf("Ready %+v: still False, so its transition time stays", ready)
	}
	if meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReconciling) != nil ||
		!meta.IsStatusConditionTrue(st.Conditions, faucetv1alpha1.ConditionStalled) {
		t.Errorf("conditions %+v, want Stalled without Reconciling", st.Conditions)
	}

	setReadiness(&st, 4, t0.Add(2*time.Hour), readiness{status: metav1.ConditionTrue, reason: faucetv1alpha1.ReasonAvailable, message: "ok"})
	if len(st.Conditions) != 1 || !meta.IsStatusConditionTrue(st.Conditions, faucetv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready alone: the abnormal-true ones exist only while true", st.Conditions)
	}
}
