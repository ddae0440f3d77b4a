package controllers

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// The pods of these tests are as the kubelet and the scheduler report them
// (messages copied from a containerd node and kube-scheduler).

const (
	pullRefused = `failed to pull and unpack image "localhost/faucet-operator/does-not-exist:1": failed to resolve reference ` +
		`"localhost/faucet-operator/does-not-exist:1": failed to do request: Head "https://localhost/v2/faucet-operator/does-not-exist/manifests/1": ` +
		`dial tcp 127.0.0.1:443: connect: connection refused`
	missingKey = `couldn't find key token in Secret testnet/extra`
	noNode     = `0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.`
	unboundPVC = `0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.`
	// crashLog is what FallbackToLogsOnError puts in the termination
	// message: the last lines of the log, the fatal error last.
	crashLog = `{"level":"INFO","msg":"faucet starting"}
{"level":"INFO","msg":"store opened"}

{"level":"ERROR","msg":"node check failed"}
faucet: --node-url: no Stacks node answers at http://stacks-node:20443
`
)

// faucetPod is a pod of fs's Deployment d as its ReplicaSet creates it,
// its status set by mutate.
func faucetPod(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment, name string, mutate func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: fs.Namespace, Name: name,
			Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations,
		},
		Spec:   d.Spec.Template.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func waitingIn(reason, message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: containerName, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
		}}
	}
}

func crashed(exitCode int32, reason, log string, restarts int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: containerName, RestartCount: restarts,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: waitingCrashLoopBackOff, Message: "back-off 40s restarting failed container=faucet pod=x",
			}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, Message: log}},
		}}
	}
}

func unschedulable(message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: message,
		}}
	}
}

func running(ready bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: containerName, Ready: ready, RestartCount: 1,
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}},
		}}
	}
}

func TestPodTrouble(t *testing.T) {
	pinned := fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Image = "localhost/faucet-operator/does-not-exist:1" })
	def := fixture()
	pg := fixture(postgres(2))
	type want struct {
		reason   string // "" for no cause found
		stalled  bool
		contains []string
		lacks    []string
	}
	tests := map[string]struct {
		fs   *faucetv1alpha1.FaucetServer
		pods func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod
		want want
	}{
		"no pods yet": {fs: def, pods: func(*faucetv1alpha1.FaucetServer, *appsv1.Deployment) []corev1.Pod { return nil }},
		"a pod starting, then running unready: the Deployment's status says it": {
			fs: def,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-a", waitingIn("ContainerCreating", "")), faucetPod(fs, d, "faucet-b", running(false))}
			},
		},
		"spec.image cannot be pulled": {
			fs: pinned,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-6f7c-x", waitingIn(waitingErrImagePull, pullRefused))}
			},
			want: want{reason: faucetv1alpha1.ReasonImagePullFailed, stalled: true, contains: []string{
				`pod faucet-6f7c-x cannot pull image "localhost/faucet-operator/does-not-exist:1" (from spec.image): ErrImagePull: failed to pull and unpack image`,
				"connection refused", "bin/faucet-image.tar", "kind load image-archive", "correct spec.image to an image they can pull",
			}, lacks: []string{"--server-image"}},
		},
		"the default image backing off: the fix names --server-image": {
			fs: def,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", waitingIn(waitingImagePullBackOff, `Back-off pulling image "img:1": ErrImagePull: not found`))}
			},
			want: want{reason: faucetv1alpha1.ReasonImagePullFailed, stalled: true, contains: []string{
				`image "img:1" (the operator's default: the manager's --server-image`, "): ImagePullBackOff: Back-off pulling image",
				"correct --server-image, or set spec.image to an image they can pull",
			}},
		},
		"an invalid image reference": {
			fs: fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Image = "Faucet:Latest" }),
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", waitingIn(waitingInvalidImageName, `Failed to apply default image tag "Faucet:Latest": couldn't parse image name "Faucet:Latest": invalid reference format: repository name must be lowercase`))}
			},
			want: want{reason: faucetv1alpha1.ReasonImagePullFailed, stalled: true, contains: []string{
				`image "Faucet:Latest" (from spec.image) is not a valid image reference: Failed to apply`, "must be lowercase. Fix: correct spec.image",
			}},
		},
		"a crash loop: exit code, the last lines logged, the command to read the log": {
			fs: def,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", crashed(1, "Error", crashLog, 4))}
			},
			want: want{reason: faucetv1alpha1.ReasonCrashLooping, stalled: true, contains: []string{
				`container "faucet" of pod faucet-x keeps exiting (restarted 4 times; last exit code 1, Error); its last lines: ` +
					`{"level":"INFO","msg":"store opened"} | {"level":"ERROR","msg":"node check failed"} | faucet: --node-url: no Stacks node answers at http://stacks-node:20443. ` +
					`Its log: kubectl logs -n testnet faucet-x -c faucet --previous`,
			}, lacks: []string{"faucet starting", "limits.memory"}},
		},
		"the first failed exit, before the kubelet backs off": {
			fs: def,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{
						Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "faucet: --amount: invalid\n"},
					}}}
				})}
			},
			want: want{reason: faucetv1alpha1.ReasonCrashLooping, stalled: true, contains: []string{"last exit code 2, Error); its last lines: faucet: --amount: invalid."}},
		},
		"out of memory": {
			fs: def,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", crashed(137, terminatedOOMKilled, "", 2))}
			},
			want: want{reason: faucetv1alpha1.ReasonCrashLooping, stalled: true, contains: []string{"last exit code 137, OOMKilled). It ran out of memory: raise spec.resources.limits.memory"}},
		},
		"a Secret key spec.extraEnv names is missing": {
			fs: def,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", waitingIn(waitingCreateConfigError, missingKey))}
			},
			want: want{reason: faucetv1alpha1.ReasonContainerConfigError, stalled: true, contains: []string{
				`container "faucet" of pod faucet-x cannot be created: CreateContainerConfigError: couldn't find key token in Secret testnet/extra. Fix: create the Secret or ConfigMap`,
			}},
		},
		"no node fits: not stalled, a node may come": {
			fs: def,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", unschedulable(noNode))}
			},
			want: want{reason: faucetv1alpha1.ReasonUnschedulable, contains: []string{
				"pod faucet-x cannot be scheduled: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption:", "Preemption is not helpful for scheduling. Check spec.nodeSelector",
			}, lacks: []string{"StorageClass"}},
		},
		"the embedded store's claim unbound": {
			fs: def,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", unschedulable(unboundPVC))}
			},
			want: want{reason: faucetv1alpha1.ReasonUnschedulable, contains: []string{
				"unbound immediate PersistentVolumeClaims", "scheduling. The embedded store's claim faucet-data needs a volume: a default StorageClass, spec.store.embedded.storageClassName", "; else check spec.nodeSelector",
			}},
		},
		"an unbound claim of someone else's with Postgres: no word of the embedded store": {
			fs: pg,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{faucetPod(fs, d, "faucet-x", unschedulable(unboundPVC))}
			},
			want: want{reason: faucetv1alpha1.ReasonUnschedulable, contains: []string{"scheduling. Check spec.nodeSelector"}, lacks: []string{"embedded"}},
		},
		"a pod of an earlier template, and a terminating one, do not count": {
			fs: pinned,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				old := faucetPod(fs, d, "faucet-old", waitingIn(waitingImagePullBackOff, pullRefused))
				old.Annotations = map[string]string{ConfigHashAnnotation: "an-earlier-hash"}
				gone := faucetPod(fs, d, "faucet-gone", crashed(1, "Error", "", 3))
				gone.DeletionTimestamp = &metav1.Time{}
				evicted := faucetPod(fs, d, "faucet-evicted", crashed(1, "Error", "", 3))
				evicted.Status.Phase = corev1.PodFailed
				return []corev1.Pod{old, gone, evicted, faucetPod(fs, d, "faucet-new", waitingIn("ContainerCreating", ""))}
			},
		},
		"several pods: an image beats a crash and a missing node, whatever the order": {
			fs: pg,
			pods: func(fs *faucetv1alpha1.FaucetServer, d *appsv1.Deployment) []corev1.Pod {
				return []corev1.Pod{
					faucetPod(fs, d, "faucet-a", unschedulable(noNode)),
					faucetPod(fs, d, "faucet-b", crashed(1, "Error", "", 1)),
					faucetPod(fs, d, "faucet-d", waitingIn(waitingErrImagePull, pullRefused)),
					faucetPod(fs, d, "faucet-c", waitingIn(waitingImagePullBackOff, pullRefused)),
					faucetPod(fs, d, "faucet-e", running(true)),
				}
			},
			want: want{reason: faucetv1alpha1.ReasonImagePullFailed, stalled: true, contains: []string{"4 of 5 pods cannot run; pod faucet-c cannot pull"}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := deploymentFor(tt.fs, "img:1", secretDigests{keys: "k"})
			got, ok := podTrouble(tt.fs, d, tt.pods(tt.fs, d))
			if tt.want.reason == "" {
				if ok {
					t.Fatalf("podTrouble found %+v, want nothing", got)
				}
				return
			}
			if !ok {
				t.Fatalf("podTrouble found nothing, want %s", tt.want.reason)
			}
			if got.status != metav1.ConditionFalse || got.reason != tt.want.reason || got.stalled != tt.want.stalled || got.reconciling == tt.want.stalled {
				t.Errorf("readiness %+v, want Ready=False %s, stalled %v (else reconciling)", got, tt.want.reason, tt.want.stalled)
			}
			for _, s := range tt.want.contains {
				if !strings.Contains(got.message, s) {
					t.Errorf("message lacks %q:\n%s", s, got.message)
				}
			}
			for _, s := range tt.want.lacks {
				if strings.Contains(got.message, s) {
					t.Errorf("message has %q:\n%s", s, got.message)
				}
			}
			if len(got.message) > maxPodMessage {
				t.Errorf("message of %d bytes, over %d", len(got.message), maxPodMessage)
			}
		})
	}
}

// Whatever the kubelet and the log say, the message stays bounded, valid
// UTF-8, on one line.
func TestPodTroubleBounded(t *testing.T) {
	fs := fixture()
	d := deploymentFor(fs, "img:1", secretDigests{})
	huge := strings.Repeat("é\nx ", 50_000)
	for name, mutate := range map[string]func(*corev1.Pod){
		"kubelet":   waitingIn(waitingErrImagePull, huge),
		"log":       crashed(1, "Error", huge, 9),
		"scheduler": unschedulable(huge),
	} {
		got, ok := podTrouble(fs, d, []corev1.Pod{faucetPod(fs, d, "faucet-x", mutate)})
		if !ok || len(got.message) > maxPodMessage || !utf8.ValidString(got.message) || strings.Contains(got.message, "\n") {
			t.Errorf("%s: %d bytes, valid UTF-8 %v, ok %v: %q", name, len(got.message), utf8.ValidString(got.message), ok, got.message)
		}
	}
	if tail := logTail(strings.Repeat("é", 1000) + "x\n"); len(tail) > maxLogTail || !utf8.ValidString(tail) || !strings.HasPrefix(tail, "…") || !strings.HasSuffix(tail, "x") {
		t.Errorf("logTail: %d bytes %q", len(tail), tail)
	}
}

// The pods' cause replaces the Deployment's status until it is available,
// and a rollout past its deadline stalls whatever the cause.
func TestReadinessFromPods(t *testing.T) {
	fs := fixture()
	d := func(mutate func(*appsv1.DeploymentStatus)) *appsv1.Deployment {
		dep := deploymentFor(fs, "img:1", secretDigests{})
		dep.Generation = 2
		mutate(&dep.Status)
		return dep
	}
	pod := func(dep *appsv1.Deployment, mutate func(*corev1.Pod)) []corev1.Pod {
		return []corev1.Pod{faucetPod(fs, dep, "faucet-x", mutate)}
	}
	deadline := func(s *appsv1.DeploymentStatus) {
		s.ObservedGeneration, s.Replicas, s.UpdatedReplicas = 2, 1, 1
		s.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
	}
	starting := func(s *appsv1.DeploymentStatus) { s.ObservedGeneration, s.Replicas, s.UpdatedReplicas = 2, 1, 1 }
	for name, tt := range map[string]struct {
		dep                  *appsv1.Deployment
		mutate               func(*corev1.Pod)
		reason               string
		reconciling, stalled bool
	}{
		"available: a failing pod beside it does not matter": {d(available), crashed(1, "Error", "", 3), faucetv1alpha1.ReasonAvailable, false, false},
		"rolling out with an image that cannot be pulled":    {d(starting), waitingIn(waitingImagePullBackOff, pullRefused), faucetv1alpha1.ReasonImagePullFailed, false, true},
		"rolled out, crashing since":                         {d(rolledOut), crashed(1, "Error", "", 3), faucetv1alpha1.ReasonCrashLooping, false, true},
		"rolled out, running unready":                        {d(rolledOut), running(false), faucetv1alpha1.ReasonDeploymentUnavailable, true, false},
		"past the deadline, unschedulable: stalled":          {d(deadline), unschedulable(noNode), faucetv1alpha1.ReasonUnschedulable, false, true},
		"past the deadline, no cause in the pods":            {d(deadline), running(false), faucetv1alpha1.ReasonProgressDeadlineExceeded, false, true},
	} {
		t.Run(name, func(t *testing.T) {
			obs := observation{keys: goodKeys, service: serviceFor(fs), deployment: tt.dep, pods: pod(tt.dep, tt.mutate)}
			got := readinessOf(fs, obs, "http://faucet.testnet.svc:3999")
			if got.reason != tt.reason || got.reconciling != tt.reconciling || got.stalled != tt.stalled {
				t.Errorf("readiness %+v, want %s, reconciling %v, stalled %v", got, tt.reason, tt.reconciling, tt.stalled)
			}
		})
	}
}

func TestRequestForPod(t *testing.T) {
	fs := fixture()
	d := deploymentFor(fs, "img:1", secretDigests{})
	p := faucetPod(fs, d, "faucet-x", nil)
	reqs := requestForPod(context.Background(), &p)
	if len(reqs) != 1 || reqs[0].Namespace != "testnet" || reqs[0].Name != "faucet" {
		t.Errorf("requests %v, want testnet/faucet", reqs)
	}
	other := p.DeepCopy()
	other.Labels = map[string]string{labelInstance: "faucet", labelName: "something-else", labelManagedBy: FieldManager}
	if reqs := requestForPod(context.Background(), other); reqs != nil {
		t.Errorf("another app's pod maps to %v", reqs)
	}

	updated := p.DeepCopy()
	updated.Labels = map[string]string{"touched": "yes"}
	if podStatusChanged.Update(event.UpdateEvent{ObjectOld: &p, ObjectNew: updated}) {
		t.Error("a label change requeues")
	}
	waitingIn(waitingErrImagePull, pullRefused)(updated)
	if !podStatusChanged.Update(event.UpdateEvent{ObjectOld: &p, ObjectNew: updated}) {
		t.Error("a status change does not requeue")
	}
	if !podStatusChanged.Create(event.CreateEvent{Object: &p}) || !podStatusChanged.Delete(event.DeleteEvent{Object: &p}) {
		t.Error("a created or deleted pod does not requeue")
	}
}
