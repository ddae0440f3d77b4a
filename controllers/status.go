package controllers

import (
	"fmt"
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
	btcKey   secretState // the Bitcoin key of spec.assets.btc
	btcCreds secretState // the Bitcoin node's RPC credentials
	// invalidAsset says why an asset identifier of spec.assets does not
	// parse; "" when every one does.
	invalidAsset string
	// funding is the FundingMonitor's latest result for the current keys,
	// nil when there is none (yet, or without a monitor).
	funding    *fundingResult
	conflict   string             // why a child's name is taken; "" if none is
	service    *corev1.Service    // as applied; nil if not reached
	deployment *appsv1.Deployment // as applied or read; nil if none
	err        error              // the reconcile error, if any
}

// computeStatus derives the status from the previous one (for condition
// transition times) and what was observed. It is pure: no client, the clock
// passed in.
func computeStatus(fs *faucetv1alpha1.FaucetServer, obs observation, now time.Time) faucetv1alpha1.FaucetServerStatus {
	st := *fs.Status.DeepCopy()
	st.FaucetAddresses = obs.keys.addresses
	st.URL = serviceURL(obs.service)
	st.Store = fs.StoreKind()
	st.ReadyReplicas = 0
	if obs.deployment != nil {
		st.ReadyReplicas = obs.deployment.Status.ReadyReplicas
	}

	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: fs.Generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	ready := func(status metav1.ConditionStatus, reason, msg string) {
		set(faucetv1alpha1.ConditionReady, status, reason, msg)
	}
	// Abnormal-true conditions exist only while true (kstatus).
	reconciling := func(reason, msg string) {
		if reason == "" {
			meta.RemoveStatusCondition(&st.Conditions, faucetv1alpha1.ConditionReconciling)
			return
		}
		set(faucetv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
	}
	stalled := func(reason, msg string) {
		if reason == "" {
			meta.RemoveStatusCondition(&st.Conditions, faucetv1alpha1.ConditionStalled)
			return
		}
		set(faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	}

	setFunding(&st, fs, obs, now)

	switch {
	case obs.err != nil:
		// Retried with backoff; the generation is not observed until it
		// succeeds. What this attempt did not get to observe keeps its last
		// value, so a transient error does not blank the URL, the addresses
		// or the replica count.
		if obs.keys.usable() && obs.keys.addresses == nil {
			st.FaucetAddresses = fs.Status.FaucetAddresses
		}
		if obs.service == nil {
			st.URL = fs.Status.URL
		}
		if obs.deployment == nil {
			st.ReadyReplicas = fs.Status.ReadyReplicas
		}
		msg := truncate("reconcile failed, retrying: "+obs.err.Error(), maxConditionMessage)
		ready(metav1.ConditionFalse, faucetv1alpha1.ReasonReconcileFailed, msg)
		reconciling(faucetv1alpha1.ReasonReconcileFailed, msg)
		stalled("", "")
		return st

	case obs.conflict != "":
		msg := truncate(obs.conflict, maxConditionMessage)
		ready(metav1.ConditionFalse, faucetv1alpha1.ReasonNameConflict, msg)
		reconciling("", "")
		stalled(faucetv1alpha1.ReasonNameConflict, msg)

	case !obs.keys.usable():
		ready(metav1.ConditionFalse, obs.keys.reason, obs.keys.message)
		reconciling("", "")
		stalled(obs.keys.reason, obs.keys.message)

	case !obs.store.usable():
		ready(metav1.ConditionFalse, obs.store.reason, obs.store.message)
		reconciling("", "")
		stalled(obs.store.reason, obs.store.message)

	case !obs.tokens.usable():
		ready(metav1.ConditionFalse, obs.tokens.reason, obs.tokens.message)
		reconciling("", "")
		stalled(obs.tokens.reason, obs.tokens.message)

	case !obs.treasury.usable():
		ready(metav1.ConditionFalse, obs.treasury.reason, obs.treasury.message)
		reconciling("", "")
		stalled(obs.treasury.reason, obs.treasury.message)

	case !obs.btcKey.usable():
		ready(metav1.ConditionFalse, obs.btcKey.reason, obs.btcKey.message)
		reconciling("", "")
		stalled(obs.btcKey.reason, obs.btcKey.message)

	case !obs.btcCreds.usable():
		ready(metav1.ConditionFalse, obs.btcCreds.reason, obs.btcCreds.message)
		reconciling("", "")
		stalled(obs.btcCreds.reason, obs.btcCreds.message)

	case obs.invalidAsset != "":
		ready(metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidAsset, obs.invalidAsset)
		reconciling("", "")
		stalled(faucetv1alpha1.ReasonInvalidAsset, obs.invalidAsset)

	case obs.deployment == nil:
		// Unreachable after a successful reconcile; kept total for safety.
		msg := "waiting for the Deployment to be created"
		ready(metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing, msg)
		reconciling(faucetv1alpha1.ReasonProgressing, msg)
		stalled("", "")

	default:
		d := obs.deployment
		switch phase, msg := deploymentPhase(d); phase {
		case phaseAvailable:
			reason, msg := faucetv1alpha1.ReasonAvailable, fmt.Sprintf("the faucet serves at %s", st.URL)
			if fs.Spec.Suspend {
				reason, msg = faucetv1alpha1.ReasonSuspended, fmt.Sprintf("the faucet at %s is suspended: drips answer 403, status is served", st.URL)
			}
			ready(metav1.ConditionTrue, reason, msg)
			reconciling("", "")
			stalled("", "")
		case phaseStalled:
			ready(metav1.ConditionFalse, faucetv1alpha1.ReasonProgressDeadlineExceeded, msg)
			reconciling("", "")
			stalled(faucetv1alpha1.ReasonProgressDeadlineExceeded, msg)
		case phaseRollingOut:
			ready(metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing, msg)
			reconciling(faucetv1alpha1.ReasonProgressing, msg)
			stalled("", "")
		default: // phaseUnavailable: the pod is there but not ready; kubelet keeps probing.
			// Reconciling, so kstatus (which reads only Reconciling and
			// Stalled) reports InProgress, as it does for the Deployment.
			ready(metav1.ConditionFalse, faucetv1alpha1.ReasonDeploymentUnavailable, msg)
			reconciling(faucetv1alpha1.ReasonDeploymentUnavailable, msg)
			stalled("", "")
		}
	}
	st.ObservedGeneration = fs.Generation
	return st
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
		out := computeFunding(fs, *obs.funding, st.Funding)
		if out.status != nil && !fundingMatches(out.status, t.addresses, t.treasury, t.sbtcID(), t.btc.address) {
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
		obs.keys.addresses, "", specSBTCID(fs), obs.btcKey.address()):
		// Other keys, another sBTC asset or BTC address than the
		// figures describe, and no read of them yet.
		drop()
	default:
		// No read yet (a restarted operator, a monitor not reached): the
		// last figures of these keys stand until the next read.
	}
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
