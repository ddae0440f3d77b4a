// Package controllers holds the FaucetServer reconciler.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// secretIndex indexes FaucetServers by the names of the Secrets they read
// (the key Secret, a Postgres URI Secret, an API tokens Secret, a treasury
// key, the BTC key and RPC credentials, the OpenID Connect client secret,
// the session key and the node headers), so a Secret event maps to the FaucetServers that
// read it.
const secretIndex = ".spec.secretNames"

// FaucetServerReconciler turns a FaucetServer into a ServiceAccount, a
// Deployment running `faucet serve`, a Service, for the embedded store a
// PersistentVolumeClaim and, with several replicas, a PodDisruptionBudget.
type FaucetServerReconciler struct {
	// Client reads FaucetServers and children from the cache and applies
	// the children.
	client.Client
	// APIReader reads straight from the API server: the key, store and API
	// tokens Secrets, so no informer cache holds key material, passwords or
	// tokens (the manager's client does not cache Secrets either, see
	// ClientCacheOptions), and the FaucetServer itself, whose
	// new status derives from the current one. A cached copy lags behind our
	// own last status patch whenever a child event requeues it right away.
	APIReader client.Reader
	// Recorder emits events on Ready transitions.
	Recorder events.EventRecorder
	// DefaultImage runs the faucet when spec.image is empty: the manager's
	// own image, which holds the same binary.
	DefaultImage string
	// Clock dates condition transitions; the real clock when nil.
	Clock clock.PassiveClock
	// Funding reads the balances of the faucets' keys from their nodes,
	// outside Reconcile, for status.funding and the Funded condition; nil
	// turns that off. SetupWithManager adds it to the manager.
	Funding *FundingMonitor

	// deprecationWarnings: the DeprecatedAssets warning, once per
	// generation.
	deprecationWarnings generationWarnings
}

// +kubebuilder:rbac:groups=faucet.stxfaucet.dev,resources=faucetservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=faucet.stxfaucet.dev,resources=faucetservers/status,verbs=patch
// +kubebuilder:rbac:groups=faucet.stxfaucet.dev,resources=faucetservers/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts;configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs the steps of a reconcile (steps.go) in order until one
// fails or stalls the FaucetServer, then patches the status once, on the
// way out, from what they observed. Children are deleted by garbage
// collection through their owner references, so there is no finalizer.
func (r *FaucetServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	fs, err := r.fetch(ctx, req.NamespacedName)
	if fs == nil || err != nil {
		return ctrl.Result{}, err
	}

	var obs observation
	defer func() {
		obs.err = retErr
		retErr = errors.Join(retErr, r.patchStatus(ctx, fs, obs))
	}()

	steps := []reconcileStep{
		// An object-form spec.assets of earlier releases stored as its list.
		r.rewriteLegacyAssets,
		r.readSecrets,     // the key, store, API tokens, treasury, BTC, sign-in and node headers Secrets, checked
		r.readVolumeClaim, // the embedded store's claim as it is
		r.checkNames,      // stalls if a child's name is taken: nothing is written
		r.applyServiceAccount,
		r.applyService,
		r.applySwitches, // before the checks: a suspension reaches running pods whatever else is wrong
		r.checkInputs,   // stalls on an unusable Secret or asset, leaving running pods alone
		r.applyVolumeClaim,
		r.observeFunding, // the FundingMonitor's latest balances; nothing is read here
		r.applyDeployment,
		r.observePods,               // why they do not run, if they do not
		r.reconcileDisruptionBudget, // applied with several replicas, deleted with one
	}
	for _, step := range steps {
		if res, err := step(ctx, fs, &obs); err != nil || res == stepStalled {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// fetch reads the FaucetServer straight from the API server (see
// APIReader). It returns nil, and stops the balance reads, when the
// FaucetServer is gone or being deleted: applying now would recreate the
// children garbage collection is removing.
func (r *FaucetServerReconciler) fetch(ctx context.Context, key types.NamespacedName) (*faucetv1alpha1.FaucetServer, error) {
	fs := &faucetv1alpha1.FaucetServer{}
	if err := r.APIReader.Get(ctx, key, fs); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetFunding(key)
			r.deprecationWarnings.forget(key)
		}
		return nil, client.IgnoreNotFound(err)
	}
	if !fs.DeletionTimestamp.IsZero() {
		r.forgetFunding(key)
		r.deprecationWarnings.forget(key)
		return nil, nil
	}
	return fs, nil
}

// deletePodDisruptionBudget deletes fs's budget once it runs a single pod:
// left in place, the budget of its former replicas would outlive them. Only
// a budget fs controls goes, and only the one the cache saw.
func (r *FaucetServerReconciler) deletePodDisruptionBudget(ctx context.Context, fs *faucetv1alpha1.FaucetServer) error {
	pdb := &policyv1.PodDisruptionBudget{}
	if ours, err := r.getControlled(ctx, fs, client.ObjectKeyFromObject(fs), pdb, "PodDisruptionBudget"); err != nil || !ours {
		return err
	}
	err := r.Delete(ctx, pdb, client.Preconditions{UID: &pdb.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to delete PodDisruptionBudget: %w", err)
	}
	return nil
}

// trackFunding has the FundingMonitor read the addresses of fs's keys and
// treasury, their balances of the tokens of spec.assets and the BTC
// address of btc when it has one, sending headers to the Stacks nodes as
// the faucet does, and returns its latest result for them,
// if any. Nothing is read here: a slow node never holds up a reconcile.
// Each new reading requeues fs, so a FaucetServer stalled on a name
// conflict, a Secret or an asset is not tracked: that would retry it every
// interval.
func (r *FaucetServerReconciler) trackFunding(fs *faucetv1alpha1.FaucetServer, keys, treasury secretState, tokens []tokenTarget, btc btcTarget, headers nodeHeaders) *fundingResult {
	if r.Funding == nil {
		return nil
	}
	key := client.ObjectKeyFromObject(fs)
	if !keys.usable() || len(keys.addresses) == 0 || !treasury.usable() {
		r.Funding.Forget(key)
		return nil
	}
	t := fundingTarget{nodeURLs: fs.Spec.Node.NodeURLs(), headers: headers, addresses: keys.addresses, treasury: treasury.address(), tokens: tokens, btc: btc}
	if fs.Spec.Node.Timeout != nil {
		t.timeout = fs.Spec.Node.Timeout.Duration
	}
	r.Funding.Track(key, t)
	if res, ok := r.Funding.Result(key, t); ok {
		return &res
	}
	return nil
}

func (r *FaucetServerReconciler) forgetFunding(key types.NamespacedName) {
	if r.Funding != nil {
		r.Funding.Forget(key)
	}
}

// btcTargetOf is the BTC address the FundingMonitor reads for fs, from the
// checked BTC key and credentials Secrets; zero when BTC drips are off.
func btcTargetOf(fs *faucetv1alpha1.FaucetServer, key, creds secretState) btcTarget {
	b := fs.BTC()
	if b == nil || key.address() == "" {
		return btcTarget{}
	}
	return btcTarget{rpcURLs: b.RPC.RPCURLs(), credentials: creds.credentials, network: fs.BTCNetwork(), address: key.address()}
}

// isPostgresURI is how `faucet serve --store` tells a Postgres URI from an
// SQLite path (server/store.IsPostgres).
func isPostgresURI(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// apply server-side applies a child built by a pure builder, as the
// operator's field manager, and reads the result (status included) back
// into obj. The caller has made sure with checkControlled that it does not
// take over an object of the same name that fs does not control, such as a
// Service "stacks-node" of the node itself or the namespace's "default"
// ServiceAccount: a forced apply would rewrite it and its new owner
// reference would get it garbage-collected with fs.
func (r *FaucetServerReconciler) apply(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Errorf("failed to convert %T: %w", obj, err)
	}
	applied := &unstructured.Unstructured{Object: u}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied),
		client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(applied.Object, obj)
}

// checkControlled returns a readable message if an object of obj's kind and
// name exists and fs is not its controller, "" if the name is free or
// ours. Children are found in the cache; only a name the cache does not know
// (not created yet, or someone else's object, which lacks the managed-by
// label the cache selects) costs an API call.
func (r *FaucetServerReconciler) checkControlled(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obj client.Object) (string, error) {
	key := client.ObjectKeyFromObject(obj)
	if cached, ok := obj.DeepCopyObject().(client.Object); ok && r.Get(ctx, key, cached) == nil && metav1.IsControlledBy(cached, fs) {
		return "", nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(gvk)
	if err := r.APIReader.Get(ctx, key, existing); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("failed to read %s %q: %w", gvk.Kind, key.Name, err)
	}
	if metav1.IsControlledBy(existing, fs) {
		return "", nil
	}
	return fmt.Sprintf("%s %q already exists and is not controlled by this FaucetServer, so it is left alone: "+
		"delete the %s or rename the FaucetServer; a change to the FaucetServer (an edit, or an annotation) retries",
		gvk.Kind, key.Name, gvk.Kind), nil
}

// existingVolumeClaim reads the embedded store's claim from the cache, for
// the fields that cannot change once it exists; nil when there is none or
// it is not ours (checkControlled then reports it).
func (r *FaucetServerReconciler) existingVolumeClaim(ctx context.Context, fs *faucetv1alpha1.FaucetServer) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	key := client.ObjectKey{Namespace: fs.Namespace, Name: VolumeClaimName(fs)}
	if ours, err := r.getControlled(ctx, fs, key, pvc, "PersistentVolumeClaim"); err != nil || !ours {
		return nil, err
	}
	return pvc, nil
}

// existingDeployment reads the Deployment as it is, for readyReplicas while
// the keys are unusable; nil when there is none.
func (r *FaucetServerReconciler) existingDeployment(ctx context.Context, fs *faucetv1alpha1.FaucetServer) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	if ours, err := r.getControlled(ctx, fs, client.ObjectKeyFromObject(fs), d, "Deployment"); err != nil || !ours {
		return nil, err
	}
	return d, nil
}

// getControlled reads key into obj from the cache and reports whether fs
// controls it: false, with no error, when it is absent or someone else's.
func (r *FaucetServerReconciler) getControlled(ctx context.Context, fs *faucetv1alpha1.FaucetServer, key client.ObjectKey, obj client.Object, kind string) (bool, error) {
	if err := r.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("failed to read %s: %w", kind, err)
	}
	return metav1.IsControlledBy(obj, fs), nil
}

// patchStatus writes the status computed from obs, only when it changed, and
// emits an event when Ready or Funded changes, and one per generation of a
// spec.assets in the object form of earlier releases.
func (r *FaucetServerReconciler) patchStatus(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs observation) error {
	r.warnDeprecatedAssets(ctx, fs)
	var clk clock.PassiveClock = clock.RealClock{}
	if r.Clock != nil {
		clk = r.Clock
	}
	status := computeStatus(fs, obs, clk.Now())
	if equality.Semantic.DeepEqual(fs.Status, status) {
		return nil
	}
	before := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionReady)
	fundedBefore := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionFunded)
	base := fs.DeepCopy()
	fs.Status = status
	// The status derives from the previous one (transition times, events):
	// if another writer got in between, conflict and retry on a fresh read.
	if err := r.Status().Patch(ctx, fs, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(FieldManager)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("failed to patch status: %w", err))
	}
	after := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionReady)
	// DeprecatedAssets has its event already, from warnDeprecatedAssets.
	if after != nil && (before == nil || before.Status != after.Status || before.Reason != after.Reason) &&
		after.Reason != faucetv1alpha1.ReasonDeprecatedAssets {
		// A rollout in progress is routine; anything else not Ready needs a look.
		eventType := corev1.EventTypeNormal
		if after.Status != metav1.ConditionTrue && after.Reason != faucetv1alpha1.ReasonProgressing {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(fs, nil, eventType, after.Reason, "Reconcile", "%s", truncate(after.Message, maxEventNote))
		ctrl.LoggerFrom(ctx).Info("Ready changed", "status", after.Status, "reason", after.Reason, "message", after.Message)
	}
	funded := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionFunded)
	if funded != nil && (fundedBefore == nil || fundedBefore.Status != funded.Status || fundedBefore.Reason != funded.Reason) {
		eventType := corev1.EventTypeNormal
		if funded.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(fs, nil, eventType, funded.Reason, "CheckFunding", "%s", truncate(funded.Message, maxEventNote))
		ctrl.LoggerFrom(ctx).Info("Funded changed", "status", funded.Status, "reason", funded.Reason, "message", funded.Message)
	}
	return nil
}

// SetupWithManager registers the controller and the Secret index.
// Secrets are watched as metadata only: their data is read on demand.
func (r *FaucetServerReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &faucetv1alpha1.FaucetServer{}, secretIndex,
		func(o client.Object) []string { return secretNames(o.(*faucetv1alpha1.FaucetServer)) }); err != nil {
		return fmt.Errorf("failed to index FaucetServers by Secret: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Funding != nil {
		if err := mgr.Add(r.Funding); err != nil {
			return fmt.Errorf("failed to add the funding monitor: %w", err)
		}
		// A new balance reading requeues its FaucetServer, whatever the
		// For predicates say.
		b = b.WatchesRawSource(source.Channel(r.Funding.Events(), &handler.EnqueueRequestForObject{}))
	}
	return b.
		// Status writes do not trigger a reconcile; spec edits do, and so do
		// annotations: `kubectl annotate` is the way to retry a FaucetServer
		// stalled on a name conflict.
		For(&faucetv1alpha1.FaucetServer{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.requestsForSecret)).
		// A pod's status says why it does not run (podTrouble) seconds
		// before the Deployment's status changes, if it changes at all.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(requestForPod), builder.WithPredicates(podStatusChanged)).
		Named("faucetserver").
		Complete(r)
}

// secretNames are the Secrets fs reads: its keys, a Postgres URI, API
// tokens, a treasury key, the BTC key and RPC credentials, the sign-in
// Secrets and the node headers.
func secretNames(fs *faucetv1alpha1.FaucetServer) []string {
	var names []string
	for _, use := range secretUses {
		if ref := use.ref(fs); ref != nil && !slices.Contains(names, ref.Name) {
			names = append(names, ref.Name)
		}
	}
	return names
}

// requestsForSecret maps a Secret to the FaucetServers that read it.
func (r *FaucetServerReconciler) requestsForSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	var list faucetv1alpha1.FaucetServerList
	if err := r.List(ctx, &list, client.InNamespace(secret.GetNamespace()),
		client.MatchingFields{secretIndex: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list FaucetServers for Secret", "secret", secret.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i, fs := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fs)}
	}
	return reqs
}

// CacheByObject limits the manager's caches of child kinds, and of the
// faucet pods the operator reads, to objects carrying its labels, so it
// does not hold every Deployment, Service, ServiceAccount,
// PersistentVolumeClaim, PodDisruptionBudget and Pod of the cluster in
// memory.
func CacheByObject() map[client.Object]cache.ByObject {
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{labelManagedBy: FieldManager})}
	return map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:            managed,
		&corev1.Service{}:               managed,
		&corev1.ServiceAccount{}:        managed,
		&corev1.ConfigMap{}:             managed,
		&corev1.PersistentVolumeClaim{}: managed,
		&policyv1.PodDisruptionBudget{}: managed,
		&corev1.Pod{}:                   managed,
	}
}

// UncachedObjects are the kinds the manager's client reads straight from the
// API server: Secrets, so that no cached read (a Get through the manager's
// client, here or in code added later) can start an informer holding every
// Secret of the cluster, data included. The Secret watch stays
// metadata-only and does not depend on this.
func UncachedObjects() []client.Object {
	return []client.Object{&corev1.Secret{}}
}

// ClientCacheOptions are the manager client's cache options: everything is
// read from the cache except UncachedObjects.
func ClientCacheOptions() *client.CacheOptions {
	return &client.CacheOptions{DisableFor: UncachedObjects()}
}
