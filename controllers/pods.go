package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// Why the faucet's pods do not run. The Deployment's status says that a pod
// is unavailable, not why; the pod's own status does: the kubelet's
// container states and the scheduler's PodScheduled condition. The
// reconcile reads the pods from the cache (observePods), and podTrouble
// turns them into the Ready condition, purely.

// Bounds on what a pod's status puts in a condition message: the kubelet's
// and the scheduler's messages and a container's log can be long, and the
// event repeating the message is cut at maxEventNote anyway.
const (
	maxPodMessage = 1024 // the whole message
	maxQuoted     = 320  // a message quoted from the kubelet or the scheduler
	maxLogTail    = 400  // the last lines a crashed container logged
	logTailLines  = 3
)

// The kubelet's waiting reasons podTrouble reads (pkg/kubelet/images and
// pkg/kubelet/kuberuntime; client-go does not export them).
const (
	waitingErrImagePull         = "ErrImagePull"
	waitingImagePullBackOff     = "ImagePullBackOff"
	waitingInvalidImageName     = "InvalidImageName"
	waitingCreateConfigError    = "CreateContainerConfigError"
	waitingCreateContainerError = "CreateContainerError"
	waitingCrashLoopBackOff     = "CrashLoopBackOff"
	terminatedOOMKilled         = "OOMKilled"
)

// troubleKind is a cause found in a pod, in the order podTrouble prefers
// when pods differ: a container that cannot start at all before one that
// starts and exits, and both before a pod that waits for a node.
type troubleKind int

const (
	troubleImage troubleKind = iota
	troubleConfig
	troubleCrash
	troubleUnschedulable
)

// podFinding is the cause found in one pod.
type podFinding struct {
	kind    troubleKind
	pod     string
	message string
}

// observePods reads fs's pods from the cache into obs.pods, for
// podTrouble. The manager caches only pods carrying the operator's labels
// (CacheByObject).
func (r *FaucetServerReconciler) observePods(ctx context.Context, fs *faucetv1alpha1.FaucetServer, obs *observation) (stepResult, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(fs.Namespace), client.MatchingLabels(selectorLabels(fs))); err != nil {
		return stepDone, fmt.Errorf("failed to list the faucet's pods: %w", err)
	}
	obs.pods = list.Items
	return stepDone, nil
}

// podTrouble is why the pods of d's current pod template do not run, as
// fs's readiness; false when no pod shows a cause (still starting, or
// running and failing its readiness probe, which the Deployment's
// readiness reports). Only pods of the template's config hash count: a pod
// of an earlier template is being replaced, and its cause with it. With
// several causes, the first troubleKind wins, then the first pod by name.
func podTrouble(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment, pods []corev1.Pod) (readiness, bool) {
	hash := d.Spec.Template.Annotations[ConfigHashAnnotation]
	var best *podFinding
	current, failing := 0, 0
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if hash != "" && p.Annotations[ConfigHashAnnotation] != hash {
			continue
		}
		current++
		f, ok := troubleOfPod(fs, p)
		if !ok {
			continue
		}
		failing++
		if best == nil || f.kind < best.kind || (f.kind == best.kind && f.pod < best.pod) {
			best = &f
		}
	}
	if best == nil {
		return readiness{}, false
	}
	msg := best.message
	if current > 1 {
		msg = fmt.Sprintf("%d of %d pods cannot run; %s", failing, current, msg)
	}
	msg = truncate(msg, maxPodMessage)
	switch best.kind {
	case troubleImage:
		return stalledOn(faucetv1alpha1.ReasonImagePullFailed, msg), true
	case troubleConfig:
		return stalledOn(faucetv1alpha1.ReasonContainerConfigError, msg), true
	case troubleCrash:
		return stalledOn(faucetv1alpha1.ReasonCrashLooping, msg), true
	default:
		return inProgress(faucetv1alpha1.ReasonUnschedulable, msg), true
	}
}

// troubleOfPod is the cause p shows: that of its first container (init
// containers first) with one, else the scheduler's refusal.
func troubleOfPod(fs *faucetv1alpha1.FaucetServer, p *corev1.Pod) (podFinding, bool) {
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if f, ok := troubleOfContainer(fs, p, cs); ok {
			return f, true
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return podFinding{troubleUnschedulable, p.Name, unschedulableMessage(fs, p, c.Message)}, true
		}
	}
	return podFinding{}, false
}

// troubleOfContainer is the cause cs shows, if any. A container that
// exited with an error counts as crashing from its first exit: the kubelet
// reports CrashLoopBackOff only once it backs off.
func troubleOfContainer(fs *faucetv1alpha1.FaucetServer, p *corev1.Pod, cs corev1.ContainerStatus) (podFinding, bool) {
	if w := cs.State.Waiting; w != nil {
		switch w.Reason {
		case waitingErrImagePull, waitingImagePullBackOff, waitingInvalidImageName:
			return podFinding{troubleImage, p.Name, imagePullMessage(fs, p, cs)}, true
		case waitingCreateConfigError, waitingCreateContainerError:
			return podFinding{troubleConfig, p.Name, containerConfigMessage(p, cs)}, true
		case waitingCrashLoopBackOff:
			return podFinding{troubleCrash, p.Name, crashMessage(p, cs, cs.LastTerminationState.Terminated)}, true
		}
	}
	if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
		return podFinding{troubleCrash, p.Name, crashMessage(p, cs, t)}, true
	}
	return podFinding{}, false
}

// imagePullMessage names the image cs cannot pull, quotes the kubelet and
// says where the image comes from and how to make it pullable.
func imagePullMessage(fs *faucetv1alpha1.FaucetServer, p *corev1.Pod, cs corev1.ContainerStatus) string {
	image := containerImage(p, cs)
	w := cs.State.Waiting
	source, fix := "from spec.image", "correct spec.image"
	if fs.Spec.Image == "" {
		source = "the operator's default: the manager's --server-image, the chart's serverImage value, else its image"
		fix = "correct --server-image, or set spec.image"
	}
	if w.Reason == waitingInvalidImageName {
		return fmt.Sprintf("pod %s: image %q (%s) is not a valid image reference: %s. Fix: %s",
			p.Name, image, source, sentence(w.Message), fix)
	}
	return fmt.Sprintf("pod %s cannot pull image %q (%s): %s: %s. Make it pullable by the cluster's nodes: "+
		"push it to a registry they reach (with spec.imagePullSecrets if it is private), "+
		"or load it into each node's container runtime (`make image` writes bin/faucet-image.tar for "+
		"`make load-image`, `kind load image-archive` or `ctr -n k8s.io images import`); or %s to an image they can pull",
		p.Name, image, source, w.Reason, sentence(w.Message), fix)
}

// containerImage is the image of cs's container as the pod spec names it
// (the status may hold a resolved name), else as the status has it.
func containerImage(p *corev1.Pod, cs corev1.ContainerStatus) string {
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if c.Name == cs.Name {
			return c.Image
		}
	}
	return cs.Image
}

// containerConfigMessage quotes the kubelet on a container it cannot
// create. Its messages name a missing Secret, ConfigMap or key, never a
// value.
func containerConfigMessage(p *corev1.Pod, cs corev1.ContainerStatus) string {
	w := cs.State.Waiting
	fix := "the container runtime refused it; `kubectl describe pod -n " + p.Namespace + " " + p.Name + "` shows the kubelet's events"
	if w.Reason == waitingCreateConfigError {
		fix = "create the Secret or ConfigMap (or the key) it names, or correct spec.extraEnv"
	}
	return fmt.Sprintf("container %q of pod %s cannot be created: %s: %s. Fix: %s", cs.Name, p.Name, w.Reason, sentence(w.Message), fix)
}

// crashMessage says how cs last exited (t; nil if unknown), with the last
// lines it logged (the container's termination message falls back to its
// log), and how to read its log.
func crashMessage(p *corev1.Pod, cs corev1.ContainerStatus, t *corev1.ContainerStateTerminated) string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %q of pod %s keeps exiting (restarted %d times", cs.Name, p.Name, cs.RestartCount)
	if t != nil {
		fmt.Fprintf(&b, "; last exit code %d", t.ExitCode)
		if t.Reason != "" {
			fmt.Fprintf(&b, ", %s", t.Reason)
		}
	}
	b.WriteString(")")
	if t != nil {
		if tail := logTail(t.Message); tail != "" {
			fmt.Fprintf(&b, "; its last lines: %s", tail)
		}
		if t.Reason == terminatedOOMKilled {
			b.WriteString(". It ran out of memory: raise spec.resources.limits.memory")
		}
	}
	fmt.Fprintf(&b, ". Its log: kubectl logs -n %s %s -c %s --previous", p.Namespace, p.Name, cs.Name)
	return b.String()
}

// unschedulableMessage quotes the scheduler, and for a claim that no
// volume binds, says what the embedded store's claim needs.
func unschedulableMessage(fs *faucetv1alpha1.FaucetServer, p *corev1.Pod, msg string) string {
	const nodes = "spec.nodeSelector, tolerations, affinity, topologySpreadConstraints and resources against the cluster's nodes"
	if strings.Contains(msg, "PersistentVolumeClaim") && fs.StoreKind() == faucetv1alpha1.StoreEmbedded {
		return fmt.Sprintf("pod %s cannot be scheduled: %s. The embedded store's claim %s needs a volume: a default StorageClass, "+
			"spec.store.embedded.storageClassName, or a PersistentVolume it binds to; else check %s", p.Name, sentence(msg), VolumeClaimName(fs), nodes)
	}
	return fmt.Sprintf("pod %s cannot be scheduled: %s. Check %s", p.Name, sentence(msg), nodes)
}

// sentence is a message quoted in a sentence of ours: on one line, its
// runs of white space as one space, without a closing full stop, cut at
// maxQuoted bytes.
func sentence(s string) string {
	return truncate(strings.TrimRight(strings.Join(strings.Fields(s), " "), "."), maxQuoted)
}

// logTail is the last logTailLines non-empty lines of a termination
// message, joined with " | ", at most maxLogTail bytes from its end.
func logTail(msg string) string {
	var lines []string
	for l := range strings.SplitSeq(msg, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines[max(0, len(lines)-logTailLines):], " | ")
	if len(s) <= maxLogTail {
		return s
	}
	cut := len(s) - maxLogTail + len("…")
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}

// requestForPod maps a faucet pod to its FaucetServer, by the labels its
// Deployment gives it (podLabels cannot replace them).
func requestForPod(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[labelName] != appName || l[labelManagedBy] != FieldManager || l[labelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[labelInstance]}}}
}

// podStatusChanged lets a pod's creation and deletion through, and an
// update only when its status or deletion changed: that is all podTrouble
// reads of a pod besides its labels and config hash, which do not change.
var podStatusChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*corev1.Pod)
	n, ok2 := e.ObjectNew.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	return !equality.Semantic.DeepEqual(o.Status, n.Status) || !o.DeletionTimestamp.Equal(n.DeletionTimestamp)
}}
