package controllers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// Pure builder tests of spec.budget, spec.assets[].budget and
// spec.identity: a FaucetServer in, the pod's args, volumes and config
// hash out.

// withBudgets sets STX's budget and one of each entry of spec.assets
// (a token and BTC), every field away from its default; BTC's budget is
// off but keeps a reserve.
func withBudgets(fs *faucetv1alpha1.FaucetServer) {
	fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{
		Amount: ptr.To(int64(1_000_000_000_000)), Per: ptr.To(duration(12 * time.Hour)),
		ScaleBelowPercent: ptr.To(int32(30)), FloorPercent: ptr.To(int32(20)),
		Reserve: ptr.To(int64(50_000_000_000)), Target: ptr.To(int64(200_000_000_000)),
		StackingPercent: ptr.To(int32(40)),
	}
	tusd := tokenAsset("tusd", testnetTUSD, 10_000_000, nil)
	tusd.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(5_000_000_000)), Per: ptr.To(duration(time.Hour))}
	btc := btcAsset(btcSpec(false))
	// Off: per (even the CRD's default) is no part of --budget then.
	btc.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(0)), Per: ptr.To(duration(24 * time.Hour)), Reserve: ptr.To(int64(100_000))}
	fs.Spec.Assets = append(fs.Spec.Assets, sbtcAsset(100_000, nil), tusd, btc)
}

// withIdentity sets every field of spec.identity away from its default.
func withIdentity(fs *faucetv1alpha1.FaucetServer) {
	fs.Spec.Identity = &faucetv1alpha1.IdentitySpec{
		OIDC: faucetv1alpha1.OIDCSpec{
			IssuerURL:       "https://keycloak.example.com/realms/faucet",
			ClientID:        "stx-faucet",
			ClientSecretRef: &faucetv1alpha1.OIDCClientSecretReference{Name: "faucet-oidc", Key: "client-secret"},
			Scopes:          []string{"openid", "email", "groups"},
			Audiences:       []string{"api://faucet"},
		},
		PublicURL:           "https://faucet.example.com",
		SessionKeySecretRef: &faucetv1alpha1.SessionKeySecretReference{Name: "faucet-session", Key: "key"},
		SessionTTL:          ptr.To(duration(8 * time.Hour)),
		Anonymous: &faucetv1alpha1.AnonymousSpec{
			Enabled: ptr.To(true), BudgetSharePercent: ptr.To(int32(30)), AmountPercent: ptr.To(int32(50)),
		},
		Tiers: []faucetv1alpha1.TierSpec{{
			Name:  "staff",
			Match: &faucetv1alpha1.TierMatch{Groups: []string{"faucet-staff", "stacks devs"}},
			// A limit of its own, no proof of work, the whole budget.
			AmountPercent: ptr.To(int32(1000)), Limit: &faucetv1alpha1.RateLimit{Requests: 100, Window: duration(24 * time.Hour)},
			SkipProofOfWork: true, BudgetSharePercent: ptr.To(int32(100)),
		}, {
			Name:  "verified",
			Match: &faucetv1alpha1.TierMatch{EmailVerified: true, EmailDomains: []string{"example.com", "example.org"}},
			// The limit left to its default, 20 per 24h.
			AmountPercent: ptr.To(int32(200)), SkipProofOfWork: true, BudgetSharePercent: ptr.To(int32(60)),
		}},
	}
}

// flagsWithPrefix are args's flags whose name starts with one of prefixes.
func flagsWithPrefix(args []string, prefixes ...string) []string {
	var out []string
	for _, a := range args {
		for _, p := range prefixes {
			if strings.HasPrefix(a, "--"+p) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// TestBudgetArgs: each budget is one --budget value, STX's first, then
// spec.assets' in spec order; an asset without one passes none (the
// faucet's default budget), and the arguments parse back and validate.
func TestBudgetArgs(t *testing.T) {
	tests := map[string]struct {
		fs   *faucetv1alpha1.FaucetServer
		want []string
	}{
		"no budget: the faucet's default, 2,000 drips a day": {fs: fixture(withAssets(sbtcAsset(1, nil)))},
		"STX's, a token's and BTC's, an asset between them without one": {
			fs: fixture(withBudgets),
			want: []string{"--budget=" +
				"asset=stx,amount=1000000000000,per=12h0m0s,scale-below=30,floor=20,reserve=50000000000,target=200000000000,stacking=40;" +
				"asset=tusd,amount=5000000000,per=1h0m0s;" +
				"asset=btc,amount=0,per=24h0m0s,reserve=100000"},
		},
		"the CRD's defaults filled in are written out": {
			fs: fixture(func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(7)), Per: ptr.To(duration(24 * time.Hour)),
					ScaleBelowPercent: ptr.To(int32(25)), FloorPercent: ptr.To(int32(10))}
			}),
			want: []string{"--budget=asset=stx,amount=7,per=24h0m0s,scale-below=25,floor=10"},
		},
		"stacking drips held to no share of their own": {
			fs: fixture(func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(7)), StackingPercent: ptr.To(int32(100))}
			}),
			want: []string{"--budget=asset=stx,amount=7,per=24h0m0s,stacking=100"},
		},
		"a stacking share on a token's budget (which the CRD refuses) is not passed: serve would refuse it": {
			fs: fixture(func(fs *faucetv1alpha1.FaucetServer) {
				tusd := tokenAsset("tusd", testnetTUSD, 10_000_000, nil)
				tusd.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(5)), StackingPercent: ptr.To(int32(30))}
				fs.Spec.Assets = append(fs.Spec.Assets, tusd)
			}),
			want: []string{"--budget=asset=tusd,amount=5,per=24h0m0s"},
		},
		"a budget without amount (which the CRD refuses) passes nothing": {
			fs: fixture(func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{Reserve: ptr.To(int64(9))}
			}),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := flagsWithPrefix(serverArgs(tt.fs), "budget"); !slices.Equal(got, tt.want) {
				t.Errorf("budget flags\n %q\nwant\n %q", got, tt.want)
			}
			checkArgsParseBack(t, tt.fs)
			o := serverOptions(tt.fs)
			o.Abuse.SwitchesFile = writeSwitchesFile(t, tt.fs)
			if err := o.Validate(); err != nil {
				t.Errorf("serve refuses the operator's options: %v", err)
			}
		})
	}
}

// TestIdentityArgs: spec.identity maps to the sign-in flags, the Secrets
// to files on read-only Secret volumes of their own; nothing of theirs is
// an argument or a variable.
func TestIdentityArgs(t *testing.T) {
	fs := fixture(withIdentity)
	d := deploymentFor(fs, "img", secretDigests{keys: "k", oidcClientSecret: "o", sessionKey: "s"})
	pod := d.Spec.Template.Spec
	args := pod.Containers[0].Args
	want := []string{
		"--oidc-issuer=https://keycloak.example.com/realms/faucet",
		"--oidc-client-id=stx-faucet",
		"--oidc-client-secret-file=/etc/faucet/oidc/client-secret",
		"--oidc-scopes=openid,email,groups",
		"--oidc-audience=api://faucet",
		"--public-url=https://faucet.example.com",
		"--session-key-file=/etc/faucet/session/key",
		"--session-ttl=8h0m0s",
		"--tier=name=staff,groups=faucet-staff|stacks devs,amount-percent=1000,limit=100/24h0m0s,skip-pow=true,budget-share=100;" +
			"name=verified,email-verified=true,email-domains=example.com|example.org,amount-percent=200,limit=20/24h0m0s,skip-pow=true,budget-share=60",
		"--anonymous-budget-share=30",
		"--anonymous-amount-percent=50",
	}
	if got := flagsWithPrefix(args, "oidc-", "public-url", "session-", "tier", "anonymous-"); !slices.Equal(got, want) {
		t.Errorf("sign-in flags\n %q\nwant\n %q", got, want)
	}
	checkArgsParseBack(t, fs)
	o := serverOptions(fs)
	o.Abuse.SwitchesFile = writeSwitchesFile(t, fs)
	if err := o.Validate(); err != nil {
		t.Errorf("serve refuses the operator's options: %v", err)
	}
	for file, secret := range map[string]string{
		"/etc/faucet/oidc/client-secret": "faucet-oidc/client-secret",
		"/etc/faucet/session/key":        "faucet-session/key",
	} {
		if got := secretFileOn(t, pod, file); got != secret {
			t.Errorf("%s is %q, want the file of Secret %s", file, got, secret)
		}
	}
	if len(pod.Containers[0].Env) != 0 {
		t.Errorf("env %+v: the sign-in Secrets are files", pod.Containers[0].Env)
	}
	if got := secretNames(fs); !slices.Contains(got, "faucet-oidc") || !slices.Contains(got, "faucet-session") {
		t.Errorf("secretNames %v lack the sign-in Secrets, which the controller must watch", got)
	}
}

// secretFileOn is "<Secret>/<data key>" of the Secret volume that puts
// file into the pod: mounted read-only as a directory (so the kubelet
// updates it in place), readable by the faucet's group only. It fails
// when no such volume holds the file.
func secretFileOn(t *testing.T, pod corev1.PodSpec, file string) string {
	t.Helper()
	for _, m := range pod.Containers[0].VolumeMounts {
		rel, under := strings.CutPrefix(file, m.MountPath+"/")
		if !under {
			continue
		}
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || pod.Volumes[i].Secret == nil {
			t.Fatalf("%s: mount %s is of no Secret volume", file, m.Name)
		}
		v := pod.Volumes[i].Secret
		if !m.ReadOnly || m.SubPath != "" || *v.DefaultMode != 0o440 || len(v.Items) != 1 || v.Items[0].Path != rel {
			t.Fatalf("%s: mount %+v of volume %+v: want read-only, no subPath, mode 0440, the one file", file, m, v)
		}
		return v.SecretName + "/" + v.Items[0].Key
	}
	t.Fatalf("%s is on no volume mount: %+v", file, pod.Containers[0].VolumeMounts)
	return ""
}

// TestIdentityPublicClientAndDefaults: a public client passes no secret
// file; a minimal identity passes only the issuer and client ID (and the
// session key it then needs); the anonymous tier can be turned off.
func TestIdentityPublicClientAndDefaults(t *testing.T) {
	fs := fixture(func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.Identity = &faucetv1alpha1.IdentitySpec{
			OIDC:                faucetv1alpha1.OIDCSpec{IssuerURL: "https://accounts.google.com", ClientID: "id"},
			SessionKeySecretRef: &faucetv1alpha1.SessionKeySecretReference{Name: "faucet-session"},
			// The CRD's defaults, filled in: no flag.
			SessionTTL: ptr.To(duration(12 * time.Hour)),
			Anonymous:  &faucetv1alpha1.AnonymousSpec{Enabled: ptr.To(false), AmountPercent: ptr.To(int32(100))},
		}
	})
	want := []string{"--oidc-issuer=https://accounts.google.com", "--oidc-client-id=id",
		"--session-key-file=/etc/faucet/session/session-key", "--anonymous-drips=false"}
	args := serverArgs(fs)
	if got := flagsWithPrefix(args, "oidc-", "public-url", "session-", "tier", "anonymous-"); !slices.Equal(got, want) {
		t.Errorf("sign-in flags\n %q\nwant\n %q", got, want)
	}
	checkArgsParseBack(t, fs)
	o := serverOptions(fs)
	o.Abuse.SwitchesFile = writeSwitchesFile(t, fs)
	if err := o.Validate(); err != nil {
		t.Errorf("serve refuses the operator's options: %v", err)
	}
	_, mounts := podVolumes(fs)
	if slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool { return m.Name == oidcClientSecretVolume }) {
		t.Errorf("a public client mounts a client secret: %+v", mounts)
	}
	if got := flagsWithPrefix(serverArgs(fixture()), "oidc-", "public-url", "session-", "tier", "anonymous-"); got != nil {
		t.Errorf("sign-in flags %q without spec.identity", got)
	}
}

// TestSignInSecretsRollThePod: the client secret and the session key are
// in the config hash, which a FaucetServer without sign-in keeps as it
// was; the Secrets' data never is in the pod template.
func TestSignInSecretsRollThePod(t *testing.T) {
	fs := fixture(withIdentity)
	hash := func(fs *faucetv1alpha1.FaucetServer, d secretDigests) string {
		return deploymentFor(fs, "img", d).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	base := secretDigests{keys: "k", oidcClientSecret: "o1", sessionKey: "s1"}
	newSecret, newKey := base, base
	newSecret.oidcClientSecret, newKey.sessionKey = "o2", "s2"
	if hash(fs, base) == hash(fs, newSecret) {
		t.Error("a new client secret keeps the config hash: the pods would keep the old one")
	}
	if hash(fs, base) == hash(fs, newKey) {
		t.Error("a new session key keeps the config hash: the pods would keep the old one")
	}
	plain := fixture()
	if hash(plain, secretDigests{keys: "k"}) != configHash("img", serverArgs(plain), secretDigests{keys: "k"}) {
		t.Error("a FaucetServer without sign-in hashes differently")
	}
	// What the reconciler does: the digest of the data it read.
	data := []byte("a-client-secret-of-32-characters")
	st, err := checkClientSecret(fs, data)
	if err != nil || st != nil {
		t.Fatalf("checkClientSecret: %v %v", st, err)
	}
	raw, err := json.Marshal(deploymentFor(fs, "img", base))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), string(data)) {
		t.Error("the Deployment carries the client secret")
	}
}

// TestCheckSignInSecrets: the client secret and the session key are
// checked as the faucet reads them; no message quotes them.
func TestCheckSignInSecrets(t *testing.T) {
	withKey := fixture(withIdentity)
	noKey := fixture(withIdentity, func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Identity.SessionKeySecretRef = nil })
	tests := map[string]struct {
		check   func(*faucetv1alpha1.FaucetServer, []byte) ([]string, error)
		fs      *faucetv1alpha1.FaucetServer
		data    string
		wantErr string
	}{
		"a client secret":                          {check: checkClientSecret, fs: noKey, data: "0123456789abcdef\n"},
		"an empty client secret":                   {check: checkClientSecret, fs: withKey, data: " \n", wantErr: "the client secret is empty"},
		"a short client secret with a session key": {check: checkClientSecret, fs: withKey, data: "shhh"},
		"a short client secret and no session key": {check: checkClientSecret, fs: noKey, data: "shhh-too-short", wantErr: "set spec.identity.sessionKeySecretRef"},
		"a session key":                            {check: checkSessionKey, fs: withKey, data: "  0123456789abcdef  "},
		"a short session key":                      {check: checkSessionKey, fs: withKey, data: "0123456789abcde \n", wantErr: "shorter than 16 bytes"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := tt.check(tt.fs, []byte(tt.data))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			case err != nil && strings.TrimSpace(tt.data) != "" && strings.Contains(err.Error(), strings.TrimSpace(tt.data)):
				t.Errorf("the error quotes the Secret: %v", err)
			}
		})
	}
}

// TestComputeStatusSignInSecrets: an unusable sign-in Secret stalls the
// FaucetServer with its reason, after the Secrets read before it.
func TestComputeStatusSignInSecrets(t *testing.T) {
	fs := fundingFS()
	withIdentity(fs)
	for _, obs := range []observation{
		{oidc: secretState{reason: faucetv1alpha1.ReasonOIDCClientSecretNotFound, message: `OIDC client secret Secret "faucet-oidc" not found`}},
		{session: secretState{reason: faucetv1alpha1.ReasonInvalidSessionKey, message: "session key Secret: too short"}},
	} {
		obs.keys = secretState{addresses: []string{"ST1A"}}
		want := obs.oidc
		if want.usable() {
			want = obs.session
		}
		st := computeStatus(fs, obs, t0)
		r := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionReady)
		s := meta.FindStatusCondition(st.Conditions, faucetv1alpha1.ConditionStalled)
		if r == nil || r.Reason != want.reason || s == nil || s.Reason != want.reason || s.Message != want.message {
			t.Errorf("Ready %+v Stalled %+v, want %s", r, s, want.reason)
		}
	}
}

// TestRunwayAboveTheReserve: status.funding.runway counts the STX above
// spec.budget.reserve, 0s once the balance is down to it, and stays
// absent while unknown.
func TestRunwayAboveTheReserve(t *testing.T) {
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	target := fundingTarget{nodeURLs: []string{"http://node:20443"}, addresses: []string{"ST1A"}}
	// 60 STX an hour spent; 600 STX left.
	spending := []fundingSample{{at(0), 660_000_000}, {at(60), 600_000_000}}
	tests := map[string]struct {
		reserve *int64
		samples []fundingSample
		want    *time.Duration
	}{
		"no reserve: all of it":         {samples: spending, want: ptr.To(10 * time.Hour)},
		"a reserve of 300 STX: half":    {reserve: ptr.To(int64(300_000_000)), samples: spending, want: ptr.To(5 * time.Hour)},
		"down to the reserve: 0s":       {reserve: ptr.To(int64(600_000_000)), samples: spending, want: ptr.To(time.Duration(0))},
		"below the reserve: 0s":         {reserve: ptr.To(int64(900_000_000)), samples: spending, want: ptr.To(time.Duration(0))},
		"unknown: one reading, absent":  {reserve: ptr.To(int64(300_000_000)), samples: spending[1:]},
		"not falling: absent, reserved": {reserve: ptr.To(int64(300_000_000)), samples: []fundingSample{{at(0), 600_000_000}, {at(60), 600_000_000}}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fundingFS()
			if tt.reserve != nil {
				fs.Spec.Budget = &faucetv1alpha1.BudgetSpec{Amount: ptr.To(int64(0)), Reserve: tt.reserve}
			}
			res := fundingResult{target: target, ok: true, balances: []uint64{600_000_000}, checked: at(60), samples: tt.samples}
			out := computeFunding(fs, res, nil)
			switch got := out.status.Runway; {
			case tt.want == nil && got != nil:
				t.Errorf("runway %s, want none", got.Duration)
			case tt.want != nil && (got == nil || got.Duration != *tt.want):
				t.Errorf("runway %v, want %s", got, *tt.want)
			}
			if tt.reserve != nil && tt.want != nil && !strings.Contains(out.condMessage, "before the reserve of") {
				t.Errorf("message %q does not say the runway stops at the reserve", out.condMessage)
			}
		})
	}
}

// TestRunwayColumn: kubectl get fsrv shows status.funding.runway by
// default (priority 0), after DRIPS LEFT, the other columns kept.
func TestRunwayColumn(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", "faucet.stxfaucet.dev_faucetservers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if c.Priority == 0 {
			shown = append(shown, c.Name)
		}
		if c.Name == "Runway" && (c.JSONPath != ".status.funding.runway" || c.Type != "string") {
			t.Errorf("Runway column %+v", c)
		}
	}
	want := []string{"Ready", "Reason", "URL", "Balance", "Drips Left", "Runway", "Assets", "Nodes", "Age"}
	if !slices.Equal(shown, want) {
		t.Errorf("kubectl get fsrv columns %q, want %q", shown, want)
	}
}
