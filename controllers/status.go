package controllers

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// observation is everything one reconcile saw; the status is a function of it.
type observation struct {
	keys     secretState // the faucet's keys
	store    secretState // a Postgres store's URI
	tokens   secretState // the API tokens file
	treasury secretState // the treasury's key
	btcKey   secretState // the Bitcoin key of the btc entry of spec.assets
	btcCreds secretState // the Bitcoin node's RPC credentials
	oidc     secretState // the OpenID Connect client secret
	session  secretState // the sign-in session key
	headers  secretState // the header lines sent to the Stacks nodes
	// invalidAsset says why an asset identifier of spec.assets does not
	// parse; "" when every one does.
	invalidAsset string
	// unreadableAssets says that spec.assets is in the object form of
	// earlier releases with nothing in it, {}; "" when it is not.
	unreadableAssets string
	// funding is the FundingMonitor's latest result for the current keys,
	// nil when there is none (yet, or without a monitor).
	funding *fundingResult
	// volumeClaim is the embedded store's claim as it was read, for the
	// fields that cannot change; nil if there is none, it is not ours or
	// the store is Postgres. The status does not depend on it.
	volumeClaim *corev1.PersistentVolumeClaim
	conflict    string             // why a child's name is taken; "" if none is
	service     *corev1.Service    // as applied; nil if not reached
	deployment  *appsv1.Deployment // as applied or read; nil if none
	pods        []corev1.Pod       // the faucet's pods, from the cache; nil if not read
	err         error              // the reconcile error, if any
}

// secrets are the states of the Secrets, in the order of secretUses.
func (o *observation) secrets() [len(secretUses)]*secretState {
	return [len(secretUses)]*secretState{&o.keys, &o.store, &o.tokens, &o.treasury, &o.btcKey, &o.btcCreds, &o.oidc, &o.session, &o.headers}
}

// unusableSecret is the first Secret, in the order of secretUses, that
// is unusable; nil when every one is usable.
func (o *observation) unusableSecret() *secretState {
	for _, s := range o.secrets() {
		if !s.usable() {
			return s
		}
	}
	return nil
}

// digests are the digests of the Secrets read, for the pods' config hash.
func (o *observation) digests() secretDigests {
	return secretDigests{
		keys: o.keys.digest, store: o.store.digest, treasury: o.treasury.digest,
		btcKey: o.btcKey.digest, btcCredentials: o.btcCreds.digest,
		oidcClientSecret: o.oidc.digest, sessionKey: o.session.digest,
		nodeHeaders: o.headers.digest,
	}
}

// computeStatus derives the status from the previous one (for condition
// transition times) and what was observed. It is pure: no client, the clock
// passed in.
func computeStatus(fs *faucetv1alpha1.FaucetServer, obs observation, now time.Time) faucetv1alpha1.FaucetServerStatus {
	st := *fs.Status.DeepCopy()
	setObserved(&st, fs, obs)
	setFunding(&st, fs, obs, now)
	setReadiness(&st, fs.Generation, now, readinessOf(fs, obs, st.URL))
	if obs.err == nil {
		// A failed reconcile is retried with backoff; the generation is
		// not observed until it succeeds.
		st.ObservedGeneration = fs.Generation
	}
	return st
}

// setObserved sets the fields that are what the reconcile saw: the keys'
// addresses, the URL, the store, the pod selector and the replicas. After an error,
// what the attempt did not get to observe keeps its last value, so a
// transient error does not blank the URL, the addresses or the replica
// count.
func setObserved(st *faucetv1alpha1.FaucetServerStatus, fs *faucetv1alpha1.FaucetServer, obs observation) {
	st.FaucetAddresses = obs.keys.addresses
	st.URL = serviceURL(obs.service)
	st.Store = fs.StoreKind()
	st.Selector = podSelector(fs)
	st.Replicas, st.ReadyReplicas = 0, 0
	if obs.deployment != nil {
		st.Replicas = obs.deployment.Status.Replicas
		st.ReadyReplicas = obs.deployment.Status.ReadyReplicas
	}
	if obs.err == nil {
		return
	}
	if obs.keys.usable() && obs.keys.addresses == nil {
		st.FaucetAddresses = fs.Status.FaucetAddresses
	}
	if obs.service == nil {
		st.URL = fs.Status.URL
	}
	if obs.deployment == nil {
		st.Replicas, st.ReadyReplicas = fs.Status.Replicas, fs.Status.ReadyReplicas
	}
}

// readiness is what the Ready condition says, and which of the
// abnormal-true conditions Reconciling and Stalled is set with the same
// reason and message. Those two exist only while true (kstatus): the other,
// or both when Ready is True, are removed.
type readiness struct {
	status          metav1.ConditionStatus // of Ready
	reason, message string
	reconciling     bool // Reconciling=True: in progress, or retried
	stalled         bool // Stalled=True: waits for a change by the user
}

// inProgress is not ready yet, and Reconciling.
func inProgress(reason, msg string) readiness {
	return readiness{status: metav1.ConditionFalse, reason: reason, message: msg, reconciling: true}
}

// stalledOn is not ready, and Stalled.
func stalledOn(reason, msg string) readiness {
	return readiness{status: metav1.ConditionFalse, reason: reason, message: msg, stalled: true}
}

// readinessOf is fs's readiness after what obs saw, the first of: a failed
// reconcile, a name conflict, an unusable Secret (in the order of
// secretUses), spec.assets in an emptied object form, an invalid asset,
// then a stop (spec.replicas 0), the Deployment's rollout and its pods. url
// is the status's URL, which the Ready message names.
func readinessOf(fs *faucetv1alpha1.FaucetServer, obs observation, url string) readiness {
	switch s := obs.unusableSecret(); {
	case obs.err != nil:
		return inProgress(faucetv1alpha1.ReasonReconcileFailed,
			truncate("reconcile failed, retrying: "+obs.err.Error(), maxConditionMessage))
	case obs.conflict != "":
		return stalledOn(faucetv1alpha1.ReasonNameConflict, truncate(obs.conflict, maxConditionMessage))
	case s != nil:
		return stalledOn(s.reason, s.message)
	case obs.unreadableAssets != "":
		return stalledOn(faucetv1alpha1.ReasonDeprecatedAssets, obs.unreadableAssets)
	case obs.invalidAsset != "":
		return stalledOn(faucetv1alpha1.ReasonInvalidAsset, obs.invalidAsset)
	case obs.deployment == nil:
		// Unreachable after a successful reconcile; kept total for safety.
		return inProgress(faucetv1alpha1.ReasonProgressing, "waiting for the Deployment to be created")
	case stopped(fs):
		return stoppedReadiness(fs, obs.deployment, obs.pods)
	}
	return deploymentReadiness(fs, obs.deployment, obs.pods, url)
}

// stoppedReadiness is the readiness of fs with spec.replicas 0: Stopped, a
// settled state (neither Reconciling nor Stalled), once d has observed its
// spec and no pod of the faucet is left; in progress until then. A pod
// being deleted counts until it is gone, even once its containers have
// exited: the kubelet is still unmounting the volume a restore is about to
// use. A terminated pod nobody deletes (an evicted one) does not.
func stoppedReadiness(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment, pods []corev1.Pod) readiness {
	var left int32
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || (p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed) {
			left++
		}
	}
	switch {
	case d.Status.ObservedGeneration < d.Generation:
		return inProgress(faucetv1alpha1.ReasonProgressing,
			fmt.Sprintf("spec.replicas is 0: waiting for Deployment %q to observe generation %d", d.Name, d.Generation))
	case d.Status.Replicas > 0 || left > 0:
		return inProgress(faucetv1alpha1.ReasonProgressing,
			fmt.Sprintf("spec.replicas is 0: waiting for the faucet's pods to stop (%d left)", max(d.Status.Replicas, left)))
	}
	return readiness{status: metav1.ConditionFalse, reason: faucetv1alpha1.ReasonStopped, message: fmt.Sprintf(
		"spec.replicas is 0: no faucet pod runs; scale it up to serve (kubectl scale fsrv/%s --replicas=1)", fs.Name)}
}

// deploymentReadiness is the readiness of fs's rolled-out or rolling
// Deployment d. Until it is available, a cause its pods show (podTrouble)
// says more than its status, and replaces it; past the rollout's deadline,
// stalled whatever the cause.
func deploymentReadiness(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment, pods []corev1.Pod, url string) readiness {
	phase, msg := deploymentPhase(d)
	if phase != phaseAvailable {
		if r, ok := podTrouble(fs, d, pods); ok {
			if phase == phaseStalled {
				r.stalled, r.reconciling = true, false
			}
			return r
		}
	}
	switch phase {
	case phaseAvailable:
		if fs.Spec.Suspend {
			return readiness{status: metav1.ConditionTrue, reason: faucetv1alpha1.ReasonSuspended,
				message: fmt.Sprintf("the faucet at %s is suspended: drips answer 403, status is served", url)}
		}
		msg := fmt.Sprintf("the faucet serves at %s", url)
		if sa := fs.Spec.SuspendedAssets; len(sa) > 0 {
			msg += fmt.Sprintf("; suspended: %s (drips answer 403)", strings.Join(sa, ", "))
		}
		if da := fs.Spec.DisabledAssets; len(da) > 0 {
			msg += fmt.Sprintf("; turned off: %s", strings.Join(da, ", "))
		}
		return readiness{status: metav1.ConditionTrue, reason: faucetv1alpha1.ReasonAvailable, message: msg}
	case phaseStalled:
		return stalledOn(faucetv1alpha1.ReasonProgressDeadlineExceeded, msg)
	case phaseRollingOut:
		return inProgress(faucetv1alpha1.ReasonProgressing, msg)
	default: // phaseUnavailable: the pod is there but not ready; kubelet keeps probing.
		// Reconciling, so kstatus (which reads only Reconciling and
		// Stalled) reports InProgress, as it does for the Deployment.
		return inProgress(faucetv1alpha1.ReasonDeploymentUnavailable, msg)
	}
}

// setReadiness sets Ready, then sets or removes Reconciling and Stalled,
// as r says, at generation gen.
func setReadiness(st *faucetv1alpha1.FaucetServerStatus, gen int64, now time.Time, r readiness) {
	set := func(typ string, on bool, status metav1.ConditionStatus) {
		if !on {
			meta.RemoveStatusCondition(&st.Conditions, typ)
			return
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: r.reason, Message: r.message,
			ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now),
		})
	}
	set(faucetv1alpha1.ConditionReady, true, r.status)
	set(faucetv1alpha1.ConditionReconciling, r.reconciling, metav1.ConditionTrue)
	set(faucetv1alpha1.ConditionStalled, r.stalled, metav1.ConditionTrue)
}

// setFunding sets status.funding and the Funded condition. Funded does not
// feed Ready: a low faucet still serves (see ConditionFunded).
func setFunding(st *faucetv1alpha1.FaucetServerStatus, fs *faucetv1alpha1.FaucetServer, obs observation, now time.Time) {
	drop := func() {
		st.Funding = nil
		meta.RemoveStatusCondition(&st.Conditions, faucetv1alpha1.ConditionFunded)
	}
	switch {
	case obs.funding != nil:
		t := obs.funding.target
		if obs.funding.nodes != nil {
			st.Nodes, st.NodesSummary = nodesStatusOf(obs.funding.nodes)
		}
		if obs.funding.btcNodes != nil {
			st.BTCNodes, _ = nodesStatusOf(obs.funding.btcNodes)
		}
		if t.btc.address == "" {
			st.BTCNodes = nil // BTC turned off
		}
		out := computeFunding(fs, *obs.funding, st.Funding)
		if out.status != nil && !fundingMatches(out.status, t.addresses, t.treasury, t.tokens, t.btc.address) {
			out.status = nil // a failed first read of new keys: the old figures are of other keys
		}
		st.Funding = out.status
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: faucetv1alpha1.ConditionFunded, Status: out.condStatus, Reason: out.condReason, Message: out.condMessage,
			ObservedGeneration: fs.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	case !obs.keys.usable():
		drop() // no keys, nothing to fund
	case obs.keys.addresses == nil:
		// An error came before the keys were read: keep what was there.
	case st.Funding == nil || !fundingMatches(&faucetv1alpha1.FundingStatus{Keys: st.Funding.Keys, Assets: st.Funding.Assets},
		obs.keys.addresses, "", specTokens(fs), obs.btcKey.address()):
		// Other keys, another token or BTC address than the figures
		// describe, and no read of them yet.
		drop()
	default:
		// No read yet (a restarted operator, a monitor not reached): the
		// last figures of these keys stand until the next read.
	}
}

// specTokens are the tokens of spec.assets; none when one does not parse
// (checkInputs stalls fs then).
func specTokens(fs *faucetv1alpha1.FaucetServer) []tokenTarget {
	tokens, _ := tokenTargets(fs)
	return tokens
}

// Limits the API server puts on messages. An error can be long (an invalid
// child lists every invalid field), and a longer message would get the status
// patch or the event rejected.
const (
	maxConditionMessage = 32768 // metav1.Condition.Message
	maxEventNote        = 1024  // events.k8s.io/v1 Event.Note
)

// truncate shortens s to at most n bytes, without splitting a UTF-8 character.
func truncate(s string, n int) string {
	const ellipsis = "…"
	if len(s) <= n {
		return s
	}
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

type rolloutPhase int

const (
	phaseRollingOut rolloutPhase = iota
	phaseAvailable
	phaseUnavailable
	phaseStalled
)

// deploymentPhase reads a Deployment's status the way `kubectl rollout
// status` does: available once every replica is updated and available.
func deploymentPhase(d *appsv1.Deployment) (rolloutPhase, string) {
	s := d.Status
	var progressing appsv1.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			progressing = c
		}
	}
	if progressing.Status == corev1.ConditionFalse && progressing.Reason == "ProgressDeadlineExceeded" {
		return phaseStalled, fmt.Sprintf("Deployment %q exceeded its progress deadline: %s", d.Name, progressing.Message)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch {
	case s.ObservedGeneration < d.Generation:
		return phaseRollingOut, fmt.Sprintf("waiting for Deployment %q to observe generation %d", d.Name, d.Generation)
	case s.UpdatedReplicas < want:
		return phaseRollingOut, fmt.Sprintf("Deployment %q is rolling out: %d of %d pods updated", d.Name, s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return phaseRollingOut, fmt.Sprintf("Deployment %q is rolling out: %d old pods terminating", d.Name, s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < want && progressing.Reason == "NewReplicaSetAvailable":
		// The rollout had completed; the pod has since become unready.
		return phaseUnavailable, fmt.Sprintf("Deployment %q has %d of %d pods available; the faucet's /readyz fails while its node is unreachable, no key is funded, or (with several replicas) the pod owns no key", d.Name, s.AvailableReplicas, want)
	case s.AvailableReplicas < want:
		return phaseRollingOut, fmt.Sprintf("waiting for the faucet pods of Deployment %q to become ready: %d of %d available", d.Name, s.AvailableReplicas, want)
	}
	return phaseAvailable, ""
}
