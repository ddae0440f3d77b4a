package controllers

import (
	"context"
	"time"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/btcnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

const btcPerCoin = 100_000_000 // sats

var _ = Describe("BTC", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "btc-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name
	})

	DescribeTable("refuses an invalid btc entry of spec.assets with readable messages",
		func(mutate func(*faucetv1alpha1.AssetSpec), message string) {
			fs := newFaucetServer(ns)
			a := btcAsset(btcSpec(false))
			mutate(&a)
			fs.Spec.Assets = faucetv1alpha1.AssetList{a}
			err := k8sClient.Create(suiteCtx, fs, client.DryRunAll)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("mainnet", func(a *faucetv1alpha1.AssetSpec) { a.BTC.Network = "mainnet" },
			"the btc entry of spec.assets: network must be regtest, signet or testnet: the faucet pays test-network BTC only, never mainnet"),
		Entry("testnet4", func(a *faucetv1alpha1.AssetSpec) { a.BTC.Network = "testnet4" },
			"the btc entry of spec.assets: network must be regtest, signet or testnet"),
		Entry("a URL with a user and password", func(a *faucetv1alpha1.AssetSpec) { a.BTC.RPC.URL = "http://faucet:hunter2@bitcoind:18443" },
			"the btc entry of spec.assets: rpc.url must not carry a user or password: put them in a Secret and name it in btc.rpc.credentialsSecretRef"),
		Entry("a URL with a user only", func(a *faucetv1alpha1.AssetSpec) { a.BTC.RPC.URL = "https://faucet@bitcoind:18443/wallet/x" },
			"the btc entry of spec.assets: rpc.url must not carry a user or password"),
		Entry("a URL with another scheme", func(a *faucetv1alpha1.AssetSpec) { a.BTC.RPC.URL = "tcp://bitcoind:18443" },
			"the btc entry of spec.assets: rpc.url must be an http:// or https:// URL with a host"),
		Entry("a URL without a host", func(a *faucetv1alpha1.AssetSpec) { a.BTC.RPC.URL = "http:///" },
			"the btc entry of spec.assets: rpc.url must be an http:// or https:// URL with a host"),
		Entry("a URL with a query", func(a *faucetv1alpha1.AssetSpec) { a.BTC.RPC.URL = "http://bitcoind:18443/?wallet=x" },
			"the btc entry of spec.assets: rpc.url must not have a query or a fragment"),
		Entry("url and urls", func(a *faucetv1alpha1.AssetSpec) { a.BTC.RPC.URLs = []string{"http://bitcoind-2:18443"} },
			"the btc entry of spec.assets: set rpc.url (one node) or rpc.urls (several nodes of one chain), not both"),
		Entry("neither url nor urls", func(a *faucetv1alpha1.AssetSpec) { a.BTC.RPC.URL = "" },
			"the btc entry of spec.assets: set rpc.url (one node) or rpc.urls (several nodes of one chain), not both"),
		Entry("urls with a password", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.RPC.URL, a.BTC.RPC.URLs = "", []string{"http://bitcoind-1:18443", "http://u:hunter2@bitcoind-2:18443"}
		}, "the btc entry of spec.assets: rpc.urls must carry no user or password"),
		Entry("urls with a comma", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.RPC.URL, a.BTC.RPC.URLs = "", []string{"http://bitcoind-1:18443,http://bitcoind-2:18443"}
		}, "the btc entry of spec.assets: rpc.urls must each be an http:// or https:// URL with a host (and no comma)"),
		Entry("no key Secret", func(a *faucetv1alpha1.AssetSpec) { a.BTC.KeySecretRef.Name = "" },
			"spec.assets[0].btc.keySecretRef.name"),
		Entry("a key that is no file name", func(a *faucetv1alpha1.AssetSpec) { a.BTC.KeySecretRef.Key = ".." },
			"the btc entry of spec.assets: keySecretRef.key must be a file name"),
		Entry("a default drip below dust", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.Amounts = &faucetv1alpha1.BTCAmounts{Default: ptr.To(int64(545))}
		}, "the btc entry of spec.assets: amounts.default must be at least 546 sats: smaller outputs are dust, which nodes do not relay"),
		Entry("a zero large drip", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.Amounts = &faucetv1alpha1.BTCAmounts{Large: ptr.To(int64(0))}
		}, "the btc entry of spec.assets: amounts.large must be at least 546 sats"),
		Entry("a negative xlarge drip", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.Amounts = &faucetv1alpha1.BTCAmounts{XLarge: ptr.To(int64(-1))}
		}, "the btc entry of spec.assets: amounts.xlarge must be at least 546 sats"),
		Entry("a default drip above the default large one", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.Amounts = &faucetv1alpha1.BTCAmounts{Default: ptr.To(int64(2_000_000))}
		}, "the btc entry of spec.assets: amounts.large (default 1000000) must be at least amounts.default"),
		Entry("xlarge below large", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.Amounts = &faucetv1alpha1.BTCAmounts{Large: ptr.To(int64(5_000_000)), XLarge: ptr.To(int64(4_000_000))}
		}, "the btc entry of spec.assets: amounts.xlarge (default 50000000) must be at least amounts.large"),
		Entry("a negative start height", func(a *faucetv1alpha1.AssetSpec) { a.BTC.StartHeight = ptr.To(int64(-1)) },
			"spec.assets[0].btc.startHeight"),
		Entry("minRate above maxRate", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.Fees = &faucetv1alpha1.BTCFees{MinRate: ptr.To(int64(20)), MaxRate: ptr.To(int64(10))}
		}, "the btc entry of spec.assets: fees.minRate must not exceed maxRate"),
		Entry("a fallback rate above maxRate", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.Fees = &faucetv1alpha1.BTCFees{FallbackRate: ptr.To(int64(20)), MaxRate: ptr.To(int64(10))}
		}, "the btc entry of spec.assets: fees.fallbackRate must lie between minRate and maxRate"),
		Entry("a zero fee rate", func(a *faucetv1alpha1.AssetSpec) {
			a.BTC.Fees = &faucetv1alpha1.BTCFees{MinRate: ptr.To(int64(0))}
		}, "spec.assets[0].btc.fees.minRate"),
		Entry("a zero rate-limit count", func(a *faucetv1alpha1.AssetSpec) {
			a.RateLimits = &faucetv1alpha1.AssetRateLimits{PerIP: &faucetv1alpha1.RateLimit{Window: metav1.Duration{Duration: time.Minute}}}
		}, "spec.assets[0].rateLimits.perIP.requests: Invalid value: 0: requests must be greater than 0"),
		Entry("a lowThreshold, which the faucet has none of for BTC", func(a *faucetv1alpha1.AssetSpec) { a.LowThreshold = ptr.To(int64(5)) },
			"the btc entry of spec.assets takes no lowThreshold: the faucet has no BTC threshold of its own, so spec.funding.lowThreshold applies to BTC"),
	)

	It("defaults the network, the amounts and the Secrets' data keys, and accepts every network and field", func() {
		fs := newFaucetServer(ns)
		withBTC(btcSpec(true))(fs)
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		b := fs.BTC()
		Expect(b.Network).To(Equal("regtest"))
		Expect(b.Amounts).To(Equal(&faucetv1alpha1.BTCAmounts{
			Default: ptr.To(int64(10_000)), Large: ptr.To(int64(1_000_000)), XLarge: ptr.To(int64(50_000_000)),
		}))
		Expect(b.KeySecretRef.Key).To(Equal("key"))
		Expect(b.RPC.CredentialsSecretRef.Key).To(Equal("credentials"))
		Expect(b.StartHeight).To(BeNil())
		Expect(b.Fees).To(BeNil())
		Expect(fs.BTCAsset().RateLimits).To(Equal(&faucetv1alpha1.AssetRateLimits{
			PerAddress: &faucetv1alpha1.RateLimit{Requests: 5, Window: metav1.Duration{Duration: 5 * time.Minute}},
			PerIP:      &faucetv1alpha1.RateLimit{Requests: 30, Window: metav1.Duration{Duration: 5 * time.Minute}},
		}), "the CRD's default limits, the faucet's")

		for _, network := range []string{"regtest", "signet", "testnet"} {
			fs := newFaucetServer(ns)
			b := btcSpec(true)
			b.Network = network
			b.RPC.URL = "https://btc.example.com/rpc"
			if network == "testnet" {
				b.RPC.URL, b.RPC.URLs = "", []string{"https://btc.example.com/rpc", "http://bitcoind-2.bitcoin.svc:18332"}
			}
			b.Amounts = &faucetv1alpha1.BTCAmounts{Default: ptr.To(int64(546)), Large: ptr.To(int64(546)), XLarge: ptr.To(int64(546))}
			b.StartHeight = ptr.To(int64(0))
			b.Fees = &faucetv1alpha1.BTCFees{FallbackRate: ptr.To(int64(1)), MinRate: ptr.To(int64(1)), MaxRate: ptr.To(int64(10_000))}
			a := btcAsset(b)
			a.RateLimits = &faucetv1alpha1.AssetRateLimits{PerAddress: &faucetv1alpha1.RateLimit{Requests: 1, Window: metav1.Duration{Duration: 24 * time.Hour}}}
			withAssets(sbtcAsset(1000, nil), a)(fs)
			Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed(), network)
		}
	})

	It("stalls on a missing or bad BTC key Secret without quoting it, and resumes once fixed", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, withBTC(btcSpec(true)))
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonBTCKeySecretNotFound)
			g.Expect(c.Message).To(ContainSubstring(`BTC key Secret "faucet-btc" not found`))
		}).Should(Succeed())

		By("a key of the wrong kind: a Stacks key's hex is 66 characters")
		stxKey := newKeys(1)[0].Hex()
		createSecret(ns, "faucet-btc", map[string]string{"key": stxKey})
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidBTCKey)
			g.Expect(c.Message).To(ContainSubstring(`BTC key Secret "faucet-btc", data key "key": bad bitcoin private key`))
		}).Should(Succeed())
		expectNoSecretText(ns, stxKey)

		By("a good key, then credentials that are not user:password")
		key, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
		Expect(err).NotTo(HaveOccurred())
		updateSecret(ns, "faucet-btc", map[string]string{"key": key.WIF()})
		createSecret(ns, "faucet-btc-rpc", map[string]string{"credentials": "only-a-password-9f3e"})
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidBTCCredentials)
			g.Expect(c.Message).To(ContainSubstring(`want "user:password" on the first line`))
		}).Should(Succeed())
		expectNoSecretText(ns, "only-a-password-9f3e")

		By("fixing the credentials")
		updateSecret(ns, "faucet-btc-rpc", map[string]string{"credentials": "faucet:pa55-9f3e"})
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
		}).Should(Succeed())
		d := eventuallyDeployment(ns)
		// The network and amounts the CRD filled in are serve's defaults:
		// no flag.
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{
			"serve", "--node-url=http://stacks-node.stacks.svc:20443", "--key-file=/etc/faucet/keys/keys",
			"--switches-file=/etc/faucet/switches/switches.json",
			"--btc-rpc-url=http://bitcoind.bitcoin.svc:18443", "--btc-rpc-credentials-file=/etc/faucet/btc-rpc/credentials",
			"--btc-key-file=/etc/faucet/btc-key/key", "--store=/var/lib/faucet/faucet.db", "--listen=:3999", "--shutdown-delay=0s", "--log-format=json"}))
		Expect(getFaucetServer(Default, ns).BTC().Network).To(Equal("regtest"), "the CRD's default")
		for _, secret := range []string{key.WIF(), key.Hex(), "pa55-9f3e"} {
			expectNoSecretText(ns, secret)
		}

		By("rolling the pod when the BTC key is rotated")
		before := d.Spec.Template.Annotations[ConfigHashAnnotation]
		other, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
		Expect(err).NotTo(HaveOccurred())
		updateSecret(ns, "faucet-btc", map[string]string{"key": other.WIF()})
		Eventually(func(g Gomega) {
			g.Expect(eventuallyDeployment(ns).Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(before))
		}).Should(Succeed())
	})

	It("reads the faucet's BTC address and balance from btcd, and names BTC in Funded", func() {
		btcd := requireBtcd()
		rpc := btcd.Client()
		keys := newKeys(1)
		_, url := startDevnode(map[stacks.Address]uint64{keys[0].TestnetAddress(): 200 * cost})
		createKeySecret(ns, keys)
		faucetKey, err := bitcoin.GeneratePrivateKey(bitcoin.Regtest)
		Expect(err).NotTo(HaveOccurred())
		addr := faucetKey.Address().String()
		createSecret(ns, "faucet-btc", map[string]string{"key": faucetKey.WIF() + " " + addr + "\n"})
		createSecret(ns, "faucet-btc-rpc", map[string]string{"credentials": btcd.User() + ":" + btcd.Password() + "\n"})
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.URL = url
			fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(10))}
			b := btcSpec(true)
			// A node that is down, then btcd: the balance comes from btcd.
			b.RPC.URL, b.RPC.URLs = "", []string{"http://127.0.0.1:1", "http://" + btcd.RPCAddr()}
			// 1 BTC per drip, so a few coins make a handful of drips.
			b.Amounts = &faucetv1alpha1.BTCAmounts{Default: ptr.To(int64(btcPerCoin)), Large: ptr.To(int64(btcPerCoin)), XLarge: ptr.To(int64(btcPerCoin))}
			withBTC(b)(fs)
		})

		By("reporting the address derived from the key Secret, with nothing on it yet")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(got.Status.Funding).NotTo(BeNil())
			b := assetFunding(got.Status.Funding, "btc")
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Network).To(Equal("regtest"))
			g.Expect(b.Address).To(Equal(addr))
			g.Expect(b.Balance).To(HaveValue(BeZero()))
			g.Expect(b.LastChecked).NotTo(BeNil())
			g.Expect(got.Status.Funding.AssetsSummary).To(Equal("btc:0"))
			g.Expect(got.Status.BTCNodes).To(HaveLen(2))
			g.Expect(got.Status.BTCNodes[0].Reachable).To(BeFalse())
			g.Expect(got.Status.BTCNodes[1].Reachable).To(BeTrue())
			g.Expect(got.Status.BTCNodes[1].URL).NotTo(ContainSubstring(btcd.Password()))
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonEmpty)
			g.Expect(c.Message).To(HavePrefix("btc: 0 drips left (0 sats at " + addr + " on regtest, 100000000 sats per drip): send test BTC to " + addr))
		}).Should(Succeed())

		By("paying it 5 BTC from the miner: Low")
		first := payBTC(rpc, addr, 5*btcPerCoin)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(assetFunding(got.Status.Funding, "btc").Balance).To(HaveValue(Equal(int64(5 * btcPerCoin))))
			g.Expect(assetFunding(got.Status.Funding, "btc").DripsLeft).To(HaveValue(Equal(int64(5))))
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonLow)
			g.Expect(c.Message).To(HavePrefix("btc: 5 drips left, below 10"))
		}).Should(Succeed())

		By("paying it 10 BTC more: Funded")
		second := payBTC(rpc, addr, 10*btcPerCoin)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(assetFunding(got.Status.Funding, "btc").Balance).To(HaveValue(Equal(int64(15 * btcPerCoin))))
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionTrue, faucetv1alpha1.ReasonFunded)
			g.Expect(c.Message).To(ContainSubstring("; btc: 15 drips left (1500000000 sats at " + addr + " on regtest, 100000000 sats per drip)"))
		}).Should(Succeed())

		By("the faucet paying most of it away: Empty")
		spend, err := bitcoin.BuildPayout(bitcoin.BuildParams{
			Key: faucetKey, Coins: []bitcoin.Coin{first, second}, FeeRate: 2,
			Payouts: []bitcoin.Payout{{Address: btcMiner.Address(), Amount: 14*btcPerCoin + btcPerCoin/2}},
		})
		Expect(err).NotTo(HaveOccurred())
		sendAndMine(rpc, spend)
		change := int64(btcPerCoin/2) - spend.Fee()
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(assetFunding(got.Status.Funding, "btc").Balance).To(HaveValue(Equal(change)))
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonEmpty)
			g.Expect(c.Message).To(ContainSubstring("send test BTC to " + addr))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonEmpty)

		By("reporting the Bitcoin node down as NodeUnreachable, keeping the last BTC figures and reading STX on")
		Expect(btcd.Stop()).To(Succeed())
		DeferCleanup(func() { _ = btcd.Start() }) // the other specs need it, whatever happens here
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionFunded, metav1.ConditionUnknown, faucetv1alpha1.ReasonNodeUnreachable)
			g.Expect(c.Message).To(HavePrefix("btc: cannot read the BTC balance from the Bitcoin node http://127.0.0.1:1, http://" + btcd.RPCAddr()))
			g.Expect(got.Status.BTCNodes).To(HaveLen(2))
			g.Expect(got.Status.BTCNodes[1].Reachable).To(BeFalse(), "btcd stopped")
			g.Expect(assetFunding(got.Status.Funding, "btc").Balance).To(HaveValue(Equal(change)))
			g.Expect(assetFunding(got.Status.Funding, "btc").Message).To(ContainSubstring("BTC balance of " + addr))
			g.Expect(got.Status.Funding.DripsLeft).To(Equal(int64(200)))
		}).Should(Succeed())
		Expect(btcd.Start()).To(Succeed())
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionFunded, metav1.ConditionFalse, faucetv1alpha1.ReasonEmpty)
		}).Should(Succeed())

		for _, secret := range []string{faucetKey.WIF(), faucetKey.Hex(), btcd.Password()} {
			expectNoSecretText(ns, secret)
		}
	})
})

// payBTC pays sats to addr from a mature coinbase of btcMiner (mining the
// 101 blocks that make one), mines the payment and returns it as the
// recipient's coin.
func payBTC(rpc *btcnode.Client, addr string, sats int64) bitcoin.Coin {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(suiteCtx, time.Minute)
	defer cancel()
	hashes, err := rpc.Generate(ctx, 101)
	Expect(err).NotTo(HaveOccurred())
	block, err := rpc.Block(ctx, hashes[0])
	Expect(err).NotTo(HaveOccurred())
	cb := block.Txs[0]
	to, err := bitcoin.ParseAddress(addr, bitcoin.Regtest)
	Expect(err).NotTo(HaveOccurred())
	tx, err := bitcoin.BuildPayout(bitcoin.BuildParams{
		Key: btcMiner, Coins: []bitcoin.Coin{coinOf(cb.TxID, 0, cb.Vout[0].Value, btcMiner.Address())},
		Payouts: []bitcoin.Payout{{Address: to, Amount: sats}}, FeeRate: 2,
	})
	Expect(err).NotTo(HaveOccurred())
	sendAndMine(rpc, tx)
	return coinOf(tx.TxID().String(), 0, sats, to)
}

// sendAndMine broadcasts tx and mines it into a block.
func sendAndMine(rpc *btcnode.Client, tx *bitcoin.Tx) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(suiteCtx, time.Minute)
	defer cancel()
	_, err := rpc.SendRawTransaction(ctx, tx.Raw())
	Expect(err).NotTo(HaveOccurred())
	_, err = rpc.Generate(ctx, 1)
	Expect(err).NotTo(HaveOccurred())
}

func coinOf(txid string, vout uint32, sats int64, to bitcoin.Address) bitcoin.Coin {
	GinkgoHelper()
	h, err := chainhash.NewHashFromStr(txid)
	Expect(err).NotTo(HaveOccurred())
	return bitcoin.Coin{OutPoint: wire.OutPoint{Hash: *h, Index: vout}, Value: sats, PkScript: to.PkScript()}
}

// updateSecret replaces the data of Secret name.
func updateSecret(ns, name string, data map[string]string) {
	GinkgoHelper()
	s := &corev1.Secret{}
	Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	s.Data = map[string][]byte{}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	Expect(k8sClient.Update(suiteCtx, s)).To(Succeed())
}
