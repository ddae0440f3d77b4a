package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

var _ = Describe("FaucetServer scaled to zero", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fsrv-scale-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name
	})

	It("stops with replicas 0, keeping the claim, and starts again through the scale subresource", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Replicas = ptr.To(int32(0)) })

		By("applying a Deployment of 0 replicas and the embedded store's claim")
		d := eventuallyDeployment(ns)
		Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(0))))
		pvc := &corev1.PersistentVolumeClaim{}
		Eventually(func() error {
			return k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-data"}, pvc)
		}).Should(Succeed())

		By("reporting Stopped, neither Reconciling nor Stalled, once the Deployment has no pod")
		setDeploymentReplicas(ns, 0, 0)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonStopped)
			g.Expect(c.Message).To(Equal("spec.replicas is 0: no faucet pod runs; scale it up to serve (kubectl scale fsrv/faucet --replicas=1)"))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionReconciling)).To(BeNil())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
			g.Expect(got.Status.Replicas).To(BeZero())
			g.Expect(got.Status.Selector).To(Equal("app.kubernetes.io/instance=faucet,app.kubernetes.io/name=faucet-server"))
		}).Should(Succeed())

		By("reading the scale subresource as kubectl scale does")
		fs := getFaucetServer(Default, ns)
		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(suiteCtx, fs, scale)).To(Succeed())
		Expect(scale.Spec.Replicas).To(BeZero())
		Expect(scale.Status.Selector).To(Equal(fs.Status.Selector))

		By("scaling to 1 through the scale subresource")
		scale.Spec.Replicas = 1
		Expect(k8sClient.SubResource("scale").Update(suiteCtx, fs, client.WithSubResourceBody(scale))).To(Succeed())
		Expect(getFaucetServer(Default, ns).Spec.Replicas).To(HaveValue(Equal(int32(1))))
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(1))))
		}).Should(Succeed())
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
			g.Expect(got.Status.Replicas).To(Equal(int32(1)))
		}).Should(Succeed())

		By("refusing 2 replicas with the embedded store, and -1")
		for _, n := range []int32{2, -1} {
			fs := getFaucetServer(Default, ns)
			fs.Spec.Replicas = ptr.To(n)
			Expect(k8sClient.Update(suiteCtx, fs)).To(MatchError(ContainSubstring("spec.replicas")), "replicas %d", n)
			scale := &autoscalingv1.Scale{}
			Expect(k8sClient.SubResource("scale").Get(suiteCtx, fs, scale)).To(Succeed())
			scale.Spec.Replicas = n
			Expect(k8sClient.SubResource("scale").Update(suiteCtx, fs, client.WithSubResourceBody(scale))).NotTo(Succeed(), "replicas %d through scale", n)
		}
		Expect(getFaucetServer(Default, ns).Spec.Replicas).To(HaveValue(Equal(int32(1))))

		By("reporting the scale-down as in progress until the pod is gone")
		fs = getFaucetServer(Default, ns)
		fs.Spec.Replicas = ptr.To(int32(0))
		Expect(k8sClient.Update(suiteCtx, fs)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(0))))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			expectCondition(g, got, faucetv1alpha1.ConditionReconciling, metav1.ConditionTrue, faucetv1alpha1.ReasonProgressing)
		}).Should(Succeed())
		setDeploymentReplicas(ns, 0, 0)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonStopped)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionReconciling)).To(BeNil())
		}).Should(Succeed())
	})
})
