// Package controllers holds the FaucetServer reconciler.
package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/stacks"
)

// keySecretIndex indexes FaucetServers by the name of their key Secret, so a
// Secret event maps to the FaucetServers that read it.
const keySecretIndex = ".spec.keySecretRef.name"

// FaucetServerReconciler turns a FaucetServer into a ServiceAccount, a
// Deployment running `faucet serve` and a Service.
type FaucetServerReconciler struct {
	// Client reads FaucetServers and Deployments from the cache and applies
	// the children.
	client.Client
	// APIReader reads straight from the API server: the key Secret, so no
	// informer cache holds key material, and the FaucetServer itself, whose
	// new status derives from the current one. A cached copy lags behind our
	// own last status patch whenever a child event requeues it right away.
	APIReader client.Reader
	// Recorder emits events on Ready transitions.
	Recorder events.EventRecorder
	// DefaultImage runs the faucet when spec.image is empty: the manager's
	// own image, which holds the same binary.
	DefaultImage string
	// Now is the clock for condition transitions; time.Now when nil.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=faucet.stxfaucet.dev,resources=faucetservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=faucet.stxfaucet.dev,resources=faucetservers/status,verbs=patch
// +kubebuilder:rbac:groups=faucet.stxfaucet.dev,resources=faucetservers/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile reads the key Secret, applies the ServiceAccount, Service and
// Deployment, and patches the status once, on the way out. Children are
// deleted by garbage collection through their owner references, so there is
// no finalizer.
func (r *FaucetServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	fs := &faucetv1alpha1.FaucetServer{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, fs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !fs.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // being collected; applying now would recreate children
	}

	var obs observation
	defer func() {
		obs.err = retErr
		retErr = errors.Join(retErr, r.patchStatus(ctx, fs, obs))
	}()

	keys, err := r.readKeys(ctx, fs)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs.keys = keys

	if err := r.apply(ctx, fs, serviceAccountFor(fs)); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to apply ServiceAccount: %w", err)
	}
	svc := serviceFor(fs)
	if err := r.apply(ctx, fs, svc); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to apply Service: %w", err)
	}
	obs.service = svc

	if !keys.usable() {
		// Stalled until the Secret changes, which the Secret watch reports.
		// Leave a running pod alone: it keeps the keys it started with.
		obs.deployment, err = r.existingDeployment(ctx, fs)
		return ctrl.Result{}, err
	}
	deploy := deploymentFor(fs, r.DefaultImage, keys.digest)
	if err := r.apply(ctx, fs, deploy); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to apply Deployment: %w", err)
	}
	obs.deployment = deploy
	return ctrl.Result{}, nil
}

// readKeys parses the key Secret into addresses. A missing Secret or bad
// keys is a state, not an error: it is reported in the status and retried
// only when the Secret changes. Messages name the Secret and the key's
// position, never key material.
func (r *FaucetServerReconciler) readKeys(ctx context.Context, fs *faucetv1alpha1.FaucetServer) (keyState, error) {
	ref := fs.Spec.KeySecretRef
	dataKey := keyFileName(fs)
	var secret corev1.Secret
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: fs.Namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return keyState{
				reason:  faucetv1alpha1.ReasonKeySecretNotFound,
				message: fmt.Sprintf("key Secret %q not found in namespace %q", ref.Name, fs.Namespace),
			}, nil
		}
		return keyState{}, fmt.Errorf("failed to read key Secret %q: %w", ref.Name, err)
	}
	data, ok := secret.Data[dataKey]
	if !ok {
		return keyState{
			reason:  faucetv1alpha1.ReasonInvalidKeys,
			message: fmt.Sprintf("key Secret %q has no data key %q", ref.Name, dataKey),
		}, nil
	}
	keys, err := stacks.ParsePrivateKeys(string(data))
	if err != nil {
		return keyState{
			reason:  faucetv1alpha1.ReasonInvalidKeys,
			message: fmt.Sprintf("key Secret %q, data key %q: %v", ref.Name, dataKey, err),
		}, nil
	}
	addrs := make([]string, len(keys))
	for i, k := range keys {
		addrs[i] = k.TestnetAddress().String()
	}
	sum := sha256.Sum256(data)
	return keyState{addresses: addrs, digest: hex.EncodeToString(sum[:])}, nil
}

// apply server-side applies a child built by a pure builder, as the
// operator's field manager, and reads the result (status included) back
// into obj. It refuses to take over an object of the same name that fs does
// not control, such as a Service "stacks-node" of the node itself or the
// namespace's "default" ServiceAccount: a forced apply would rewrite it and
// its new owner reference would get it garbage-collected with fs.
func (r *FaucetServerReconciler) apply(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obj client.Object) error {
	if err := r.checkControlled(ctx, fs, obj); err != nil {
		return err
	}
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

// checkControlled fails if an object of obj's kind and name exists and fs
// is not its controller. Children are found in the cache; only a name the
// cache does not know (not created yet, or someone else's object, which
// lacks the managed-by label the cache selects) costs an API call.
func (r *FaucetServerReconciler) checkControlled(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	if cached, ok := obj.DeepCopyObject().(client.Object); ok && r.Get(ctx, key, cached) == nil && metav1.IsControlledBy(cached, fs) {
		return nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(gvk)
	if err := r.APIReader.Get(ctx, key, existing); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("failed to read %s %q: %w", gvk.Kind, key.Name, err)
	}
	if !metav1.IsControlledBy(existing, fs) {
		return fmt.Errorf("%s %q already exists and is not controlled by this FaucetServer: rename the FaucetServer or remove the %s", gvk.Kind, key.Name, gvk.Kind)
	}
	return nil
}

// existingDeployment reads the Deployment as it is, for readyReplicas while
// the keys are unusable; nil when there is none.
func (r *FaucetServerReconciler) existingDeployment(ctx context.Context, fs *faucetv1alpha1.FaucetServer) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(fs), d); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to read Deployment: %w", err)
	}
	if !metav1.IsControlledBy(d, fs) {
		return nil, nil
	}
	return d, nil
}

// patchStatus writes the status computed from obs, only when it changed, and
// emits an event when Ready changes.
func (r *FaucetServerReconciler) patchStatus(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs observation) error {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	status := computeStatus(fs, obs, now())
	if equality.Semantic.DeepEqual(fs.Status, status) {
		return nil
	}
	before := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionReady)
	base := fs.DeepCopy()
	fs.Status = status
	// The status derives from the previous one (transition times, events):
	// if another writer got in between, conflict and retry on a fresh read.
	if err := r.Status().Patch(ctx, fs, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(FieldManager)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("failed to patch status: %w", err))
	}
	after := meta.FindStatusCondition(fs.Status.Conditions, faucetv1alpha1.ConditionReady)
	if after != nil && (before == nil || before.Status != after.Status || before.Reason != after.Reason) {
		// A rollout in progress is routine; anything else not Ready needs a look.
		eventType := corev1.EventTypeNormal
		if after.Status != metav1.ConditionTrue && after.Reason != faucetv1alpha1.ReasonProgressing {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(fs, nil, eventType, after.Reason, "Reconcile", "%s", truncate(after.Message, maxEventNote))
		ctrl.LoggerFrom(ctx).Info("Ready changed", "status", after.Status, "reason", after.Reason, "message", after.Message)
	}
	return nil
}

// SetupWithManager registers the controller and the key-Secret index.
// Secrets are watched as metadata only: their data is read on demand.
func (r *FaucetServerReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &faucetv1alpha1.FaucetServer{}, keySecretIndex,
		func(o client.Object) []string {
			return []string{o.(*faucetv1alpha1.FaucetServer).Spec.KeySecretRef.Name}
		}); err != nil {
		return fmt.Errorf("failed to index FaucetServers by key Secret: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&faucetv1alpha1.FaucetServer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ServiceAccount{}).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.requestsForSecret)).
		Named("faucetserver").
		Complete(r)
}

// requestsForSecret maps a Secret to the FaucetServers whose keys it holds.
func (r *FaucetServerReconciler) requestsForSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	var list faucetv1alpha1.FaucetServerList
	if err := r.List(ctx, &list, client.InNamespace(secret.GetNamespace()),
		client.MatchingFields{keySecretIndex: secret.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "failed to list FaucetServers for Secret", "secret", secret.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i, fs := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fs)}
	}
	return reqs
}

// CacheByObject limits the manager's caches of child kinds to objects the
// operator manages, so it does not hold every Deployment, Service and
// ServiceAccount of the cluster in memory.
func CacheByObject() map[client.Object]cache.ByObject {
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{labelManagedBy: FieldManager})}
	return map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:     managed,
		&corev1.Service{}:        managed,
		&corev1.ServiceAccount{}: managed,
	}
}
