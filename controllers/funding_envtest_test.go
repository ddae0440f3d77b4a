package controllers

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
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

// The suite's FundingMonitor reads every 500 ms with two workers and a 60s
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
		down, downURL := startDevnode(nil)
		down.SetDown(true)
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = downURL })
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionFunded, metav1.ConditionUnknown, faucetv1alpha1.ReasonNodeUnreachable)
		}).Should(Succeed())

		By("occupying every monitor worker with a call the slow node holds")
		slow := startHeldNode()
		// More FaucetServers on the slow node than the monitor has
		// workers: all of them wait on it, for the suite's 60s call bound.
		for i := range 4 {
			fs := newFaucetServer(ns)
			fs.Name = fmt.Sprintf("slow-%d", i)
			fs.Spec.Node.URL = slow.url
			Expect(k8sClient.Create(suiteCtx, fs)).To(Succeed())
		}
		Eventually(slow.inFlight.Load).Should(BeNumerically(">=", fundingMonitor.Workers))

		By("changing the spec of the FaucetServer on the down node while the workers wait")
		for range 3 {
			fs := getFaucetServer(Default, ns)
			patch := client.MergeFrom(fs.DeepCopy())
			fs.Spec.Memo = ptr.To(fmt.Sprintf("m%d", time.Now().UnixNano()%1000))
			start := time.Now()
			Expect(k8sClient.Patch(suiteCtx, fs, patch)).To(Succeed())
			Eventually(func(g Gomega) {
				got := getFaucetServer(g, ns)
				g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			}).Should(Succeed())
			GinkgoWriter.Printf("observedGeneration caught up in %s\n", time.Since(start))
		}
		// No held call has ended, so every reconcile above finished
		// while both workers were still waiting on the slow node: an
		// ordering, not a stopwatch.
		Expect(slow.ended.Load()).To(BeZero(), "a held call ended before the reconciles caught up")

		By("reporting the slow node as unreachable once its calls time out")
		for i := range 4 {
			fs := &faucetv1alpha1.FaucetServer{}
			Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("slow-%d", i)}, fs)).To(Succeed())
			patch := client.MergeFrom(fs.DeepCopy())
			fs.Spec.Node.Timeout = &metav1.Duration{Duration: time.Second}
			Expect(k8sClient.Patch(suiteCtx, fs, patch)).To(Succeed())
		}
		slow.hangUpAll() // frees the workers; the next reads carry the 1s bound
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

	It("reads each key's and the treasury's sBTC, and names sBTC in Funded when it runs low or out", func() {
		keys, holder := newKeys(2), newKeys(1)[0]
		dn, url := startDevnodeConfig(devnode.Config{
			Genesis: map[stacks.Address]uint64{
				keys[0].TestnetAddress(): 200 * cost,
				keys[1].TestnetAddress(): 200 * cost,
				holder.TestnetAddress():  7_000_000,
			},
			TokenAsset: testnetSBTC,
			TokenGenesis: map[stacks.Address]uint64{
				keys[0].TestnetAddress(): 8_000,
				keys[1].TestnetAddress(): 4_000,
			},
		})
		// The rest of each balance is minted after genesis, as a deployer
		// would top a key up.
		dn.FundToken(keys[1].TestnetAddress(), 500)
		dn.FundToken(holder.TestnetAddress(), 1_000_000)
		a0, a1 := keys[0].TestnetAddress().String(), keys[1].TestnetAddress().String()
		createKeySecret(ns, keys)
		createSecret(ns, "holder", map[string]string{"keys": holder.Hex()})
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.URL = url
			fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(10))}
			fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{KeySecretRef: faucetv1alpha1.TreasuryKeyReference{Name: "holder"}}
			sb := sbtcAsset(1000, nil)
			sb.Token.RefillBelow, sb.Token.RefillAmount = ptr.To(int64(20_000)), ptr.To(int64(100_000))
			withAssets(sb)(fs)
		})

		By("passing sbtc as a --token; the rate limits the API server filled in are serve's defaults")
		d := eventuallyDeployment(ns)
		Expect(getFaucetServer(Default, ns).Spec.Assets[0].RateLimits).NotTo(BeNil(), "the CRD's default")
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement(
			"--token=name=sbtc,asset=" + testnetSBTC + ",amount=1000,limit-address=5/5m0s,limit-ip=30/5m0s,refill-below=20000,refill-amount=100000"))
		Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--sbtc-")))

		By("reading each key's sBTC through the node's call-read")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			f := got.Status.Funding
			g.Expect(f).NotTo(BeNil())
			g.Expect(f.Assets).To(HaveLen(1))
			g.Expect(f.Assets[0].LastChecked).NotTo(BeNil())
			f.Assets[0].LastChecked = nil
			g.Expect(f.Assets).To(Equal([]faucetv1alpha1.AssetFunding{{
				Name: "sbtc", AssetIdentifier: testnetSBTC,
				Keys: []faucetv1alpha1.KeyTokenFunding{
					{Address: a0, Balance: 8_000, DripsLeft: 8},
					{Address: a1, Balance: 4_500, DripsLeft: 4},
				},
				Balance: ptr.To(int64(12_500)), DripsLeft: ptr.To(int64(12)), TreasuryBalance: ptr.To(int64(1_000_000)),
			}}))
			g.Expect(f.AssetsSummary).To(Equal("sbtc:12"))
			g.Expect(f.DripsLeft).To(Equal(int64(400)), "the STX figures are read as before")
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionTrue, faucetv1alpha1.ReasonFunded)
			g.Expect(c.Message).To(ContainSubstring("sbtc: 12 drips left (12500 on 2 key(s), 1000 per drip)"))
		}).Should(Succeed())

		By("turning Funded False, reason Low, naming sbtc, when its drips fall below the threshold")
		sendSBTC(dn, url, keys[0], 6_000, 0) // 8000 → 2000
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(got.Status.Funding.Assets[0].DripsLeft).To(HaveValue(Equal(int64(6))))
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonLow)
			g.Expect(c.Message).To(HavePrefix("sbtc: 6 drips left, below 10 (6500 on 2 key(s), 1000 per drip); "))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonLow)

		By("reason Empty once no key can pay one sBTC drip, though the STX is plenty")
		sendSBTC(dn, url, keys[0], 1_001, 1) // 2000 → 999
		sendSBTC(dn, url, keys[1], 3_501, 0) // 4500 → 999
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonEmpty)
			g.Expect(c.Message).To(ContainSubstring("send sbtc (" + testnetSBTC + ") to " + a0 + ", " + a1))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonEmpty)

		By("reporting the node down as NodeUnreachable, with the last sBTC figures kept")
		dn.SetDown(true)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionUnknown, faucetv1alpha1.ReasonNodeUnreachable)
			g.Expect(c.Message).To(ContainSubstring(url))
			g.Expect(got.Status.Funding.Assets[0].Balance).To(HaveValue(Equal(int64(1998))))
		}).Should(Succeed())
		dn.SetDown(false)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonEmpty)
		}).Should(Succeed())

		By("reporting a refused sbtc read as AssetUnreadable, naming sbtc: an asset whose contract the node does not have")
		// The STX reads still succeed; the node answers the token's
		// get-balance okay:false.
		const missing = "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.sbtc-token::sbtc-token"
		Eventually(func() error {
			fs := getFaucetServer(Default, ns)
			fs.Spec.Assets[0].Token.AssetIdentifier = missing
			return k8sClient.Update(suiteCtx, fs)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionUnknown, faucetv1alpha1.ReasonAssetUnreadable)
			g.Expect(c.Message).To(HavePrefix("sbtc: cannot read its balances from the node " + url + ": " + missing + " balance of " + a0))
			g.Expect(c.Message).To(ContainSubstring("NoSuchContract"))
			f := got.Status.Funding
			g.Expect(f.Assets).To(HaveLen(1))
			g.Expect(f.Assets[0].Message).To(ContainSubstring("NoSuchContract"))
			g.Expect(f.Assets[0].DripsLeft).To(BeNil(), "no figures of the new identifier yet")
			g.Expect(f.AssetsSummary).To(Equal("sbtc:?"))
			g.Expect(f.DripsLeft).To(BeNumerically(">", 390), "the STX figures are read all the same")
		}).Should(Succeed())
		expectNoSecretText(ns, keys[0].Hex())
		expectNoSecretText(ns, holder.Hex())
	})

	It("gains a third token by an edit of spec.assets alone: its --token, then its balance and drips left", func() {
		keys := newKeys(2)
		sbtc, tusd := mustAsset(testnetSBTC), mustAsset(testnetTUSD)
		const teurID = "ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.teur-token::teur"
		teur := mustAsset(teurID)
		a0, a1 := keys[0].TestnetAddress(), keys[1].TestnetAddress()
		token := func(asset stacks.AssetInfo, symbol string) devnode.TokenSpec {
			return devnode.TokenSpec{Asset: asset, Name: symbol, Symbol: symbol, Decimals: 6}
		}
		dn, url := startDevnodeConfig(devnode.Config{
			Genesis: map[stacks.Address]uint64{a0: 200 * cost, a1: 200 * cost},
			Tokens:  []devnode.TokenSpec{devnode.SBTCToken(sbtc, nil), token(tusd, "tUSD"), token(teur, "tEUR")},
		})
		for _, f := range []struct {
			asset  stacks.AssetInfo
			a0, a1 uint64
		}{{sbtc, 150_000, 50_000}, {tusd, 300, 700}, {teur, 4_000, 2_500}} {
			dn.FundAsset(f.asset, a0, f.a0)
			dn.FundAsset(f.asset, a1, f.a1)
		}
		createKeySecret(ns, keys)
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.URL = url
			withAssets(sbtcAsset(1000, nil), tokenAsset("tusd", testnetTUSD, 10, nil))(fs)
		})
		twoTokens := "--token=name=sbtc,asset=" + testnetSBTC + ",amount=1000,limit-address=5/5m0s,limit-ip=30/5m0s;" +
			"name=tusd,asset=" + testnetTUSD + ",amount=10,limit-address=5/5m0s,limit-ip=30/5m0s"
		Expect(eventuallyDeployment(ns).Spec.Template.Spec.Containers[0].Args).To(ContainElement(twoTokens))
		Eventually(func(g Gomega) {
			st := getFaucetServer(g, ns).Status
			g.Expect(st.Funding).NotTo(BeNil())
			g.Expect(st.Funding.AssetsSummary).To(Equal("sbtc:200 tusd:100"))
			g.Expect(st.NodesSummary).To(Equal("1/1"), "the NODES column")
			g.Expect(st.Nodes).To(ConsistOf(And(HaveField("URL", url), HaveField("Reachable", true),
				HaveField("TipHeight", HaveValue(BeNumerically(">=", 0))), HaveField("LagBlocks", HaveValue(BeZero())))))
		}).Should(Succeed())

		By("adding tEUR to spec.assets, and nothing else")
		Eventually(func() error {
			fs := getFaucetServer(Default, ns)
			teurEntry := tokenAsset("teur", teurID, 500, &faucetv1alpha1.AssetRateLimits{
				PerAddress: &faucetv1alpha1.RateLimit{Requests: 1, Window: metav1.Duration{Duration: time.Hour}},
			})
			teurEntry.LowThreshold = ptr.To(int64(20))
			fs.Spec.Assets = append(fs.Spec.Assets, teurEntry)
			return k8sClient.Update(suiteCtx, fs)
		}).Should(Succeed())

		By("passing its --token to the pod, after the other two")
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement(twoTokens +
				";name=teur,asset=" + teurID + ",amount=500,limit-address=1/1h0m0s,limit-ip=30/5m0s,low-drips=20"))
		}).Should(Succeed())

		By("reading its balances: status.funding.assets and the ASSETS column list all three, in spec order")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			f := got.Status.Funding
			g.Expect(f.Assets).To(HaveLen(3))
			g.Expect([]string{f.Assets[0].Name, f.Assets[1].Name, f.Assets[2].Name}).To(Equal([]string{"sbtc", "tusd", "teur"}))
			e := f.Assets[2]
			g.Expect(e.AssetIdentifier).To(Equal(teurID))
			g.Expect(e.Keys).To(Equal([]faucetv1alpha1.KeyTokenFunding{
				{Address: a0.String(), Balance: 4_000, DripsLeft: 8},
				{Address: a1.String(), Balance: 2_500, DripsLeft: 5},
			}))
			g.Expect(e.Balance).To(HaveValue(Equal(int64(6_500))))
			g.Expect(e.DripsLeft).To(HaveValue(Equal(int64(13))))
			g.Expect(e.LastChecked).NotTo(BeNil())
			g.Expect(e.Message).To(BeEmpty())
			g.Expect(f.AssetsSummary).To(Equal("sbtc:200 tusd:100 teur:13"))
			By("judging it against its own threshold: 13 drips, below 20")
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonLow)
			g.Expect(c.Message).To(HavePrefix("teur: 13 drips left, below 20 (6500 on 2 key(s), 500 per drip); "))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonLow)
	})

	It("stalls on a token identifier with a bad checksum, leaving the pod alone, and resumes once fixed", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		eventuallyDeployment(ns)

		By("editing in an address with a typo, which the CRD's pattern cannot catch")
		typo := strings.Replace(testnetSBTC, "J8F1.", "J8F2.", 1)
		Eventually(func() error {
			fs := getFaucetServer(Default, ns)
			withAssets(sbtcAsset(1000, nil), tokenAsset("tusd", testnetTUSD, 10, nil))(fs)
			fs.Spec.Assets[0].Token.AssetIdentifier = typo
			return k8sClient.Update(suiteCtx, fs)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidAsset)
			g.Expect(c.Message).To(ContainSubstring("spec.assets[name=sbtc].token.assetIdentifier: bad asset identifier"))
			g.Expect(c.Message).To(ContainSubstring("bad checksum"))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())
		Expect(eventuallyDeployment(ns).Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--token")),
			"the running pod keeps what it started with")
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonInvalidAsset)

		By("fixing it")
		Eventually(func() error {
			fs := getFaucetServer(Default, ns)
			fs.Spec.Assets[0].Token.AssetIdentifier = testnetSBTC
			return k8sClient.Update(suiteCtx, fs)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement(
				"--token=name=sbtc,asset=" + testnetSBTC + ",amount=1000,limit-address=5/5m0s,limit-ip=30/5m0s;" +
					"name=tusd,asset=" + testnetTUSD + ",amount=10,limit-address=5/5m0s,limit-ip=30/5m0s"))
		}).Should(Succeed())
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
// heldNode is a node that answers nothing: it holds every request until
// the client gives up or the test hangs up on it, counting the requests
// it holds and those that ended.
type heldNode struct {
	url             string
	inFlight, ended atomic.Int64
	mu              sync.Mutex
	hangUp          chan struct{}
}

// startHeldNode serves a heldNode until the spec ends.
func startHeldNode() *heldNode {
	h := &heldNode{hangUp: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		hangUp := h.hangUp
		h.mu.Unlock()
		h.inFlight.Add(1)
		defer h.inFlight.Add(-1)
		defer h.ended.Add(1)
		select {
		case <-r.Context().Done():
		case <-hangUp:
			panic(http.ErrAbortHandler) // drop the connection, no answer
		}
	}))
	DeferCleanup(func() {
		h.hangUpAll()
		srv.CloseClientConnections()
		srv.Close()
	})
	h.url = srv.URL
	return h
}

// hangUpAll drops every request held now.
func (h *heldNode) hangUpAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.hangUp)
	h.hangUp = make(chan struct{})
}

func startDevnode(genesis map[stacks.Address]uint64) (*devnode.Node, string) {
	GinkgoHelper()
	return startDevnodeConfig(devnode.Config{Genesis: genesis})
}

// startDevnodeConfig serves a simulated node configured so until the spec
// ends.
func startDevnodeConfig(cfg devnode.Config) (*devnode.Node, string) {
	GinkgoHelper()
	dn := devnode.New(cfg)
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
	submit(url, tx)
	dn.Mine()
	bal, _ := dn.Account(sink)
	Expect(bal).To(Equal(amount))
}

// sbtcTransferFee pays for a SIP-010 transfer: the mempool wants at least
// 1 µSTX per byte, and the call with its post-condition is a few hundred.
const sbtcTransferFee = 1000

// sendSBTC moves amount testnet sBTC off key with a SIP-010 transfer signed
// by key, submitted through the node's RPC and mined, so the token ledger
// the monitor reads really goes down. nonce is key's next, which the caller
// tracks as for transfer.
func sendSBTC(dn *devnode.Node, url string, key *stacks.PrivateKey, amount, nonce uint64) {
	GinkgoHelper()
	asset, err := stacks.ParseAssetID(testnetSBTC)
	Expect(err).NotTo(HaveOccurred())
	sink := stacks.Principal{Address: newKeys(1)[0].TestnetAddress()}
	tx, err := stacks.NewSIP010Transfer(stacks.SIP010TransferParams{
		Asset: asset, Recipient: sink, Amount: amount, Nonce: nonce, Fee: sbtcTransferFee,
	}, key)
	Expect(err).NotTo(HaveOccurred())
	submit(url, tx)
	dn.Mine()
	// A transfer the contract refused would still be mined, as (err uN).
	result, _ := dn.TxResult(tx.TxID())
	Expect(result).To(Equal("(ok true)"))
	Expect(dn.TokenBalance(sink)).To(Equal(amount))
}

// mustAsset parses an asset identifier of a spec.
func mustAsset(id string) stacks.AssetInfo {
	GinkgoHelper()
	a, err := stacks.ParseAssetID(id)
	Expect(err).NotTo(HaveOccurred())
	return a
}

// submit posts a signed tx to the node, which must admit it.
func submit(url string, tx *stacks.Transaction) {
	GinkgoHelper()
	resp, err := http.Post(url+"/v2/transactions", "application/octet-stream", bytes.NewReader(tx.Serialize()))
	Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
}
