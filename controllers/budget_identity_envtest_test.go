package controllers

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// The budgets and sign-in against a real API server: what the CRD refuses
// (each malformed setting, with a message naming the field), what it
// fills in, and the sign-in Secrets mounted, rolled and checked.

var _ = Describe("Budgets and identity", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fsrv-id-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name
	})

	// signIn is a valid identity for the entries below to break.
	signIn := func(fs *faucetv1alpha1.FaucetServer) *faucetv1alpha1.IdentitySpec {
		fs.Spec.Identity = &faucetv1alpha1.IdentitySpec{OIDC: faucetv1alpha1.OIDCSpec{
			IssuerURL: "https://accounts.example.com", ClientID: "faucet",
			ClientSecretRef: &faucetv1alpha1.OIDCClientSecretReference{Name: "faucet-oidc"},
		}}
		return fs.Spec.Identity
	}
	tier := func(fs *faucetv1alpha1.FaucetServer, t faucetv1alpha1.TierSpec) {
		if fs.Spec.Identity == nil {
			signIn(fs)
		}
		fs.Spec.Identity.Tiers = append(fs.Spec.Identity.Tiers, t)
	}
	budget := func(fs *faucetv1alpha1.FaucetServer) *faucetv1alpha1.BudgetSpec {
		fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(1_000_000_000))}
		return fs.Spec.Budget
	}

	DescribeTable("refuses malformed budgets and identities with a message naming the field",
		func(mutate func(*faucetv1alpha1.FaucetServer), message string) {
			fs := newFaucetServer(ns)
			mutate(fs)
			err := k8sClient.Create(suiteCtx, fs, client.DryRunAll)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		// spec.budget and spec.assets[].budget
		Entry("a budget without amount", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{Reserve: ptr.To(int64(5))}
		}, "spec.budget.amount: Required value"),
		Entry("a negative amount", func(fs *faucetv1alpha1.FaucetServer) { budget(fs).Amount = ptr.To(int64(-1)) },
			"budget.amount must be 0 or more base units"),
		Entry("a window under a minute", func(fs *faucetv1alpha1.FaucetServer) { budget(fs).Per = ptr.To(duration(30 * time.Second)) },
			"budget.per must be at least 1m"),
		Entry("scaleBelowPercent 0, which the faucet reads as 25", func(fs *faucetv1alpha1.FaucetServer) {
			budget(fs).ScaleBelowPercent = ptr.To(int32(0))
		}, "budget.scaleBelowPercent must be 1 to 100"),
		Entry("scaleBelowPercent over 100", func(fs *faucetv1alpha1.FaucetServer) { budget(fs).ScaleBelowPercent = ptr.To(int32(101)) },
			"budget.scaleBelowPercent must be 1 to 100"),
		Entry("floorPercent 0, which the faucet reads as 10", func(fs *faucetv1alpha1.FaucetServer) {
			budget(fs).FloorPercent = ptr.To(int32(0))
		}, "budget.floorPercent must be 1 to 100"),
		Entry("floorPercent over 100", func(fs *faucetv1alpha1.FaucetServer) { budget(fs).FloorPercent = ptr.To(int32(150)) },
			"budget.floorPercent must be 1 to 100"),
		Entry("stackingPercent 0, which the faucet reads as 50", func(fs *faucetv1alpha1.FaucetServer) {
			budget(fs).StackingPercent = ptr.To(int32(0))
		}, "budget.stackingPercent must be 1 to 100"),
		Entry("stackingPercent over 100", func(fs *faucetv1alpha1.FaucetServer) { budget(fs).StackingPercent = ptr.To(int32(101)) },
			"budget.stackingPercent must be 1 to 100"),
		Entry("a negative stackingPercent", func(fs *faucetv1alpha1.FaucetServer) { budget(fs).StackingPercent = ptr.To(int32(-1)) },
			"budget.stackingPercent must be 1 to 100"),
		Entry("a stacking share on a token's budget", func(fs *faucetv1alpha1.FaucetServer) {
			a := tokenAsset("tusd", testnetTUSD, 1, nil)
			a.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(1_000)), StackingPercent: ptr.To(int32(50))}
			withAssets(a)(fs)
		}, "spec.assets[0].budget.stackingPercent: Invalid value: spec.assets[].budget takes no stackingPercent: stacking drips are STX only, so it belongs in spec.budget"),
		Entry("a stacking share on BTC's budget", func(fs *faucetv1alpha1.FaucetServer) {
			a := btcAsset(btcSpec(false))
			a.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(0)), StackingPercent: ptr.To(int32(100))}
			withAssets(sbtcAsset(1, nil), a)(fs)
		}, "spec.assets[1].budget.stackingPercent: Invalid value"),
		Entry("a negative reserve", func(fs *faucetv1alpha1.FaucetServer) { budget(fs).Reserve = ptr.To(int64(-5)) },
			"budget.reserve must be 0 or more base units"),
		Entry("a negative target", func(fs *faucetv1alpha1.FaucetServer) { budget(fs).Target = ptr.To(int64(-5)) },
			"budget.target must be 0 or more base units"),
		Entry("a target at the reserve", func(fs *faucetv1alpha1.FaucetServer) {
			b := budget(fs)
			b.Reserve, b.Target = ptr.To(int64(500)), ptr.To(int64(500))
		}, "spec.budget.target: Invalid value: budget.target must be above budget.reserve"),
		Entry("a token's target below its reserve", func(fs *faucetv1alpha1.FaucetServer) {
			a := tokenAsset("tusd", testnetTUSD, 1, nil)
			a.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(0)), Reserve: ptr.To(int64(500)), Target: ptr.To(int64(100))}
			withAssets(a)(fs)
		}, "spec.assets[0].budget.target: Invalid value: budget.target must be above budget.reserve"),
		Entry("BTC's budget without amount", func(fs *faucetv1alpha1.FaucetServer) {
			a := btcAsset(btcSpec(false))
			a.Budget = &faucetv1alpha1.BudgetSpec{}
			withAssets(a)(fs)
		}, "spec.assets[0].budget.amount: Required value"),

		// spec.identity.oidc
		Entry("an issuer without a scheme", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.IssuerURL = "accounts.google.com" },
			"identity.oidc.issuerURL must be an http:// or https:// URL with a host"),
		Entry("an issuer of another scheme", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.IssuerURL = "ftp://accounts.example.com" },
			"identity.oidc.issuerURL must be an http:// or https:// URL with a host"),
		Entry("an issuer with a query", func(fs *faucetv1alpha1.FaucetServer) {
			signIn(fs).OIDC.IssuerURL = "https://accounts.example.com/?realm=x"
		},
			"identity.oidc.issuerURL must not have a query or a fragment"),
		Entry("an issuer with a fragment", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.IssuerURL = "https://accounts.example.com/#x" },
			"identity.oidc.issuerURL must not have a query or a fragment"),
		Entry("an issuer with a password", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.IssuerURL = "https://u:pw@accounts.example.com" },
			"identity.oidc.issuerURL must not carry a user or password"),
		Entry("an empty issuer", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.IssuerURL = "" },
			"spec.identity.oidc.issuerURL: Invalid value: \"\": spec.identity.oidc.issuerURL in body should be at least 1 chars long"),
		Entry("an empty client ID", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.ClientID = "" },
			"spec.identity.oidc.clientID in body should be at least 1 chars long"),
		Entry("a client ID over 255 characters", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.ClientID = strings.Repeat("c", 256) },
			"spec.identity.oidc.clientID: Too long"),
		Entry("a client ID with whitespace around it", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.ClientID = " faucet" },
			"identity.oidc.clientID must not start or end with whitespace"),
		Entry("a client secret Secret without a name", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.ClientSecretRef.Name = "" },
			"spec.identity.oidc.clientSecretRef.name in body should be at least 1 chars long"),
		Entry("a client secret key that is no file name", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.ClientSecretRef.Key = ".." },
			"identity.oidc.clientSecretRef.key must be a file name"),
		Entry("a public client without a session key", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.ClientSecretRef = nil },
			"identity.sessionKeySecretRef is required without identity.oidc.clientSecretRef"),
		Entry("scopes without openid", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.Scopes = []string{"email", "profile"} },
			"identity.oidc.scopes must include openid"),
		Entry("two scopes in one", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.Scopes = []string{"openid", "email profile"} },
			"identity.oidc.scopes must each be one scope"),
		Entry("a scope with a comma", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.Scopes = []string{"openid,email"} },
			"identity.oidc.scopes must each be one scope"),
		Entry("a scope twice", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.Scopes = []string{"openid", "openid"} },
			"spec.identity.oidc.scopes[1]: Duplicate value"),
		Entry("an audience with a space", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).OIDC.Audiences = []string{"my api"} },
			"identity.oidc.audiences must each be one audience"),

		// the rest of spec.identity
		Entry("a public URL without a scheme", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).PublicURL = "faucet.example.com" },
			"identity.publicURL must be the faucet's origin as browsers reach it"),
		Entry("a public URL with a path", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).PublicURL = "https://faucet.example.com/faucet" },
			"identity.publicURL must be an origin only, without a path, query or fragment"),
		Entry("a public URL with a query", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).PublicURL = "https://faucet.example.com?x=1" },
			"identity.publicURL must be an origin only, without a path, query or fragment"),
		Entry("a public URL with a user", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).PublicURL = "https://me@faucet.example.com" },
			"identity.publicURL must not carry a user or password"),
		Entry("a session key Secret without a name", func(fs *faucetv1alpha1.FaucetServer) {
			signIn(fs).SessionKeySecretRef = &faucetv1alpha1.SessionKeySecretReference{}
		}, "spec.identity.sessionKeySecretRef.name in body should be at least 1 chars long"),
		Entry("a session key that is no file name", func(fs *faucetv1alpha1.FaucetServer) {
			signIn(fs).SessionKeySecretRef = &faucetv1alpha1.SessionKeySecretReference{Name: "s", Key: "."}
		}, "identity.sessionKeySecretRef.key must be a file name"),
		Entry("a session under a minute", func(fs *faucetv1alpha1.FaucetServer) { signIn(fs).SessionTTL = ptr.To(duration(10 * time.Second)) },
			"identity.sessionTTL must be at least 1m"),
		Entry("an anonymous share of 0", func(fs *faucetv1alpha1.FaucetServer) {
			signIn(fs).Anonymous = &faucetv1alpha1.AnonymousSpec{BudgetSharePercent: ptr.To(int32(0))}
		}, "identity.anonymous.budgetSharePercent must be a percent of each budget, 1 to 100"),
		Entry("an anonymous share over 100", func(fs *faucetv1alpha1.FaucetServer) {
			signIn(fs).Anonymous = &faucetv1alpha1.AnonymousSpec{BudgetSharePercent: ptr.To(int32(101))}
		}, "identity.anonymous.budgetSharePercent must be a percent of each budget, 1 to 100"),
		Entry("an anonymous amount of 0", func(fs *faucetv1alpha1.FaucetServer) {
			signIn(fs).Anonymous = &faucetv1alpha1.AnonymousSpec{AmountPercent: ptr.To(int32(0))}
		}, "identity.anonymous.amountPercent must be a percent of the drip, 1 to 10000"),
		Entry("an anonymous amount over 10000", func(fs *faucetv1alpha1.FaucetServer) {
			signIn(fs).Anonymous = &faucetv1alpha1.AnonymousSpec{AmountPercent: ptr.To(int32(10001))}
		}, "identity.anonymous.amountPercent must be a percent of the drip, 1 to 10000"),

		// spec.identity.tiers
		Entry("an upper-case tier name", func(fs *faucetv1alpha1.FaucetServer) { tier(fs, faucetv1alpha1.TierSpec{Name: "Staff"}) },
			"identity.tiers[].name must be 1 to 32 lower-case letters, digits and '-'"),
		Entry("a tier name ending in -", func(fs *faucetv1alpha1.FaucetServer) { tier(fs, faucetv1alpha1.TierSpec{Name: "staff-"}) },
			"identity.tiers[].name must be 1 to 32 lower-case letters, digits and '-'"),
		Entry("a tier name over 32 characters", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: strings.Repeat("t", 33)})
		}, "spec.identity.tiers[0].name: Too long"),
		Entry("a tier named anonymous", func(fs *faucetv1alpha1.FaucetServer) { tier(fs, faucetv1alpha1.TierSpec{Name: "anonymous"}) },
			"identity.tiers[].name must not be anonymous"),
		Entry("two tiers of one name", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff"})
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", SkipProofOfWork: true})
		}, "identity.tiers: two tiers share a name"),
		Entry("more than 16 tiers", func(fs *faucetv1alpha1.FaucetServer) {
			for i := range 17 {
				tier(fs, faucetv1alpha1.TierSpec{Name: "t" + strings.Repeat("x", i)})
			}
		}, "spec.identity.tiers: Too many: 17: must have at most 16 items"),
		Entry("a tier amount of 0", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", AmountPercent: ptr.To(int32(0))})
		}, "identity.tiers[].amountPercent must be a percent of the drip, 1 to 10000"),
		Entry("a tier amount over 10000", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", AmountPercent: ptr.To(int32(20000))})
		}, "identity.tiers[].amountPercent must be a percent of the drip, 1 to 10000"),
		Entry("a tier share of 0", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", BudgetSharePercent: ptr.To(int32(0))})
		}, "identity.tiers[].budgetSharePercent must be a percent of each budget, 1 to 100"),
		Entry("a tier limit of no drips", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", Limit: &faucetv1alpha1.RateLimit{Requests: 0, Window: duration(time.Hour)}})
		}, "spec.identity.tiers[0].limit.requests: Invalid value: 0: requests must be greater than 0"),
		Entry("a tier limit without a window", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", Limit: &faucetv1alpha1.RateLimit{Requests: 5}})
		}, "window must be a positive duration"),
		Entry("a group with |", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", Match: &faucetv1alpha1.TierMatch{Groups: []string{"a|b"}}})
		}, "identity.tiers[].match.groups must each be a group name without ',', '|' or ';'"),
		Entry("a group with ;", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", Match: &faucetv1alpha1.TierMatch{Groups: []string{"a;b"}}})
		}, "identity.tiers[].match.groups must each be a group name without ',', '|' or ';'"),
		Entry("a group with a space in front", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", Match: &faucetv1alpha1.TierMatch{Groups: []string{" staff"}}})
		}, "identity.tiers[].match.groups must each be a group name without ',', '|' or ';'"),
		Entry("an empty group", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", Match: &faucetv1alpha1.TierMatch{Groups: []string{""}}})
		}, "spec.identity.tiers[0].match.groups[0] in body should be at least 1 chars long"),
		Entry("an email domain with @", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", Match: &faucetv1alpha1.TierMatch{EmailDomains: []string{"@example.com"}}})
		}, "identity.tiers[].match.emailDomains must each be a domain name, e.g. example.com (without @)"),
		Entry("an email domain with an empty label", func(fs *faucetv1alpha1.FaucetServer) {
			tier(fs, faucetv1alpha1.TierSpec{Name: "staff", Match: &faucetv1alpha1.TierMatch{EmailDomains: []string{"example..com"}}})
		}, "identity.tiers[].match.emailDomains must each be a domain name"),
	)

	// What Go's types cannot send: a missing oidc, an empty scopes list,
	// a window that is no duration.
	DescribeTable("refuses malformed budgets and identities written as YAML",
		func(specYAML, message string) {
			u := unstructuredFaucetServer(ns, specYAML)
			err := k8sClient.Create(suiteCtx, u, client.DryRunAll)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("identity without oidc", "identity: {publicURL: 'https://faucet.example.com'}", "spec.identity.oidc: Required value"),
		Entry("oidc without issuerURL", "identity: {oidc: {clientID: faucet, clientSecretRef: {name: s}}}", "spec.identity.oidc.issuerURL: Required value"),
		Entry("oidc without clientID", "identity: {oidc: {issuerURL: 'https://a.example.com', clientSecretRef: {name: s}}}", "spec.identity.oidc.clientID: Required value"),
		Entry("an empty scopes list", "identity: {oidc: {issuerURL: 'https://a.example.com', clientID: f, clientSecretRef: {name: s}, scopes: []}}",
			"spec.identity.oidc.scopes: Invalid value: 0: spec.identity.oidc.scopes in body should have at least 1 items"),
		Entry("a budget window that is no duration", "budget: {amount: 5, per: 1 day}", "spec.budget.per in body should match"),
		Entry("a tier without a name", "identity: {oidc: {issuerURL: 'https://a.example.com', clientID: f, clientSecretRef: {name: s}}, tiers: [{skipProofOfWork: true}]}",
			"spec.identity.tiers[0].name: Required value"),
	)

	It("accepts a full budget and identity, and fills in the defaults the faucet has", func() {
		fs := newFaucetServer(ns)
		withBudgets(fs)
		withIdentity(fs)
		// The rest left to the CRD.
		fs.Spec.Identity.SessionTTL = nil
		fs.Spec.Identity.OIDC.ClientSecretRef.Key = ""
		fs.Spec.Identity.Tiers = append(fs.Spec.Identity.Tiers, faucetv1alpha1.TierSpec{Name: "signed-in"})
		fs.Spec.Identity.Anonymous = &faucetv1alpha1.AnonymousSpec{}
		fs.Spec.Assets[0].Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(1_000_000))}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())

		Expect(fs.Spec.Budget.Per).To(HaveValue(HaveField("Duration", 12*time.Hour)), "as given")
		Expect(fs.Spec.Budget.StackingPercent).To(HaveValue(Equal(int32(40))), "as given")
		sbtc := fs.Spec.Assets[0].Budget
		Expect(sbtc.Per).To(HaveValue(HaveField("Duration", 24*time.Hour)))
		Expect(sbtc.ScaleBelowPercent).To(HaveValue(Equal(int32(25))))
		Expect(sbtc.FloorPercent).To(HaveValue(Equal(int32(10))))
		Expect(sbtc.Reserve).To(BeNil())
		Expect(sbtc.Target).To(BeNil())
		Expect(sbtc.StackingPercent).To(BeNil(), "no default: STX only, and unset means the faucet's 50")
		Expect(fs.Spec.Assets[1].RateLimits).NotTo(BeNil(), "the entries' own defaults still apply")

		id := fs.Spec.Identity
		Expect(id.OIDC.ClientSecretRef.Key).To(Equal("client-secret"))
		Expect(id.SessionKeySecretRef.Key).To(Equal("key"), "as given")
		Expect(id.SessionTTL).To(HaveValue(HaveField("Duration", 12*time.Hour)))
		Expect(id.Anonymous).To(Equal(&faucetv1alpha1.AnonymousSpec{
			Enabled: ptr.To(true), BudgetSharePercent: ptr.To(int32(50)), AmountPercent: ptr.To(int32(100)),
		}))
		Expect(id.Tiers[2]).To(Equal(faucetv1alpha1.TierSpec{
			Name: "signed-in", AmountPercent: ptr.To(int32(100)), BudgetSharePercent: ptr.To(int32(100)),
			Limit: &faucetv1alpha1.RateLimit{Requests: 20, Window: duration(24 * time.Hour)},
		}))
		Expect(id.Tiers[1].Limit).To(Equal(&faucetv1alpha1.RateLimit{Requests: 20, Window: duration(24 * time.Hour)}))
		Expect(id.Tiers[0].Limit.Requests).To(Equal(int32(100)), "as given")
		Expect(fs.Spec.Budget.Target).To(HaveValue(Equal(int64(200_000_000_000))))

		By("a public client with a session key, and a budget that is off with a target and no reserve")
		fs = newFaucetServer(ns)
		fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(0)), Target: ptr.To(int64(1))}
		fs.Spec.Identity = &faucetv1alpha1.IdentitySpec{
			OIDC:                faucetv1alpha1.OIDCSpec{IssuerURL: "http://dex.auth.svc:5556/dex", ClientID: "faucet", Scopes: []string{"openid", "groups"}},
			SessionKeySecretRef: &faucetv1alpha1.SessionKeySecretReference{Name: "faucet-session"},
			PublicURL:           "http://localhost:3999/",
		}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		Expect(fs.Spec.Identity.SessionKeySecretRef.Key).To(Equal("session-key"))
		Expect(fs.Spec.Identity.Anonymous).To(BeNil(), "no anonymous tier of its own: the faucet's")
	})

	It("mounts the sign-in Secrets, rolls the pod when one changes, and stalls on a missing or bad one without quoting it", func() {
		const clientSecret, rotatedSecret = "client-secret-0123456789abcdef", "client-secret-rotated-0123456789"
		const sessionKey = "session-key-0123456789abcdefghij"
		createKeySecret(ns, newKeys(1))
		createSecret(ns, "faucet-oidc", map[string]string{"client-secret": clientSecret})
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			signIn(fs).Tiers = []faucetv1alpha1.TierSpec{{Name: "verified", Match: &faucetv1alpha1.TierMatch{EmailVerified: true}, SkipProofOfWork: true}}
			fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(1_000_000_000_000)), Reserve: ptr.To(int64(10_000_000_000))}
		})

		By("passing the settings as flags and the client secret as a file of its own volume")
		d := eventuallyDeployment(ns)
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(ContainElements(
			"--budget=asset=stx,amount=1000000000000,per=24h0m0s,scale-below=25,floor=10,reserve=10000000000",
			"--oidc-issuer=https://accounts.example.com", "--oidc-client-id=faucet",
			"--oidc-client-secret-file=/etc/faucet/oidc/client-secret",
			"--tier=name=verified,email-verified=true,amount-percent=100,limit=20/24h0m0s,skip-pow=true,budget-share=100",
		))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--anonymous-")), "no identity.anonymous: the faucet's defaults")
		Expect(c.VolumeMounts).To(ContainElement(And(
			HaveField("Name", "oidc-client-secret"), HaveField("MountPath", "/etc/faucet/oidc"),
			HaveField("ReadOnly", BeTrue()), HaveField("SubPath", BeEmpty()))))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(
			HaveField("Name", "oidc-client-secret"),
			HaveField("Secret.SecretName", "faucet-oidc"),
			HaveField("Secret.Items", ConsistOf(corev1.KeyToPath{Key: "client-secret", Path: "client-secret"})),
		)))
		Expect(c.Env).To(BeEmpty())
		before := d.Spec.Template.Annotations[ConfigHashAnnotation]

		By("rotating the client secret: the pods read it at start, so they roll")
		updateSecret(ns, "faucet-oidc", map[string]string{"client-secret": rotatedSecret})
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(before))
		}).Should(Succeed())
		rotated := d.Spec.Template.Annotations[ConfigHashAnnotation]

		By("a client secret too short to derive the session key from stalls, leaving the pods alone")
		updateSecret(ns, "faucet-oidc", map[string]string{"client-secret": "sh0rt!"})
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			s := expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidOIDCClientSecret)
			g.Expect(s.Message).To(ContainSubstring(`OIDC client secret Secret "faucet-oidc", data key "client-secret": the client secret is shorter than 16 bytes`))
			g.Expect(s.Message).To(ContainSubstring("spec.identity.sessionKeySecretRef"))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonInvalidOIDCClientSecret)
		Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
		Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).To(Equal(rotated), "running pods are left alone")

		By("a session key Secret that does not exist yet stalls too")
		fs := getFaucetServer(Default, ns)
		fs.Spec.Identity.SessionKeySecretRef = &faucetv1alpha1.SessionKeySecretReference{Name: "faucet-session"}
		Expect(k8sClient.Update(suiteCtx, fs)).To(Succeed())
		Eventually(func(g Gomega) {
			s := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonSessionKeySecretNotFound)
			g.Expect(s.Message).To(ContainSubstring(`session key Secret "faucet-session" not found`))
		}).Should(Succeed())

		By("a session key too short")
		createSecret(ns, "faucet-session", map[string]string{"session-key": "tiny-key"})
		Eventually(func(g Gomega) {
			s := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidSessionKey)
			g.Expect(s.Message).To(ContainSubstring("shorter than 16 bytes"))
		}).Should(Succeed())

		By("a good session key: the short client secret is fine now, and the pods roll with both files")
		updateSecret(ns, "faucet-session", map[string]string{"session-key": sessionKey})
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--session-key-file=/etc/faucet/session/session-key"))
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(rotated))
		}).Should(Succeed())
		withKey := d.Spec.Template.Annotations[ConfigHashAnnotation]

		By("rotating the session key rolls the pods")
		updateSecret(ns, "faucet-session", map[string]string{"session-key": sessionKey + "-rotated"})
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(withKey))
		}).Should(Succeed())

		By("never putting the client secret or the session key in the Deployment, the status or events")
		for _, text := range []string{clientSecret, rotatedSecret, "sh0rt!", sessionKey, "tiny-key"} {
			expectNoSecretText(ns, text)
		}
	})
})

// unstructuredFaucetServer is newFaucetServer(ns) with specYAML merged
// into its spec, for what Go's types cannot express.
func unstructuredFaucetServer(ns, specYAML string) *unstructured.Unstructured {
	GinkgoHelper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(newFaucetServer(ns))
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(faucetv1alpha1.GroupVersion.WithKind("FaucetServer"))
	delete(u.Object, "status")
	var extra map[string]any
	Expect(yaml.Unmarshal([]byte(specYAML), &extra)).To(Succeed())
	spec := u.Object["spec"].(map[string]any)
	for k, v := range extra {
		spec[k] = v
	}
	return u
}
