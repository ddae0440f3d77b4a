package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// The steps of a reconcile, in the order Reconcile runs them. Each records
// what it sees in the observation the status is computed from, and builds
// what it applies with a pure builder (resources.go).

// reconcileStep is one step of a reconcile of fs. An error ends the pass
// (the status says ReconcileFailed and the reconcile is retried with
// backoff); so does stepStalled, without one.
type reconcileStep func(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error)

// stepResult says whether the pass goes on after a step.
type stepResult int

const (
	// stepDone: the step did its part; the next one runs.
	stepDone stepResult = iota
	// stepStalled: fs waits for a change that a watch reports (a Secret,
	// its spec, an object that holds a child's name); the status says
	// which. The remaining steps are skipped and nothing is retried.
	stepStalled
)

// readSecrets reads and checks every Secret fs refers to, as its entry in
// secretUses says, into obs. A missing or invalid Secret is a state the
// status reports (checkInputs stalls on it), not an error.
func (r *FaucetServerReconciler) readSecrets(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	into := obs.secrets()
	for i, use := range secretUses {
		st, err := r.readSecret(ctx, fs, use)
		if err != nil {
			return stepDone, err
		}
		*into[i] = st
	}
	return stepDone, nil
}

// readVolumeClaim reads the embedded store's claim as it is into
// obs.volumeClaim, for the fields that cannot change once it exists.
func (r *FaucetServerReconciler) readVolumeClaim(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	if fs.StoreKind() != faucetv1alpha1.StoreEmbedded {
		return stepDone, nil
	}
	var err error
	obs.volumeClaim, err = r.existingVolumeClaim(ctx, fs)
	return stepDone, err
}

// checkNames checks the name of every child before anything is written, so
// a conflict leaves no half-applied set of children behind. A name held by
// an object fs does not control stalls fs (obs.conflict), not retried:
// backing off against someone else's object would never end. A change to
// the FaucetServer, or the deletion of a leftover child of an earlier
// FaucetServer of this name (its owner reference names ours), retries.
func (r *FaucetServerReconciler) checkNames(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	for _, child := range childNames(fs, obs.volumeClaim) {
		conflict, err := r.checkControlled(ctx, fs, child)
		if err != nil {
			return stepDone, err
		}
		if conflict != "" {
			obs.conflict = conflict
			return r.stall(ctx, fs, obs)
		}
	}
	return stepDone, nil
}

// childNames are the children a reconcile of fs applies, for checkNames:
// the Deployment by name only (the builder needs the Secrets' digests), the
// claim only with the embedded store, the budget only with several
// replicas.
func childNames(fs *faucetv1alpha1.FaucetServer, claim *corev1.PersistentVolumeClaim) []client.Object {
	deployName := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: fs.Namespace, Name: fs.Name},
	}
	children := []client.Object{serviceAccountFor(fs), serviceFor(fs), switchesFor(fs), deployName}
	if pvc := embeddedStoreClaim(fs, claim); pvc != nil {
		children = append(children, pvc)
	}
	if pdb := podDisruptionBudgetFor(fs); pdb != nil {
		children = append(children, pdb)
	}
	return children
}

// applyServiceAccount applies the pods' ServiceAccount.
func (r *FaucetServerReconciler) applyServiceAccount(ctx context.Context, fs *faucetv1alpha1.FaucetServer, _ *observation) (stepResult, error) {
	if err := r.apply(ctx, fs, serviceAccountFor(fs)); err != nil {
		return stepDone, fmt.Errorf("failed to apply ServiceAccount: %w", err)
	}
	return stepDone, nil
}

// applySwitches applies the switches' ConfigMap. It runs before the
// checks that may stall fs: a running faucet obeys a suspension even
// while a Secret it would need for a new pod is broken.
func (r *FaucetServerReconciler) applySwitches(ctx context.Context, fs *faucetv1alpha1.FaucetServer, _ *observation) (stepResult, error) {
	if err := r.apply(ctx, fs, switchesFor(fs)); err != nil {
		return stepDone, fmt.Errorf("failed to apply the switches ConfigMap: %w", err)
	}
	return stepDone, nil
}

// applyService applies the Service and records it as applied in
// obs.service, for status.url.
func (r *FaucetServerReconciler) applyService(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	svc := serviceFor(fs)
	if err := r.apply(ctx, fs, svc); err != nil {
		return stepDone, fmt.Errorf("failed to apply Service: %w", err)
	}
	obs.service = svc
	return stepDone, nil
}

// checkInputs stalls fs while a Secret it refers to is unusable, an asset
// identifier of its spec does not parse (obs.invalidAsset) or its
// spec.assets is an object form with nothing in it
// (obs.unreadableAssets), until the Secret or the spec changes, which the
// watches report. Running pods are left alone: they keep what they started
// with, and a new pod could not mount a missing Secret or start with a bad
// asset anyway.
func (r *FaucetServerReconciler) checkInputs(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	if _, err := tokenTargets(fs); err != nil {
		obs.invalidAsset = truncate(err.Error()+"; the faucet would refuse to start with it, so running pods are left alone until it is fixed", maxConditionMessage)
	}
	if fs.AssetsUnreadable() {
		obs.unreadableAssets = deprecatedAssetsMessage(fs)
	}
	if obs.unusableSecret() != nil || obs.invalidAsset != "" || obs.unreadableAssets != "" {
		return r.stall(ctx, fs, obs)
	}
	return stepDone, nil
}

// stall ends the pass of a FaucetServer that waits for a change: it stops
// the balance reads, each of which would retry the reconcile, and reads the
// Deployment as it is into obs.deployment, for status.readyReplicas.
func (r *FaucetServerReconciler) stall(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	r.forgetFunding(client.ObjectKeyFromObject(fs))
	var err error
	obs.deployment, err = r.existingDeployment(ctx, fs)
	return stepStalled, err
}

// applyVolumeClaim applies the embedded store's claim; nothing with
// Postgres.
func (r *FaucetServerReconciler) applyVolumeClaim(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	pvc := embeddedStoreClaim(fs, obs.volumeClaim)
	if pvc == nil {
		return stepDone, nil
	}
	if err := r.apply(ctx, fs, pvc); err != nil {
		return stepDone, fmt.Errorf("failed to apply PersistentVolumeClaim: %w", err)
	}
	return stepDone, nil
}

// observeFunding has the FundingMonitor track fs's keys and records its
// latest result for them in obs.funding (see trackFunding).
func (r *FaucetServerReconciler) observeFunding(_ context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	tokens, _ := tokenTargets(fs) // they parse: checkInputs stalls fs otherwise
	obs.funding = r.trackFunding(fs, obs.keys, obs.treasury, tokens, btcTargetOf(fs, obs.btcKey, obs.btcCreds), obs.headers.headers)
	return stepDone, nil
}

// applyDeployment applies the Deployment, whose pod template carries the
// digests of the Secrets read, and records it as applied in obs.deployment.
func (r *FaucetServerReconciler) applyDeployment(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	deploy := deploymentFor(fs, r.DefaultImage, obs.digests())
	if err := r.apply(ctx, fs, deploy); err != nil {
		return stepDone, fmt.Errorf("failed to apply Deployment: %w", err)
	}
	obs.deployment = deploy
	return stepDone, nil
}

// reconcileDisruptionBudget applies the PodDisruptionBudget of a
// FaucetServer with several replicas, and deletes it once it runs one.
func (r *FaucetServerReconciler) reconcileDisruptionBudget(ctx context.Context, fs *faucetv1alpha1.FaucetServer, _ *observation) (stepResult, error) {
	pdb := podDisruptionBudgetFor(fs)
	if pdb == nil {
		return stepDone, r.deletePodDisruptionBudget(ctx, fs)
	}
	if err := r.apply(ctx, fs, pdb); err != nil {
		return stepDone, fmt.Errorf("failed to apply PodDisruptionBudget: %w", err)
	}
	return stepDone, nil
}
