package controllers

import (
	"net/http/httptest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// spec.node.headersSecretRef against a real API server, with the suite's
// FundingMonitor reading from a node that wants an API key.
var _ = Describe("Node headers", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fsrv-headers-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name
	})

	It("defaults the data key and refuses one that is not a file name", func() {
		fs := newFaucetServer(ns)
		withNodeHeaders("hiro-api", "")(fs)
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		Expect(fs.Spec.Node.HeadersSecretRef.Key).To(Equal(faucetv1alpha1.DefaultNodeHeadersSecretKey))

		for _, ref := range []faucetv1alpha1.NodeHeadersSecretReference{{Name: "hiro-api", Key: ".."}, {Key: "headers"}} {
			fs := newFaucetServer(ns)
			fs.Spec.Node.HeadersSecretRef = &ref
			err := k8sClient.Create(suiteCtx, fs, client.DryRunAll)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%+v: want Invalid, got %v", ref, err)
			Expect(err.Error()).To(ContainSubstring("spec.node.headersSecretRef"))
		}
	})

	It("stalls on a missing or bad headers Secret without quoting it, then mounts it, reads the balances with it and rolls the pods when it changes", func() {
		keys := newKeys(1)
		gw := &keyedNode{next: devnode.New(devnode.Config{Genesis: map[stacks.Address]uint64{keys[0].TestnetAddress(): 200 * cost}}).Handler()}
		srv := httptest.NewServer(gw)
		DeferCleanup(func() { srv.CloseClientConnections(); srv.Close() })
		createKeySecret(ns, keys)
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.URL = srv.URL
			withNodeHeaders("hiro-api", "")(fs)
		})

		By("a headers Secret that does not exist yet stalls")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			s := expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonNodeHeadersSecretNotFound)
			g.Expect(s.Message).To(ContainSubstring(`node headers Secret "hiro-api" not found`))
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonNodeHeadersSecretNotFound)
		}).Should(Succeed())
		Expect(k8sClient.Get(suiteCtx, key(ns), &appsv1.Deployment{})).To(Satisfy(apierrors.IsNotFound), "no pod without its headers")

		By("a line that is no header stalls, naming the line but not the value")
		const badValue = "x-api-key " + testAPIKey + "-bad"
		createSecret(ns, "hiro-api", map[string]string{"headers": badValue})
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			s := expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidNodeHeaders)
			g.Expect(s.Message).To(ContainSubstring(`node headers Secret "hiro-api", data key "headers": line 1: want "Name: value"`))
			r := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidNodeHeaders)
			g.Expect(r.Message).NotTo(ContainSubstring(testAPIKey))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonInvalidNodeHeaders)
		expectNoSecretText(ns, testAPIKey)

		By("good headers: the pod gets them as a file, and the operator reads the balances through the gateway with them")
		updateSecret(ns, "hiro-api", map[string]string{"headers": "x-api-key: " + testAPIKey + "\n"})
		d := &appsv1.Deployment{}
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
			g.Expect(got.Status.Funding).NotTo(BeNil())
			g.Expect(got.Status.Funding.DripsLeft).To(Equal(int64(200)))
			expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionTrue, faucetv1alpha1.ReasonFunded)
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
		}).Should(Succeed())
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(ContainElement("--node-headers-file=/etc/faucet/node-headers/headers"))
		Expect(c.VolumeMounts).To(ContainElement(And(
			HaveField("Name", "node-headers"), HaveField("MountPath", "/etc/faucet/node-headers"),
			HaveField("ReadOnly", BeTrue()), HaveField("SubPath", BeEmpty()))))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(
			HaveField("Name", "node-headers"),
			HaveField("Secret.SecretName", "hiro-api"),
			HaveField("Secret.Items", ConsistOf(corev1.KeyToPath{Key: "headers", Path: "headers"})),
		)))
		Expect(c.Env).To(BeEmpty())
		Expect(gw.refused.Load()).To(BeZero(), "every read of the operator carried the API key")
		before := d.Spec.Template.Annotations[ConfigHashAnnotation]

		By("a new API key rolls the pods: they read the file at start")
		const rotated = testAPIKey + "-rotated"
		updateSecret(ns, "hiro-api", map[string]string{"headers": "x-api-key: " + rotated + "\n"})
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(before))
		}).Should(Succeed())

		By("never putting the headers in the Deployment, the status or events")
		for _, text := range []string{testAPIKey, rotated, badValue} {
			expectNoSecretText(ns, text)
		}
	})
})
