package controllers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/stacks"
)

const fsName = "faucet"

var _ = Describe("FaucetServer controller", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fsrv-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name // envtest has no namespace controller to delete it; names never repeat
	})

	It("creates the ServiceAccount, Deployment and Service, owned by the FaucetServer", func() {
		keys := newKeys(1)
		createKeySecret(ns, keys)
		fs := createFaucetServer(ns, nil)

		By("applying a Deployment that runs `faucet serve` with the spec and the defaults the CRD filled in")
		d := eventuallyDeployment(ns)
		Expect(*d.Spec.Replicas).To(Equal(int32(1)))
		Expect(d.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType))
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Image).To(Equal(testImage))
		Expect(c.Args).To(ContainElements(
			"serve", "--node-url=http://stacks-node.stacks.svc:20443", "--key-file=/etc/faucet/keys/keys",
			"--amount=500000000", "--stacking-padding-percent=20",
			"--fee-min=180", "--fee-max=100000", "--fee-fallback=1000",
			"--limit-address=5/5m0s", "--limit-stacking=1/48h0m0s", "--limit-ip=30/5m0s",
		))
		Expect(c.Args).NotTo(ContainElement("--suspend"))
		Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(d.Spec.Template.Spec.Volumes[0].Secret.SecretName).To(Equal("faucet-keys"))
		Expect(d.Spec.Template.Annotations).To(HaveKey(ConfigHashAnnotation))
		expectOwnedBy(d, fs)

		By("applying the ServiceAccount and the Service")
		sa := &corev1.ServiceAccount{}
		Expect(k8sClient.Get(suiteCtx, key(ns), sa)).To(Succeed())
		Expect(sa.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		expectOwnedBy(sa, fs)
		svc := &corev1.Service{}
		Expect(k8sClient.Get(suiteCtx, key(ns), svc)).To(Succeed())
		Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Expect(svc.Spec.Ports).To(HaveLen(1))
		Expect(svc.Spec.Ports[0].Port).To(Equal(int32(3999)))
		Expect(svc.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
		expectOwnedBy(svc, fs)

		By("reporting the rollout, the URL and the faucet address, with no finalizer")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			expectCondition(g, got, faucetv1alpha1.ConditionReconciling, metav1.ConditionTrue, faucetv1alpha1.ReasonProgressing)
			g.Expect(got.Status.URL).To(Equal(fmt.Sprintf("http://faucet.%s.svc:3999", ns)))
			g.Expect(got.Status.FaucetAddresses).To(Equal(addresses(keys)))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Finalizers).To(BeEmpty())
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeNormal, faucetv1alpha1.ReasonProgressing)
	})

	It("follows the Deployment's availability in Ready", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		eventuallyDeployment(ns)

		By("the pod becoming available")
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionReconciling)).To(BeNil())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
			g.Expect(got.Status.ReadyReplicas).To(Equal(int32(1)))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeNormal, faucetv1alpha1.ReasonAvailable)

		By("reconciling with nothing changed: no status write, no event")
		rv := getFaucetServer(Default, ns).ResourceVersion
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-keys"}, secret)).To(Succeed())
		secret.Labels = map[string]string{"touched": "true"} // the Secret watch requeues the FaucetServer
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getFaucetServer(g, ns).ResourceVersion).To(Equal(rv))
		}, 2*time.Second).Should(Succeed())
		var events eventsv1.EventList
		Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).To(ContainElement(And(HaveField("Reason", faucetv1alpha1.ReasonAvailable), HaveField("Series", BeNil()))))
		Expect(events.Items).To(HaveEach(HaveField("Series", BeNil())), "an event was repeated")

		By("the pod becoming unready")
		setDeploymentStatus(ns, false)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonDeploymentUnavailable)
			expectCondition(g, got, faucetv1alpha1.ConditionReconciling, metav1.ConditionTrue, faucetv1alpha1.ReasonDeploymentUnavailable)
			g.Expect(got.Status.ReadyReplicas).To(BeZero())
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonDeploymentUnavailable)
	})

	It("reports a missing key Secret, then recovers when it is created", func() {
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonKeySecretNotFound)
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonKeySecretNotFound)
			g.Expect(got.Status.FaucetAddresses).To(BeEmpty())
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonKeySecretNotFound)
		err := k8sClient.Get(suiteCtx, key(ns), &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Deployment without keys, got %v", err)

		By("creating the Secret, which the Secret watch reports: no polling")
		keys := newKeys(2)
		createKeySecret(ns, keys)
		eventuallyDeployment(ns)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
			g.Expect(got.Status.FaucetAddresses).To(Equal(addresses(keys)))
		}).Should(Succeed())
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
		}).Should(Succeed())
	})

	It("reports unparsable keys by position only", func() {
		good := newKeys(1)[0]
		bad := strings.Repeat("ab", 32) + "02" // 33 bytes without the 01 marker
		createKeySecretData(ns, "keys", good.Hex()+"\n"+bad)
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidKeys)
			g.Expect(c.Message).To(ContainSubstring("key #2"))
			g.Expect(c.Message).NotTo(ContainSubstring("abab"))
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidKeys)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonInvalidKeys)
	})

	It("reports a Secret without the data key as invalid keys", func() {
		createKeySecretData(ns, "other", newKeys(1)[0].Hex())
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidKeys)
			g.Expect(c.Message).To(ContainSubstring(`no data key "keys"`))
		}).Should(Succeed())
	})

	It("lists the address of every key in a multi-key Secret", func() {
		k := newKeys(3)
		uncompressed, err := stacks.ParsePrivateKey(k[2].Hex()[:64]) // same secret, other address
		Expect(err).NotTo(HaveOccurred())
		createKeySecretData(ns, "keys", fmt.Sprintf("# faucet keys\n%s,%s\n\n%s\n%s\n", k[0].Hex(), k[1].Hex(), k[2].Hex(), uncompressed.Hex()))
		createFaucetServer(ns, nil)
		want := addresses([]*stacks.PrivateKey{k[0], k[1], k[2], uncompressed})
		Eventually(func(g Gomega) {
			g.Expect(getFaucetServer(g, ns).Status.FaucetAddresses).To(Equal(want))
		}).Should(Succeed())
	})

	It("rolls the pod when the keys are rotated", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		before := eventuallyDeployment(ns).Spec.Template.Annotations[ConfigHashAnnotation]

		rotated := newKeys(2)
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-keys"}, secret)).To(Succeed())
		secret.Data = map[string][]byte{"keys": []byte(hexKeys(rotated))}
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())

		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(before))
			g.Expect(getFaucetServer(g, ns).Status.FaucetAddresses).To(Equal(addresses(rotated)))
		}).Should(Succeed())
	})

	It("updates the Deployment when the spec changes, and undoes drift", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		before := eventuallyDeployment(ns)

		fs := getFaucetServer(Default, ns)
		fs.Spec.Amounts.Default = ptr.To(int64(1_000_000))
		fs.Spec.Memo = ptr.To("hackathon")
		fs.Spec.Service.Port = ptr.To(int32(80))
		fs.Spec.NodeSelector = map[string]string{"pool": "faucets"}
		Expect(k8sClient.Update(suiteCtx, fs)).To(Succeed())

		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			args := d.Spec.Template.Spec.Containers[0].Args
			g.Expect(args).To(ContainElements("--amount=1000000", "--memo=hackathon"))
			g.Expect(args).NotTo(ContainElement("--amount=500000000"))
			g.Expect(d.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("pool", "faucets"))
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(before.Spec.Template.Annotations[ConfigHashAnnotation]))
			got := getFaucetServer(g, ns)
			g.Expect(got.Status.URL).To(HaveSuffix(".svc:80"))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())

		By("someone scaling the Deployment up: one writer per key, so back to 1")
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(int32(3))
		Expect(k8sClient.Patch(suiteCtx, d, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
		}).Should(Succeed())
	})

	It("refuses to take over an object of the same name that it does not control", func() {
		// E.g. a FaucetServer named like the Stacks node's own Service.
		theirs := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fsName},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "stacks-node"},
				Ports:    []corev1.ServicePort{{Name: "rpc", Port: 20443}},
			},
		}
		Expect(k8sClient.Create(suiteCtx, theirs)).To(Succeed())
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonReconcileFailed)
			g.Expect(c.Message).To(ContainSubstring(`Service "faucet" already exists and is not controlled by this FaucetServer`))
		}).Should(Succeed())
		svc := &corev1.Service{}
		Expect(k8sClient.Get(suiteCtx, key(ns), svc)).To(Succeed())
		Expect(svc.ResourceVersion).To(Equal(theirs.ResourceVersion), "the foreign Service was modified")
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns), &appsv1.Deployment{}))).To(BeTrue())

		By("retrying once the name is free")
		Expect(k8sClient.Delete(suiteCtx, theirs)).To(Succeed())
		d := eventuallyDeployment(ns)
		Expect(k8sClient.Get(suiteCtx, key(ns), svc)).To(Succeed())
		expectOwnedBy(svc, getFaucetServer(Default, ns))
		expectOwnedBy(d, getFaucetServer(Default, ns))
	})

	It("suspends the faucet and stays Ready with reason Suspended", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Suspend = true })
		Expect(eventuallyDeployment(ns).Spec.Template.Spec.Containers[0].Args).To(ContainElement("--suspend"))
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonSuspended)
			g.Expect(c.Message).To(ContainSubstring("403"))
		}).Should(Succeed())

		By("resuming")
		fs := getFaucetServer(Default, ns)
		fs.Spec.Suspend = false
		Expect(k8sClient.Update(suiteCtx, fs)).To(Succeed())
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--suspend"))
		}).Should(Succeed())
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
		}).Should(Succeed())
	})

	It("never puts key material in status, events or children", func() {
		good := newKeys(2)
		createKeySecret(ns, good)
		createFaucetServer(ns, nil)
		eventuallyDeployment(ns)
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
		}).Should(Succeed())

		By("breaking the keys, so error paths run too")
		broken := good[1].Hex()[:63] + "g" // 64 characters, not hex
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-keys"}, secret)).To(Succeed())
		secret.Data = map[string][]byte{"keys": []byte(good[0].Hex() + "," + broken)}
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidKeys)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonInvalidKeys)

		var dumps []any
		fs := getFaucetServer(Default, ns)
		dumps = append(dumps, fs.Status)
		var events eventsv1.EventList
		Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).NotTo(BeEmpty())
		dumps = append(dumps, events.Items)
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
			Expect(k8sClient.Get(suiteCtx, key(ns), obj)).To(Succeed())
			dumps = append(dumps, obj)
		}
		for _, d := range dumps {
			raw, err := json.Marshal(d)
			Expect(err).NotTo(HaveOccurred())
			for _, secretText := range []string{good[0].Hex()[:64], good[1].Hex()[:64], broken} {
				// Any 16-character run of a key would be a leak.
				for i := 0; i+16 <= len(secretText); i += 8 {
					Expect(string(raw)).NotTo(ContainSubstring(secretText[i:i+16]), "key material in %T", d)
				}
			}
		}
	})

	DescribeTable("refuses invalid FaucetServers with readable messages",
		func(mutate func(*faucetv1alpha1.FaucetServer), message string) {
			fs := newFaucetServer(ns)
			mutate(fs)
			err := k8sClient.Create(suiteCtx, fs)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("mainnet chain id", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.ChainID = ptr.To(int64(1)) },
			"chainID 1 is Stacks mainnet; the faucet only serves test networks"),
		Entry("URL with another scheme", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = "ftp://stacks-node:20443" },
			"node.url must be an http:// or https:// URL with a host"),
		Entry("URL without a scheme", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = "stacks-node:20443" },
			"node.url must be an http:// or https:// URL with a host"),
		Entry("URL without a host", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = "http:///v2/info" },
			"node.url must be an http:// or https:// URL with a host"),
		Entry("fee.min above fee.max", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Fee = &faucetv1alpha1.Fee{Min: ptr.To(int64(2000)), Max: ptr.To(int64(1000))}
		}, "fee.min must not exceed fee.max"),
		Entry("fee.min above the default fee.max", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Fee = &faucetv1alpha1.Fee{Min: ptr.To(int64(200_000))}
		}, "fee.min must not exceed fee.max"),
		Entry("zero amount", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Amounts = &faucetv1alpha1.Amounts{Default: ptr.To(int64(0))}
		}, "amounts.default must be greater than 0"),
		Entry("negative stacking amount", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Amounts = &faucetv1alpha1.Amounts{Stacking: ptr.To(int64(-5))}
		}, "amounts.stacking must be greater than 0"),
		Entry("zero rate-limit window", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.RateLimits = &faucetv1alpha1.RateLimits{PerIP: &faucetv1alpha1.RateLimit{Requests: 10, Window: metav1.Duration{}}}
		}, "window must be a positive duration"),
		Entry("zero rate-limit count", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.RateLimits = &faucetv1alpha1.RateLimits{PerAddress: &faucetv1alpha1.RateLimit{Requests: 0, Window: metav1.Duration{Duration: time.Minute}}}
		}, "requests must be greater than 0"),
		Entry("zero node timeout", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.Timeout = &metav1.Duration{} },
			"node.timeout must be a positive duration"),
		Entry("memo over 34 bytes of UTF-8", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Memo = ptr.To(strings.Repeat("é", 20)) },
			"memo must be at most 34 bytes of UTF-8"),
		// The name is also the Service's, which must be a DNS-1035 label:
		// accepting these would leave the FaucetServer failing forever.
		Entry("name with a dot", func(fs *faucetv1alpha1.FaucetServer) { fs.Name = "faucet.testnet" },
			"metadata.name must be a DNS-1035 label"),
		Entry("name starting with a digit", func(fs *faucetv1alpha1.FaucetServer) { fs.Name = "1faucet" },
			"metadata.name must be a DNS-1035 label"),
		Entry("name over 63 characters", func(fs *faucetv1alpha1.FaucetServer) { fs.Name = "f" + strings.Repeat("a", 63) },
			"metadata.name must be a DNS-1035 label"),
	)

	It("accepts the README's every-field example", func() {
		readme, err := os.ReadFile(filepath.Join("..", "README.md"))
		Expect(err).NotTo(HaveOccurred())
		var example string
		for block := range strings.SplitSeq(string(readme), "```yaml\n") {
			if body, _, ok := strings.Cut(block, "```"); ok && strings.Contains(body, "kind: FaucetServer") && strings.Contains(body, "priorityClassName") {
				example = body
			}
		}
		Expect(example).NotTo(BeEmpty(), "no FaucetServer example with every field in README.md")
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(example), &u.Object)).To(Succeed())
		u.SetNamespace(ns)
		Expect(k8sClient.Create(suiteCtx, u, client.DryRunAll)).To(Succeed())
	})
})

func key(ns string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: fsName} }

func newKeys(n int) []*stacks.PrivateKey {
	keys := make([]*stacks.PrivateKey, n)
	for i := range keys {
		k, err := stacks.GeneratePrivateKey()
		Expect(err).NotTo(HaveOccurred())
		keys[i] = k
	}
	return keys
}

func hexKeys(keys []*stacks.PrivateKey) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.Hex()
	}
	return strings.Join(s, "\n")
}

func addresses(keys []*stacks.PrivateKey) []string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.TestnetAddress().String()
	}
	return s
}

func createKeySecret(ns string, keys []*stacks.PrivateKey) {
	createKeySecretData(ns, "keys", hexKeys(keys))
}

func createKeySecretData(ns, dataKey, data string) {
	GinkgoHelper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "faucet-keys"},
		Data:       map[string][]byte{dataKey: []byte(data)},
	}
	Expect(k8sClient.Create(suiteCtx, s)).To(Succeed())
}

func newFaucetServer(ns string) *faucetv1alpha1.FaucetServer {
	return &faucetv1alpha1.FaucetServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fsName},
		Spec: faucetv1alpha1.FaucetServerSpec{
			Node:         faucetv1alpha1.NodeSpec{URL: "http://stacks-node.stacks.svc:20443"},
			KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
		},
	}
}

func createFaucetServer(ns string, mutate func(*faucetv1alpha1.FaucetServer)) *faucetv1alpha1.FaucetServer {
	GinkgoHelper()
	fs := newFaucetServer(ns)
	if mutate != nil {
		mutate(fs)
	}
	Expect(k8sClient.Create(suiteCtx, fs)).To(Succeed())
	return fs
}

func getFaucetServer(g Gomega, ns string) *faucetv1alpha1.FaucetServer {
	fs := &faucetv1alpha1.FaucetServer{}
	g.Expect(k8sClient.Get(suiteCtx, key(ns), fs)).To(Succeed())
	return fs
}

func eventuallyDeployment(ns string) *appsv1.Deployment {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Eventually(func() error { return k8sClient.Get(suiteCtx, key(ns), d) }).Should(Succeed())
	return d
}

// setDeploymentStatus plays the Deployment controller for the current
// generation: one updated pod, available or not.
func setDeploymentStatus(ns string, available bool) {
	GinkgoHelper()
	Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(suiteCtx, key(ns), d); err != nil {
			return err
		}
		var n int32
		availableCond := corev1.ConditionFalse
		if available {
			n, availableCond = 1, corev1.ConditionTrue
		}
		now := metav1.Now()
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation,
			Replicas:           1, UpdatedReplicas: 1, ReadyReplicas: n, AvailableReplicas: n, UnavailableReplicas: 1 - n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: availableCond, Reason: "MinimumReplicas", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
			},
		}
		return k8sClient.Status().Update(suiteCtx, d)
	}).Should(Succeed())
}

func expectCondition(g Gomega, fs *faucetv1alpha1.FaucetServer, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	c := meta.FindStatusCondition(fs.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "no %s condition in %+v", typ, fs.Status.Conditions)
	g.Expect(c.Status).To(Equal(status), "%s: %s", typ, c.Message)
	g.Expect(c.Reason).To(Equal(reason), "%s: %s", typ, c.Message)
	g.Expect(c.ObservedGeneration).To(Equal(fs.Generation))
	return c
}

func expectOwnedBy(obj client.Object, fs *faucetv1alpha1.FaucetServer) {
	GinkgoHelper()
	Expect(obj.GetOwnerReferences()).To(ConsistOf(And(
		HaveField("Kind", "FaucetServer"),
		HaveField("Name", fs.Name),
		HaveField("UID", fs.UID),
		HaveField("Controller", HaveValue(BeTrue())),
	)))
}

// expectEvent waits for an events.k8s.io event on the FaucetServer; events
// are sent asynchronously.
func expectEvent(ns, eventType, reason string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(ContainElement(And(
			HaveField("Regarding.Kind", "FaucetServer"),
			HaveField("Regarding.Name", fsName),
			HaveField("Type", eventType),
			HaveField("Reason", reason),
		)))
	}).Should(Succeed())
}
