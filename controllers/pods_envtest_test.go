package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// envtest has no ReplicaSet controller, scheduler or kubelet: these specs
// write the faucet's pods and their status themselves, as those would, and
// leave the Deployment rolling out. The FaucetServer's node holds the
// funding monitor's first read until the spec ends, so no balance reading
// requeues it either: only the pod watch tells the operator what changed.
var _ = Describe("FaucetServer pods that do not run", func() {
	var ns string
	var node *heldNode

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fsrv-pods-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name
		node = startHeldNode()
	})

	// onHeldNode creates the key Secret and the FaucetServer on the held
	// node, and waits for the monitor's read to be held.
	onHeldNode := func(mutate func(*faucetv1alpha1.FaucetServer)) {
		GinkgoHelper()
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.URL = node.url
			if mutate != nil {
				mutate(fs)
			}
		})
		Eventually(node.inFlight.Load).Should(BeNumerically(">=", 1))
	}

	AfterEach(func() {
		Expect(node.ended.Load()).To(BeZero(), "a balance read ended: it may have requeued the FaucetServer in the pod watch's stead")
	})

	It("says which image cannot be pulled, stalled, and clears once the pod runs", func() {
		const image = "localhost/faucet-operator/does-not-exist:1"
		onHeldNode(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Image = image })
		setDeploymentRollingOut(ns)
		pod := createFaucetPod(ns, fsName+"-5d8f9c7b-q2x7m", waitingIn(waitingErrImagePull, pullRefused))

		By("Ready=False ImagePullFailed naming the image, Stalled, and a Warning event")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			ready := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonImagePullFailed)
			g.Expect(ready.Message).To(ContainSubstring(`pod %s cannot pull image %q (from spec.image): ErrImagePull: failed to pull`, pod.Name, image))
			g.Expect(ready.Message).To(ContainSubstring("bin/faucet-image.tar"))
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonImagePullFailed)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionReconciling)).To(BeNil())
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonImagePullFailed)

		By("the kubelet backing off: the same reason, its message")
		setPodStatus(pod, waitingIn(waitingImagePullBackOff, `Back-off pulling image "`+image+`": ErrImagePull: not found`))
		Eventually(func(g Gomega) {
			ready := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonImagePullFailed)
			g.Expect(ready.Message).To(ContainSubstring("ImagePullBackOff: Back-off pulling image"))
		}).Should(Succeed())

		By("the image pulled, the pod running but not ready yet: the rollout again")
		setPodStatus(pod, running(false))
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
		}).Should(Succeed())

		By("the pod ready, the Deployment available")
		setPodStatus(pod, running(true))
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
		}).Should(Succeed())
	})

	It("reports a crash loop, a missing Secret key and no node fitting, each with its reason, and ignores pods of an earlier template", func() {
		onHeldNode(nil)
		setDeploymentRollingOut(ns)
		stale := createFaucetPod(ns, fsName+"-0ld0ld00-aaaaa", nil)
		stale.Annotations[ConfigHashAnnotation] = "an-earlier-template"
		Expect(k8sClient.Update(suiteCtx, stale)).To(Succeed())
		setPodStatus(stale, waitingIn(waitingImagePullBackOff, pullRefused))
		pod := createFaucetPod(ns, fsName+"-5d8f9c7b-q2x7m", crashed(1, "Error", crashLog, 3))

		for _, step := range []struct {
			mutate  func(*corev1.Pod)
			reason  string
			stalled bool
			message string
		}{
			{nil, faucetv1alpha1.ReasonCrashLooping, true, `keeps exiting (restarted 3 times; last exit code 1, Error); its last lines: ` +
				`{"level":"INFO","msg":"store opened"} | {"level":"ERROR","msg":"node check failed"} | faucet: --node-url: no Stacks node answers at http://stacks-node:20443. ` +
				`Its log: kubectl logs -n ` + ns + ` ` + pod.Name + ` -c faucet --previous`},
			{waitingIn(waitingCreateConfigError, missingKey), faucetv1alpha1.ReasonContainerConfigError, true, "couldn't find key token in Secret testnet/extra"},
			{unschedulable(unboundPVC), faucetv1alpha1.ReasonUnschedulable, false, "The embedded store's claim faucet-data needs a volume"},
		} {
			By("the pod " + step.reason)
			if step.mutate != nil {
				setPodStatus(pod, step.mutate)
			}
			Eventually(func(g Gomega) {
				got := getFaucetServer(g, ns)
				ready := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, step.reason)
				g.Expect(ready.Message).To(ContainSubstring(step.message))
				g.Expect(ready.Message).NotTo(ContainSubstring(stale.Name))
				abnormal, other := faucetv1alpha1.ConditionStalled, faucetv1alpha1.ConditionReconciling
				if !step.stalled {
					abnormal, other = other, abnormal
				}
				expectCondition(g, got, abnormal, metav1.ConditionTrue, step.reason)
				g.Expect(meta.FindStatusCondition(got.Status.Conditions, other)).To(BeNil())
			}).Should(Succeed())
			expectEvent(ns, corev1.EventTypeWarning, step.reason)
		}

		By("the pod gone: the rollout again, the old template's pod still ignored")
		Expect(k8sClient.Delete(suiteCtx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
		}).Should(Succeed())
	})
})

// setDeploymentRollingOut plays the Deployment controller for the current
// generation of a new rollout: one updated pod, none available.
func setDeploymentRollingOut(ns string) {
	GinkgoHelper()
	Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(suiteCtx, key(ns), d); err != nil {
			return err
		}
		now := metav1.Now()
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated", LastUpdateTime: now, LastTransitionTime: now},
			},
		}
		return k8sClient.Status().Update(suiteCtx, d)
	}).Should(Succeed())
}

// createFaucetPod plays the ReplicaSet controller: a pod of the
// Deployment's current template, named name; then the kubelet, with the
// status mutate sets (none when nil).
func createFaucetPod(ns, name string, mutate func(*corev1.Pod)) *corev1.Pod {
	GinkgoHelper()
	d := eventuallyDeployment(ns)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations},
		Spec:       d.Spec.Template.Spec,
	}
	Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
	if mutate != nil {
		setPodStatus(p, mutate)
	}
	return p
}

// setPodStatus plays the kubelet: p's status as mutate sets it, from
// scratch.
func setPodStatus(p *corev1.Pod, mutate func(*corev1.Pod)) {
	GinkgoHelper()
	Eventually(func() error {
		cur := &corev1.Pod{}
		if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		cur.Status = corev1.PodStatus{Phase: corev1.PodPending}
		mutate(cur)
		return k8sClient.Status().Update(suiteCtx, cur)
	}).Should(Succeed())
}
