package controllers

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The suite's FundingMonitor reads every 500 ms with two workers and a 1s
// bound per node call (see suite_test.go).
var _ = Describe("Funding", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "funding-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name
	})

	It("reports per-key balances and drips left, and turns Funded False reason Low when drained", func() {
		keys := newKeys(2)
		dn, url := startDevnode(map[stacks.Address]uint64{
			keys[0].TestnetAddress(): 10*cost + 5,
			keys[1].TestnetAddress(): 3 * cost,
		})
		createKeySecret(ns, keys)
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.URL = url
			fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(10))}
		})

		By("reading each key's balance from the node")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			f := got.Status.Funding
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Keys).To(Equal([]faucetv1alpha1.KeyFunding{
				{Address: keys[0].TestnetAddress().String(), BalanceUSTX: int64(10*cost + 5), DripsLeft: 10},
				{Address: keys[1].TestnetAddress().String(), BalanceUSTX: int64(3 * cost), DripsLeft: 3},
			}))
			g.Expect(f.TotalUSTX).To(Equal(int64(13*cost + 5)))
			g.Expect(f.DripsLeft).To(Equal(int64(13)))
			g.Expect(f.BalanceSTX).To(Equal("6500.01"))
			g.Expect(f.LastChecked).NotTo(BeNil())
			g.Expect(f.Runway).To(BeNil(), "nothing spent yet")
			expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionTrue, faucetv1alpha1.ReasonFunded)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeNormal, faucetv1alpha1.ReasonFunded)

		By("draining key 1 below the threshold on the node")
		transfer(dn, url, keys[0], 5*cost, 0)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			f := got.Status.Funding
			g.Expect(f.Keys[0].DripsLeft).To(Equal(int64(4)))
			g.Expect(f.DripsLeft).To(Equal(int64(7)))
			g.Expect(f.Runway).NotTo(BeNil(), "the balance went down")
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonLow)
			g.Expect(c.Message).To(ContainSubstring("below the low threshold of 10"))
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonLow)

		By("emptying both keys")
		transfer(dn, url, keys[0], 4*cost, 1)
		transfer(dn, url, keys[1], 3*cost-2000, 0)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(got.Status.Funding.DripsLeft).To(BeZero())
			expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonEmpty)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonEmpty)

		By("keeping Ready independent of Funded")
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
		}).Should(Succeed())
		expectNoSecretText(ns, keys[0].Hex())
		expectNoSecretText(ns, keys[1].Hex())
	})

	It("reports NodeUnreachable while the node is down, keeping the last balances", func() {
		keys := newKeys(1)
		dn, url := startDevnode(map[stacks.Address]uint64{keys[0].TestnetAddress(): 200 * cost})
		createKeySecret(ns, keys)
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = url })
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionFunded, metav1.ConditionTrue, faucetv1alpha1.ReasonFunded)
		}).Should(Succeed())

		dn.SetDown(true)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionUnknown, faucetv1alpha1.ReasonNodeUnreachable)
			g.Expect(c.Message).To(ContainSubstring(url))
			g.Expect(got.Status.Funding).NotTo(BeNil())
			g.Expect(got.Status.Funding.DripsLeft).To(Equal(int64(200)), "the last read stands")
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonNodeUnreachable)

		dn.SetDown(false)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionFunded, metav1.ConditionTrue, faucetv1alpha1.ReasonFunded)
		}).Should(Succeed())
	})

	It("does not let a slow or down node delay reconciling another FaucetServer", func() {
		slow, slowURL := startDevnode(nil)
		slow.SetLatency(time.Hour) // every call runs into the 1s call bound
		down, downURL := startDevnode(nil)
		down.SetDown(true)
		createKeySecret(ns, newKeys(1))
		// More FaucetServers on the slow node than the monitor has
		// workers: all of them are busy waiting on it.
		for i := range 4 {
			fs := newFaucetServer(ns)
			fs.Name = fmt.Sprintf("slow-%d", i)
			fs.Spec.Node.URL = slowURL
			Expect(k8sClient.Create(suiteCtx, fs)).To(Succeed())
		}
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = downURL })
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionUnknown, faucetv1alpha1.ReasonNodeUnreachable)
		}).Should(Succeed())

		By("changing the spec of the FaucetServer on the down node while the workers wait on the slow one")
		for range 3 {
			fs := getFaucetServer(Default, ns)
			patch := client.MergeFrom(fs.DeepCopy())
			fs.Spec.Memo = ptr.To(fmt.Sprintf("m%d", time.Now().UnixNano()%1000))
			start := time.Now()
			Expect(k8sClient.Patch(suiteCtx, fs, patch)).To(Succeed())
			Eventually(func(g Gomega) {
				got := getFaucetServer(g, ns)
				g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			}).WithTimeout(2 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
			GinkgoWriter.Printf("observedGeneration caught up in %s\n", time.Since(start))
		}

		By("reporting the slow node as unreachable once its calls time out")
		Eventually(func(g Gomega) {
			got := &faucetv1alpha1.FaucetServer{}
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "slow-0"}, got)).To(Succeed())
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionUnknown, faucetv1alpha1.ReasonNodeUnreachable)
			g.Expect(c.Message).To(ContainSubstring("deadline"))
		}).Should(Succeed())
	})

	It("reads the treasury's balance, mounts its key and forgets a deleted FaucetServer", func() {
		keys, holder := newKeys(1), newKeys(1)[0]
		_, url := startDevnode(map[stacks.Address]uint64{
			keys[0].TestnetAddress(): 200 * cost,
			holder.TestnetAddress():  7_000_000,
		})
		createKeySecret(ns, keys)
		fs := createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.URL = url
			fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{
				KeySecretRef:     faucetv1alpha1.TreasuryKeyReference{Name: "holder"},
				RefillBelowUSTX:  ptr.To(int64(1_000_000)),
				RefillAmountUSTX: ptr.To(int64(2_000_000)),
			}
		})

		By("stalling until the treasury Secret exists")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonTreasurySecretNotFound)
			g.Expect(got.Status.Funding).To(BeNil())
		}).Should(Succeed())

		By("mounting the holder key and reporting its balance once it does")
		createSecret(ns, "holder", map[string]string{"keys": holder.Hex()})
		d := eventuallyDeployment(ns)
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
			"--treasury-key-file=/etc/faucet/treasury/keys", "--refill-below=1000000", "--refill-amount=2000000"))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(
			HaveField("Name", "treasury"), HaveField("Secret.SecretName", "holder"))))
		Eventually(func(g Gomega) {
			f := getFaucetServer(g, ns).Status.Funding
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Treasury).To(Equal(&faucetv1alpha1.AccountFunding{Address: holder.TestnetAddress().String(), BalanceUSTX: 7_000_000}))
		}).Should(Succeed())
		expectNoSecretText(ns, holder.Hex())

		By("forgetting the FaucetServer once deleted")
		k := client.ObjectKeyFromObject(fs)
		Expect(fundingMonitor.Tracking(k)).To(BeTrue())
		Expect(k8sClient.Delete(suiteCtx, getFaucetServer(Default, ns))).To(Succeed())
		Eventually(func() bool { return fundingMonitor.Tracking(k) }).Should(BeFalse())
	})

	It("rejects a treasury Secret with more than one key", func() {
		createKeySecret(ns, newKeys(1))
		both := newKeys(2)
		createSecret(ns, "holder", map[string]string{"keys": hexKeys(both)})
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{KeySecretRef: faucetv1alpha1.TreasuryKeyReference{Name: "holder"}}
		})
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidTreasuryKey)
			g.Expect(c.Message).To(ContainSubstring("exactly one"))
		}).Should(Succeed())
		expectNoSecretText(ns, both[0].Hex())
		var events eventsv1.EventList
		Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(meta.FindStatusCondition(getFaucetServer(Default, ns).Status.Conditions, faucetv1alpha1.ConditionFunded)).To(BeNil())
	})
})

// startDevnode serves a simulated node with these balances until the spec
// ends.
func startDevnode(genesis map[stacks.Address]uint64) (*devnode.Node, string) {
	GinkgoHelper()
	dn := devnode.New(devnode.Config{Genesis: genesis})
	srv := httptest.NewServer(dn.Handler())
	DeferCleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return dn, srv.URL
}

// transfer moves amount µSTX off key through the node's RPC (fee 180) and
// mines it.
func transfer(dn *devnode.Node, url string, key *stacks.PrivateKey, amount, nonce uint64) {
	GinkgoHelper()
	sink := newKeys(1)[0].TestnetAddress()
	tx, err := stacks.NewTokenTransfer(stacks.TransferParams{
		Recipient: stacks.Principal{Address: sink}, Amount: amount, Nonce: nonce, Fee: 180,
	}, key)
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.Post(url+"/v2/transactions", "application/octet-stream", bytes.NewReader(tx.Serialize()))
	Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	dn.Mine()
	bal, _ := dn.Account(sink)
	Expect(bal).To(Equal(amount))
}
