package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// fixture returns a minimal FaucetServer, as a user would write it before
// API-server defaulting, modified by opts.
func fixture(opts ...func(*faucetv1alpha1.FaucetServer)) *faucetv1alpha1.FaucetServer {
	fs := &faucetv1alpha1.FaucetServer{
		ObjectMeta: metav1.ObjectMeta{Name: "faucet", Namespace: "testnet", UID: types.UID("uid-1"), Generation: 3},
		Spec: faucetv1alpha1.FaucetServerSpec{
			Node:         faucetv1alpha1.NodeSpec{URL: "http://stacks-node:20443"},
			KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
		},
	}
	for _, o := range opts {
		o(fs)
	}
	return fs
}

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// testnetSBTC is the testnet sBTC token (settings.SBTCTestnet).
const testnetSBTC = "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::sbtc-token"

// testnetTUSD is the devnet's second token.
const testnetTUSD = "ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd"

// tokenAsset is an entry of spec.assets for the token id, named name,
// amount base units per drip.
func tokenAsset(name, id string, amount int64, limits *faucetv1alpha1.AssetRateLimits) faucetv1alpha1.AssetSpec {
	return faucetv1alpha1.AssetSpec{Name: name, RateLimits: limits, Token: &faucetv1alpha1.TokenSpec{AssetIdentifier: id, Amount: amount}}
}

// sbtcAsset is the sbtc entry of spec.assets for testnet sBTC, amount sats
// per drip.
func sbtcAsset(amount int64, limits *faucetv1alpha1.AssetRateLimits) faucetv1alpha1.AssetSpec {
	return tokenAsset("sbtc", testnetSBTC, amount, limits)
}

// withAssets appends entries to spec.assets.
func withAssets(entries ...faucetv1alpha1.AssetSpec) func(*faucetv1alpha1.FaucetServer) {
	return func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Assets = append(fs.Spec.Assets, entries...) }
}

// postgres sets a Postgres store whose URI is in Secret faucet-db-app.
func postgres(replicas int32) func(*faucetv1alpha1.FaucetServer) {
	return func(fs *faucetv1alpha1.FaucetServer) {
		fs.Spec.Replicas = ptr.To(replicas)
		fs.Spec.Store = &faucetv1alpha1.StoreSpec{Postgres: &faucetv1alpha1.PostgresStore{
			URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "faucet-db-app", Key: "uri"},
		}}
	}
}

// apiTokens sets spec.abuse.apiTokens to data key key ("" for the default)
// of Secret name.
func apiTokens(name, key string) func(*faucetv1alpha1.FaucetServer) {
	return func(fs *faucetv1alpha1.FaucetServer) {
		if fs.Spec.Abuse == nil {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{}
		}
		fs.Spec.Abuse.APITokens = &faucetv1alpha1.APITokens{SecretRef: faucetv1alpha1.APITokensSecretReference{Name: name, Key: key}}
	}
}

// abuseAndPage sets every field of spec.abuse and spec.page, each away from
// its default.
func abuseAndPage(fs *faucetv1alpha1.FaucetServer) {
	fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{
		ProofOfWork: &faucetv1alpha1.ProofOfWork{
			Difficulty:    ptr.To(int32(18)),
			RaiseAbove:    &faucetv1alpha1.RateLimit{Requests: 120, Window: duration(time.Minute)},
			MaxDifficulty: ptr.To(int32(26)),
			TTL:           ptr.To(duration(2 * time.Minute)),
		},
		IPAllow:        []string{"10.0.0.0/8", "2001:db8::/32", "203.0.113.7"},
		IPDeny:         []string{"198.51.100.0/24"},
		BalanceCapUSTX: ptr.To(int64(5_000_000_000)),
	}
	apiTokens("faucet-api-tokens", "tokens.txt")(fs)
	fs.Spec.Page = &faucetv1alpha1.PageSpec{
		ExplorerTxURL: ptr.To("https://explorer.example.com/tx/{txid}?network=testnet"),
		LowDrips:      ptr.To(int32(250)),
	}
}

// TestServerArgs: the spec maps to serve's flags, in the order -h lists
// them, and only the settings that differ from serve's defaults pass a
// flag (the CRD's defaults are serve's, so a FaucetServer the API server
// filled in passes no more than one without them).
func TestServerArgs(t *testing.T) {
	const (
		nodeURL       = "--node-url=http://stacks-node:20443"
		keyFile       = "--key-file=/etc/faucet/keys/keys"
		embeddedStore = "--store=/var/lib/faucet/faucet.db"
		// Where the pod listens and how it logs: always written, in -h
		// order (listen after the store, log-format last).
		listen    = "--listen=:3999"
		logFormat = "--log-format=json"
		// The lame duck the grace period is sized for: always written,
		// none for a lone pod, 8s with several.
		shutdownDelay = "--shutdown-delay=0s"
		// The switches (spec.suspend, suspendedAssets, disabledAssets)
		// are no flags: always this file of the switches' ConfigMap,
		// which the faucet follows while it runs.
		switchesFile = "--switches-file=/etc/faucet/switches/switches.json"
	)
	minimal := []string{"serve", nodeURL, keyFile, switchesFile, embeddedStore, listen, shutdownDelay, logFormat}
	tests := map[string]struct {
		// spec changes applied to the fixture
		mutate func(*faucetv1alpha1.FaucetServer)
		// want is the full argument list
		want []string
	}{
		"minimal spec passes only the required flags and the embedded store, so server defaults apply": {
			mutate: func(*faucetv1alpha1.FaucetServer) {},
			want:   minimal,
		},
		"a custom Secret data key names the mounted file": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.KeySecretRef.Key = "faucet.txt" },
			want:   []string{"serve", nodeURL, "--key-file=/etc/faucet/keys/faucet.txt", switchesFile, embeddedStore, listen, shutdownDelay, logFormat},
		},
		"an explicit embedded store is the same file on the volume": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Store = &faucetv1alpha1.StoreSpec{Embedded: &faucetv1alpha1.EmbeddedStore{Size: ptr.To(resource.MustParse("5Gi"))}}
			},
			want: minimal,
		},
		"several nodes are one --node-url list, in order": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Node = faucetv1alpha1.NodeSpec{URLs: []string{"http://miner:20443", "https://follower.example.com:20443"}}
			},
			want: []string{"serve", "--node-url=http://miner:20443,https://follower.example.com:20443", keyFile, switchesFile, embeddedStore, listen, shutdownDelay, logFormat},
		},
		"the node's poll cadences are --node-poll-interval and --node-busy-poll-interval, after --node-timeout": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Node.Timeout = ptr.To(duration(15 * time.Second))
				fs.Spec.Node.PollInterval = ptr.To(duration(20 * time.Second))
				fs.Spec.Node.BusyPollInterval = ptr.To(duration(2 * time.Second))
			},
			want: []string{"serve", nodeURL, "--node-timeout=15s", "--node-poll-interval=20s", "--node-busy-poll-interval=2s", keyFile,
				switchesFile, embeddedStore, listen, shutdownDelay, logFormat},
		},
		"poll cadences at the CRD's defaults, as the API server fills them in, pass no flag": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Node.PollInterval = ptr.To(duration(time.Second))
				fs.Spec.Node.BusyPollInterval = ptr.To(duration(100 * time.Millisecond))
			},
			want: minimal,
		},
		"a slower idle poll alone keeps the default busy poll": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.PollInterval = ptr.To(duration(time.Minute)) },
			want:   []string{"serve", nodeURL, "--node-poll-interval=1m0s", keyFile, switchesFile, embeddedStore, listen, shutdownDelay, logFormat},
		},
		"a Postgres store is no flag: its URI comes through FAUCET_STORE, which a flag would override": {
			mutate: postgres(2),
			want:   []string{"serve", nodeURL, keyFile, switchesFile, listen, "--shutdown-delay=8s", logFormat},
		},
		"every setting maps to its flag; those equal to serve's defaults pass none": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Node.Timeout = &metav1.Duration{Duration: 15 * time.Second}
				fs.Spec.ChainID = ptr.To(int64(2147483648))
				fs.Spec.Amounts = &faucetv1alpha1.Amounts{Default: ptr.To(int64(1_000_000)), StackingPaddingPercent: ptr.To(int32(0)), Stacking: ptr.To(int64(90_000_000_000))}
				fs.Spec.Fee = &faucetv1alpha1.Fee{Min: ptr.To(int64(200)), Max: ptr.To(int64(5000)), Fallback: ptr.To(int64(300))}
				fs.Spec.Memo = ptr.To("hello faucet")
				fs.Spec.RateLimits = &faucetv1alpha1.RateLimits{
					PerAddress:         &faucetv1alpha1.RateLimit{Requests: 5, Window: duration(5 * time.Minute)}, // the default
					StackingPerAddress: &faucetv1alpha1.RateLimit{Requests: 1, Window: duration(48 * time.Hour)},  // the default
					PerIP:              &faucetv1alpha1.RateLimit{Requests: 30, Window: duration(90 * time.Second)},
					TrustedProxyHops:   ptr.To(int32(2)),
				}
				fs.Spec.LogLevel = "debug"
			},
			want: []string{"serve",
				nodeURL, "--node-timeout=15s", "--chain-id=2147483648", keyFile,
				"--amount=1000000", "--stacking-amount=90000000000", "--stacking-padding-percent=0", "--memo=hello faucet",
				"--fee-min=200", "--fee-max=5000", "--fee-fallback=300",
				"--limit-ip=30/1m30s", "--trusted-proxy-hops=2", switchesFile, embeddedStore, listen, shutdownDelay, "--log-level=debug", logFormat},
		},
		"empty optional groups pass nothing": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Amounts, fs.Spec.Fee, fs.Spec.RateLimits = &faucetv1alpha1.Amounts{}, &faucetv1alpha1.Fee{}, &faucetv1alpha1.RateLimits{}
				fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{ProofOfWork: &faucetv1alpha1.ProofOfWork{}}
				fs.Spec.Page = &faucetv1alpha1.PageSpec{}
				fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{}
			},
			want: minimal,
		},
		"every abuse and page setting maps to its flag; the tokens file is on its own volume": {
			mutate: abuseAndPage,
			want: []string{"serve", nodeURL, keyFile,
				"--pow-difficulty=18", "--pow-raise-above=120/1m0s", "--pow-max-difficulty=26", "--pow-ttl=2m0s",
				"--api-tokens-file=/etc/faucet/api-tokens/tokens.txt",
				"--ip-allow=10.0.0.0/8,2001:db8::/32,203.0.113.7/32", "--ip-deny=198.51.100.0/24",
				"--balance-cap=5000000000",
				switchesFile, embeddedStore, listen,
				"--explorer-tx-url=https://explorer.example.com/tx/{txid}?network=testnet", "--low-drips=250", shutdownDelay, logFormat},
		},
		"funding.lowThreshold is the faucet's --low-drips": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(40))}
			},
			want: []string{"serve", nodeURL, keyFile, switchesFile, embeddedStore, listen, "--low-drips=40", shutdownDelay, logFormat},
		},
		"funding.lowThreshold wins over the deprecated page.lowDrips": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				abuseAndPage(fs)
				fs.Spec.Abuse = nil
				fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(40))}
			},
			want: []string{"serve", nodeURL, keyFile, switchesFile, embeddedStore, listen,
				"--explorer-tx-url=https://explorer.example.com/tx/{txid}?network=testnet", "--low-drips=40", shutdownDelay, logFormat},
		},
		"a lowThreshold of 0 (only empty) is --low-drips=1, the least the faucet takes and the same to it": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Funding = &faucetv1alpha1.FundingSpec{LowThreshold: ptr.To(int64(0))}
			},
			want: []string{"serve", nodeURL, keyFile, switchesFile, embeddedStore, listen, "--low-drips=1", shutdownDelay, logFormat},
		},
		"batching maps to its flags, after the memo": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Memo = ptr.To("hi")
				fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{
					MaxRecipients: ptr.To(int32(150)),
					Window:        ptr.To(duration(1500 * time.Millisecond)),
					Contract:      ptr.To("ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.send-many-memo"),
				}
			},
			want: []string{"serve", nodeURL, keyFile, "--memo=hi",
				"--batch-max=150", "--batch-window=1.5s",
				"--batch-contract=ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM.send-many-memo", switchesFile, embeddedStore, listen, shutdownDelay, logFormat},
		},
		"batching with the CRD's defaults filled in (200, no window, the default contract) passes nothing": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{
					MaxRecipients: ptr.To(int32(200)),
					Contract:      ptr.To("ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.send-many-memo"),
				}
			},
			want: minimal,
		},
		"only the batching fields set pass flags": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{MaxRecipients: ptr.To(int32(50))}
			},
			want: []string{"serve", nodeURL, keyFile, "--batch-max=50", switchesFile, embeddedStore, listen, shutdownDelay, logFormat},
		},
		"batching off": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{MaxRecipients: ptr.To(int32(0))}
			},
			want: []string{"serve", nodeURL, keyFile, "--batch-max=0", switchesFile, embeddedStore, listen, shutdownDelay, logFormat},
		},
		"the API tokens key defaults to tokens": {
			mutate: apiTokens("faucet-api-tokens", ""),
			want: []string{"serve", nodeURL, keyFile, "--api-tokens-file=/etc/faucet/api-tokens/tokens",
				switchesFile, embeddedStore, listen, shutdownDelay, logFormat},
		},
		"each token of spec.assets is a --token, in spec order, with its limits (the CRD's defaults filled in or not)": {
			mutate: withAssets(
				sbtcAsset(100_000, &faucetv1alpha1.AssetRateLimits{
					PerAddress: &faucetv1alpha1.RateLimit{Requests: 5, Window: duration(5 * time.Minute)},
					PerIP:      &faucetv1alpha1.RateLimit{Requests: 30, Window: duration(5 * time.Minute)},
				}),
				tokenAsset("tusd", testnetTUSD, 10_000_000, &faucetv1alpha1.AssetRateLimits{
					PerAddress: &faucetv1alpha1.RateLimit{Requests: 2, Window: duration(time.Hour)},
				}),
			),
			want: []string{"serve", nodeURL, keyFile, switchesFile,
				"--token=name=sbtc,asset=" + testnetSBTC + ",amount=100000,limit-address=5/5m0s,limit-ip=30/5m0s;" +
					"name=tusd,asset=" + testnetTUSD + ",amount=10000000,limit-address=2/1h0m0s,limit-ip=30/5m0s",
				embeddedStore, listen, shutdownDelay, logFormat},
		},
		"sbtc without an identifier is the contract the node names in /v2/pox: no asset=": {
			mutate: withAssets(faucetv1alpha1.AssetSpec{Name: "sbtc", Token: &faucetv1alpha1.TokenSpec{Amount: 1}}),
			want: []string{"serve", nodeURL, keyFile, switchesFile, "--token=name=sbtc,amount=1,limit-address=5/5m0s,limit-ip=30/5m0s",
				embeddedStore, listen, shutdownDelay, logFormat},
		},
		"a token's lowThreshold is its low-drips; 0 is 1 to the faucet, as for --low-drips": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				tusd, sbtc := tokenAsset("tusd", testnetTUSD, 7, nil), sbtcAsset(3, nil)
				tusd.LowThreshold, sbtc.LowThreshold = ptr.To(int64(25)), ptr.To(int64(0))
				withAssets(tusd, sbtc)(fs)
			},
			want: []string{"serve", nodeURL, keyFile, switchesFile,
				"--token=name=tusd,asset=" + testnetTUSD + ",amount=7,limit-address=5/5m0s,limit-ip=30/5m0s,low-drips=25;" +
					"name=sbtc,asset=" + testnetSBTC + ",amount=3,limit-address=5/5m0s,limit-ip=30/5m0s,low-drips=1",
				embeddedStore, listen, shutdownDelay, logFormat},
		},
		"an empty list passes nothing": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Assets = faucetv1alpha1.AssetList{} },
			want:   minimal,
		},
		"token refills follow the treasury's flags": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{KeySecretRef: faucetv1alpha1.TreasuryKeyReference{Name: "holder"}}
				sb := sbtcAsset(1000, &faucetv1alpha1.AssetRateLimits{PerIP: &faucetv1alpha1.RateLimit{Requests: 3, Window: duration(time.Hour)}})
				sb.Token.RefillBelow, sb.Token.RefillAmount = ptr.To(int64(20_000)), ptr.To(int64(200_000))
				withAssets(sb)(fs)
			},
			want: []string{"serve", nodeURL, keyFile, "--treasury-key-file=/etc/faucet/treasury/keys", switchesFile,
				"--token=name=sbtc,asset=" + testnetSBTC + ",amount=1000,limit-address=5/5m0s,limit-ip=3/1h0m0s,refill-below=20000,refill-amount=200000",
				embeddedStore, listen, shutdownDelay, logFormat},
		},
		"token refills without a treasury, which the CRD refuses, pass nothing the server would refuse": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				sb := sbtcAsset(1000, nil)
				sb.Token.RefillBelow = ptr.To(int64(20_000))
				withAssets(sb)(fs)
			},
			want: []string{"serve", nodeURL, keyFile, switchesFile,
				"--token=name=sbtc,asset=" + testnetSBTC + ",amount=1000,limit-address=5/5m0s,limit-ip=30/5m0s",
				embeddedStore, listen, shutdownDelay, logFormat},
		},
		"the switches pass no flag: they are in the ConfigMap the faucet follows": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Suspend = true
				fs.Spec.SuspendedAssets = []string{"stx"}
				fs.Spec.DisabledAssets = []string{"sbtc", "btc"}
			},
			want: minimal,
		},
		"mcp.enabled false is --mcp=false": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.MCP = &faucetv1alpha1.MCPSpec{Enabled: ptr.To(false)} },
			want:   []string{"serve", nodeURL, keyFile, switchesFile, embeddedStore, listen, shutdownDelay, "--mcp=false", logFormat},
		},
		"mcp.enabled true, the CRD's default and serve's, passes nothing": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.MCP = &faucetv1alpha1.MCPSpec{Enabled: ptr.To(true)} },
			want:   minimal,
		},
		"an empty mcp, before the CRD's default, passes nothing": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.MCP = &faucetv1alpha1.MCPSpec{} },
			want:   minimal,
		},
		"a proof of work with the CRD's defaults filled in passes nothing": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{ProofOfWork: &faucetv1alpha1.ProofOfWork{
					Difficulty: ptr.To(int32(0)), MaxDifficulty: ptr.To(int32(24)), TTL: ptr.To(duration(5 * time.Minute)),
				}}
			},
			want: minimal,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture(tt.mutate)
			got := serverArgs(fs)
			if !slices.Equal(got, tt.want) {
				t.Errorf("serverArgs:\n got %q\nwant %q", got, tt.want)
			}
			checkArgsParseBack(t, fs)
		})
	}
}

func TestDeploymentFor(t *testing.T) {
	const image = "ghcr.io/stxfaucet/faucet:v1"
	digests := secretDigests{keys: "digest-1", store: "digest-2"}
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// check inspects the built Deployment
		check func(t *testing.T, d *appsv1.Deployment)
	}{
		"one pod, Recreate, owned by the FaucetServer": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				if d.Name != "faucet" || d.Namespace != "testnet" {
					t.Errorf("name %s/%s", d.Namespace, d.Name)
				}
				if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
					t.Errorf("replicas %d strategy %s, want 1 Recreate", *d.Spec.Replicas, d.Spec.Strategy.Type)
				}
				checkOwner(t, d.OwnerReferences)
				if d.APIVersion != "apps/v1" || d.Kind != "Deployment" {
					t.Errorf("TypeMeta %v, server-side apply needs it", d.TypeMeta)
				}
			},
		},
		"hardened pod and container": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				psc := pod.SecurityContext
				if !*psc.RunAsNonRoot || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("pod securityContext %+v", psc)
				}
				if *pod.AutomountServiceAccountToken || pod.ServiceAccountName != "faucet" {
					t.Errorf("service account %q automount %v", pod.ServiceAccountName, *pod.AutomountServiceAccountToken)
				}
				sc := pod.Containers[0].SecurityContext
				if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
					!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
					sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("container securityContext %+v", sc)
				}
			},
		},
		"keys come from a read-only Secret volume, never env": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				c := pod.Containers[0]
				if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
					t.Errorf("container has env %v / envFrom %v", c.Env, c.EnvFrom)
				}
				if !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].MountPath != "/etc/faucet/keys" || pod.Volumes[0].Name != c.VolumeMounts[0].Name {
					t.Errorf("volume mounts %+v", c.VolumeMounts)
				}
				v := pod.Volumes[0].Secret
				if v == nil || v.SecretName != "faucet-keys" || len(v.Items) != 1 || v.Items[0].Key != "keys" || *v.DefaultMode != 0o440 {
					t.Errorf("secret volume %+v", v)
				}
				if !slices.Contains(c.Args, "--key-file=/etc/faucet/keys/keys") {
					t.Errorf("args %q lack --key-file", c.Args)
				}
			},
		},
		"no API tokens: no tokens volume": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				for _, v := range pod.Volumes {
					if v.Name == "api-tokens" {
						t.Errorf("volume %+v without spec.abuse.apiTokens", v)
					}
				}
				for _, a := range pod.Containers[0].Args {
					if strings.HasPrefix(a, "--api-tokens-file") {
						t.Errorf("arg %q without spec.abuse.apiTokens", a)
					}
				}
			},
		},
		"API tokens come from a read-only Secret volume of their own, only the selected key, never env": {
			mutate: abuseAndPage,
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				c := pod.Containers[0]
				if len(c.Env) != 0 || len(c.EnvFrom) != 0 {
					t.Errorf("container has env %v / envFrom %v", c.Env, c.EnvFrom)
				}
				i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "api-tokens" })
				if i < 0 || !c.VolumeMounts[i].ReadOnly || c.VolumeMounts[i].MountPath != "/etc/faucet/api-tokens" || c.VolumeMounts[i].SubPath != "" {
					t.Fatalf("volume mounts %+v, want api-tokens read-only at /etc/faucet/api-tokens without subPath (the kubelet updates it in place)", c.VolumeMounts)
				}
				j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "api-tokens" })
				if j < 0 {
					t.Fatalf("volumes %+v lack api-tokens", pod.Volumes)
				}
				want := &corev1.SecretVolumeSource{
					SecretName:  "faucet-api-tokens",
					Items:       []corev1.KeyToPath{{Key: "tokens.txt", Path: "tokens.txt"}},
					DefaultMode: ptr.To(int32(0o440)),
				}
				if !equalJSON(pod.Volumes[j].Secret, want) {
					t.Errorf("tokens volume %+v, want %+v", pod.Volumes[j].Secret, want)
				}
				if !slices.Contains(c.Args, "--api-tokens-file=/etc/faucet/api-tokens/tokens.txt") {
					t.Errorf("args %q lack --api-tokens-file", c.Args)
				}
				if pod.Volumes[0].Name != "keys" || pod.Volumes[0].Secret.SecretName != "faucet-keys" {
					t.Errorf("the key volume moved: %+v", pod.Volumes)
				}
			},
		},
		"embedded store: one pod, Recreate, the claim mounted writable and --store on it": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Replicas = ptr.To(int32(3)) // the CRD refuses this; the builder still runs one pod
			},
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				c := pod.Containers[0]
				if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || d.Spec.Strategy.RollingUpdate != nil {
					t.Errorf("replicas %d strategy %+v, want 1 Recreate: the volume is ReadWriteOnce", *d.Spec.Replicas, d.Spec.Strategy)
				}
				// The keys, the switches, then the data volume.
				if len(c.VolumeMounts) != 3 || c.VolumeMounts[2].Name != "data" || c.VolumeMounts[2].MountPath != "/var/lib/faucet" || c.VolumeMounts[2].ReadOnly {
					t.Errorf("volume mounts %+v, want the data volume writable at /var/lib/faucet", c.VolumeMounts)
				}
				if len(pod.Volumes) != 3 || pod.Volumes[2].PersistentVolumeClaim == nil || pod.Volumes[2].PersistentVolumeClaim.ClaimName != "faucet-data" {
					t.Errorf("volumes %+v, want the claim faucet-data", pod.Volumes)
				}
				if !slices.Contains(c.Args, "--store=/var/lib/faucet/faucet.db") {
					t.Errorf("args %q lack the store on the volume", c.Args)
				}
				if len(c.Env) != 0 {
					t.Errorf("env %+v", c.Env)
				}
				psc := pod.SecurityContext
				if psc.FSGroup == nil || *psc.FSGroup != 65532 || *psc.RunAsUser != 65532 {
					t.Errorf("pod securityContext %+v: the non-root user must own the volume", psc)
				}
			},
		},
		"postgres store: FAUCET_STORE from the Secret, spec.replicas, gap-free RollingUpdate, no volume": {
			mutate: postgres(3),
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				c := pod.Containers[0]
				if *d.Spec.Replicas != 3 {
					t.Errorf("replicas %d, want 3", *d.Spec.Replicas)
				}
				st := d.Spec.Strategy
				if st.Type != appsv1.RollingUpdateDeploymentStrategyType || st.RollingUpdate == nil ||
					*st.RollingUpdate.MaxUnavailable != intstr.FromInt32(0) || *st.RollingUpdate.MaxSurge != intstr.FromInt32(1) {
					t.Errorf("strategy %+v, want RollingUpdate with maxUnavailable 0, maxSurge 1", st)
				}
				want := []corev1.EnvVar{{Name: "FAUCET_STORE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "faucet-db-app"}, Key: "uri",
				}}}}
				if !equalJSON(c.Env, want) {
					t.Errorf("env %+v, want FAUCET_STORE from secretKeyRef faucet-db-app/uri", c.Env)
				}
				var names []string
				for _, v := range pod.Volumes {
					names = append(names, v.Name)
				}
				if !slices.Equal(names, []string{"keys", "switches"}) || len(c.VolumeMounts) != 2 {
					t.Errorf("volumes %+v mounts %+v, want only the keys and the switches", pod.Volumes, c.VolumeMounts)
				}
				for _, a := range c.Args {
					if strings.HasPrefix(a, "--store") {
						t.Errorf("arg %q would override FAUCET_STORE", a)
					}
				}
				if c.ReadinessProbe.HTTPGet.Path != "/readyz?exclude=btc" {
					t.Errorf("readiness probe %s: a replica that owns no key must drop out of the Service", c.ReadinessProbe.HTTPGet.Path)
				}
			},
		},
		"postgres store: the key defaults to uri, as in CloudNativePG's app Secret": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				postgres(1)(fs)
				fs.Spec.Store.Postgres.URISecretRef.Key = ""
			},
			check: func(t *testing.T, d *appsv1.Deployment) {
				if ref := d.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef; ref.Key != "uri" {
					t.Errorf("secretKeyRef %+v", ref)
				}
			},
		},
		"probes and port": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				c := d.Spec.Template.Spec.Containers[0]
				if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz?exclude=btc" {
					t.Errorf("probes %s %s", c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
				}
				// A replacement pod joins the Service at the first
				// readiness tick after it can serve.
				if c.ReadinessProbe.PeriodSeconds > 2 {
					t.Errorf("readiness probed every %ds: a replacement pod would wait that long to serve", c.ReadinessProbe.PeriodSeconds)
				}
				if c.Ports[0].ContainerPort != 3999 || c.Ports[0].Name != "http" {
					t.Errorf("ports %+v", c.Ports)
				}
			},
		},
		"default image is the manager's": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
					t.Errorf("image %q, want %q", got, image)
				}
			},
		},
		"spec.image overrides": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Image = "example.com/faucet:dev" },
			check: func(t *testing.T, d *appsv1.Deployment) {
				if got := d.Spec.Template.Spec.Containers[0].Image; got != "example.com/faucet:dev" {
					t.Errorf("image %q", got)
				}
			},
		},
		"spread, pull Secrets and extra env are copied; extra env follows the operator's FAUCET_STORE": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				postgres(3)(fs)
				fs.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelInstance: "faucet"}},
				}}
				fs.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
				fs.Spec.ExtraEnv = []corev1.EnvVar{
					{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
					{Name: "HTTPS_PROXY", Value: "http://proxy:3128"},
				}
			},
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone" {
					t.Errorf("topology spread %+v", pod.TopologySpreadConstraints)
				}
				if !equalJSON(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) {
					t.Errorf("image pull Secrets %+v", pod.ImagePullSecrets)
				}
				var names []string
				for _, e := range pod.Containers[0].Env {
					names = append(names, e.Name)
				}
				if !slices.Equal(names, []string{"FAUCET_STORE", "GOMEMLIMIT", "HTTPS_PROXY"}) {
					t.Errorf("env %q, want FAUCET_STORE, then spec.extraEnv in order", names)
				}
				if pod.Containers[0].Env[1].ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
					t.Errorf("env %+v: valueFrom lost", pod.Containers[0].Env[1])
				}
			},
		},
		"no spread, pull Secrets or extra env unless set": {
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				if pod.TopologySpreadConstraints != nil || pod.ImagePullSecrets != nil || pod.Containers[0].Env != nil {
					t.Errorf("spread %v, pull Secrets %v, env %v, want none: a nil keeps an upgraded operator's apply unchanged",
						pod.TopologySpreadConstraints, pod.ImagePullSecrets, pod.Containers[0].Env)
				}
			},
		},
		"pod overrides are copied; selector labels cannot be overridden": {
			mutate: func(fs *faucetv1alpha1.FaucetServer) {
				fs.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}
				fs.Spec.NodeSelector = map[string]string{"pool": "faucets"}
				fs.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
				fs.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
				fs.Spec.PriorityClassName = "low"
				fs.Spec.PodLabels = map[string]string{"team": "devrel", labelInstance: "hijack"}
				fs.Spec.PodAnnotations = map[string]string{"prometheus.io/scrape": "true", ConfigHashAnnotation: "hijack"}
			},
			check: func(t *testing.T, d *appsv1.Deployment) {
				pod := d.Spec.Template
				if pod.Spec.Containers[0].Resources.Requests.Cpu().String() != "50m" {
					t.Errorf("resources %+v", pod.Spec.Containers[0].Resources)
				}
				if pod.Spec.NodeSelector["pool"] != "faucets" || len(pod.Spec.Tolerations) != 1 ||
					pod.Spec.Affinity == nil || pod.Spec.PriorityClassName != "low" {
					t.Errorf("scheduling %+v", pod.Spec)
				}
				if pod.Labels["team"] != "devrel" || pod.Labels[labelInstance] != "faucet" {
					t.Errorf("pod labels %v", pod.Labels)
				}
				if pod.Annotations["prometheus.io/scrape"] != "true" || pod.Annotations[ConfigHashAnnotation] == "hijack" {
					t.Errorf("pod annotations %v", pod.Annotations)
				}
				for k, v := range d.Spec.Selector.MatchLabels {
					if pod.Labels[k] != v {
						t.Errorf("selector %s=%s does not match pod label %q", k, v, pod.Labels[k])
					}
				}
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			before := fs.DeepCopy()
			d := deploymentFor(fs, image, digests)
			tt.check(t, d)
			if !equalJSON(before, fs) {
				t.Error("deploymentFor modified its input")
			}
		})
	}
}

func TestConfigHashRollsThePod(t *testing.T) {
	hash := func(fs *faucetv1alpha1.FaucetServer, digest string) string {
		return deploymentFor(fs, "img", secretDigests{keys: digest}).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	base := hash(fixture(), "keys-v1")
	if base == "" || base != hash(fixture(), "keys-v1") {
		t.Fatal("hash missing or not deterministic")
	}
	if hash(fixture(), "keys-v2") == base {
		t.Error("rotating the keys did not change the hash")
	}
	if hash(fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Memo = ptr.To("other") }), "keys-v1") == base {
		t.Error("changing the spec did not change the hash")
	}
	if hash(fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.PodLabels = map[string]string{"a": "b"} }), "keys-v1") != base {
		t.Error("a pod label changed the server config hash")
	}
	if strings.Contains(base, "keys-v1") {
		t.Error("the hash carries its input")
	}
	// The API tokens Secret has no digest: the faucet re-reads the file,
	// so editing the Secret must not roll the pods (secretDigests has no
	// place for it). Choosing another Secret changes the pod template's
	// volume, which rolls them.
	if hash(fixture(apiTokens("tokens-a", "")), "keys-v1") == base {
		t.Error("adding API tokens did not change the hash")
	}
	pg := fixture(postgres(2))
	uriHash := func(digest string) string {
		return deploymentFor(pg, "img", secretDigests{keys: "keys-v1", store: digest}).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	if uriHash("uri-v1") == uriHash("uri-v2") {
		t.Error("changing the Postgres URI did not change the hash")
	}
}

func TestPersistentVolumeClaimFor(t *testing.T) {
	gi := resource.MustParse
	existing := func(class *string, size string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: class,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: gi(size)}},
			},
			Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
	}
	embedded := func(size string, class *string) func(*faucetv1alpha1.FaucetServer) {
		return func(fs *faucetv1alpha1.FaucetServer) {
			e := &faucetv1alpha1.EmbeddedStore{StorageClassName: class}
			if size != "" {
				e.Size = ptr.To(gi(size))
			}
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{Embedded: e}
		}
	}
	tests := map[string]struct {
		// mutate changes the fixture's spec
		mutate func(*faucetv1alpha1.FaucetServer)
		// existing is the claim as it is in the cluster, nil before creation
		existing *corev1.PersistentVolumeClaim
		// wantSize and wantClass are the claim's expected request and class
		wantSize  string
		wantClass *string
	}{
		"no store at all: the default size": {wantSize: "1Gi"},
		"size and class from the spec": {
			mutate: embedded("5Gi", ptr.To("fast")), wantSize: "5Gi", wantClass: ptr.To("fast"),
		},
		"a bound claim grows": {
			mutate: embedded("5Gi", nil), existing: existing(nil, "1Gi", corev1.ClaimBound), wantSize: "5Gi",
		},
		"a claim never shrinks": {
			mutate: embedded("1Gi", nil), existing: existing(nil, "5Gi", corev1.ClaimBound), wantSize: "5Gi",
		},
		"a pending claim keeps its size until it is bound: Kubernetes refuses to resize it": {
			mutate: embedded("5Gi", nil), existing: existing(nil, "1Gi", corev1.ClaimPending), wantSize: "1Gi",
		},
		"the class the claim was created with stays, e.g. the default one admission filled in": {
			mutate: embedded("1Gi", nil), existing: existing(ptr.To("standard"), "1Gi", corev1.ClaimBound),
			wantSize: "1Gi", wantClass: ptr.To("standard"),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fs := fixture()
			if tt.mutate != nil {
				tt.mutate(fs)
			}
			pvc := persistentVolumeClaimFor(fs, tt.existing)
			if pvc.Name != "faucet-data" || pvc.Namespace != "testnet" || pvc.APIVersion != "v1" || pvc.Kind != "PersistentVolumeClaim" {
				t.Errorf("claim %s/%s %v", pvc.Namespace, pvc.Name, pvc.TypeMeta)
			}
			checkOwner(t, pvc.OwnerReferences)
			if pvc.Labels[labelManagedBy] != FieldManager {
				t.Errorf("labels %v lack %s, so the manager's cache would not see it", pvc.Labels, labelManagedBy)
			}
			if !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
				t.Errorf("access modes %v", pvc.Spec.AccessModes)
			}
			if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(gi(tt.wantSize)) != 0 {
				t.Errorf("size %s, want %s", got.String(), tt.wantSize)
			}
			if !equalJSON(pvc.Spec.StorageClassName, tt.wantClass) {
				t.Errorf("storageClassName %v, want %v", ptr.Deref(pvc.Spec.StorageClassName, "<nil>"), ptr.Deref(tt.wantClass, "<nil>"))
			}
			volumes := deploymentFor(fs, "img", secretDigests{}).Spec.Template.Spec.Volumes
			if i := slices.IndexFunc(volumes, func(v corev1.Volume) bool { return v.Name == "data" }); i < 0 ||
				volumes[i].PersistentVolumeClaim == nil || volumes[i].PersistentVolumeClaim.ClaimName != pvc.Name {
				t.Errorf("the Deployment mounts another claim than %s: %+v", pvc.Name, volumes)
			}
		})
	}
}

func TestServiceFor(t *testing.T) {
	tests := map[string]struct {
		// service is spec.service
		service *faucetv1alpha1.ServiceSpec
		// wantType and wantPort are the expected Service type and port
		wantType corev1.ServiceType
		wantPort int32
		// wantURL is the status URL derived from the Service
		wantURL string
	}{
		"defaults": {
			wantType: corev1.ServiceTypeClusterIP, wantPort: 3999, wantURL: "http://faucet.testnet.svc:3999",
		},
		"load balancer on port 80": {
			service:  &faucetv1alpha1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Port: ptr.To(int32(80)), Annotations: map[string]string{"lb": "internal"}},
			wantType: corev1.ServiceTypeLoadBalancer, wantPort: 80, wantURL: "http://faucet.testnet.svc:80",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			svc := serviceFor(fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Service = tt.service }))
			if svc.Spec.Type != tt.wantType || svc.Spec.Ports[0].Port != tt.wantPort || svc.Spec.Ports[0].TargetPort.StrVal != "http" {
				t.Errorf("service spec %+v", svc.Spec)
			}
			if svc.Spec.Selector[labelInstance] != "faucet" || svc.Spec.Selector[labelName] != appName {
				t.Errorf("selector %v", svc.Spec.Selector)
			}
			if tt.service != nil && svc.Annotations["lb"] != "internal" {
				t.Errorf("annotations %v", svc.Annotations)
			}
			checkOwner(t, svc.OwnerReferences)
			if got := serviceURL(svc); got != tt.wantURL {
				t.Errorf("serviceURL %q, want %q", got, tt.wantURL)
			}
		})
	}
}

func TestServiceAccountFor(t *testing.T) {
	sa := serviceAccountFor(fixture())
	if sa.Name != "faucet" || sa.Namespace != "testnet" || *sa.AutomountServiceAccountToken {
		t.Errorf("service account %+v", sa)
	}
	if sa.Labels[labelManagedBy] != FieldManager {
		t.Errorf("labels %v lack %s, so the manager's cache would not see it", sa.Labels, labelManagedBy)
	}
	checkOwner(t, sa.OwnerReferences)
}

func TestPodDisruptionBudgetFor(t *testing.T) {
	for name, fs := range map[string]*faucetv1alpha1.FaucetServer{
		"embedded store: one pod":                           fixture(),
		"embedded store, replicas set (refused by the CRD)": fixture(func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Replicas = ptr.To(int32(3)) }),
		"postgres, one replica":                             fixture(postgres(1)),
	} {
		if pdb := podDisruptionBudgetFor(fs); pdb != nil {
			t.Errorf("%s: budget %+v, want none for a single pod", name, pdb.Spec)
		}
	}

	fs := fixture(postgres(3))
	before := fs.DeepCopy()
	pdb := podDisruptionBudgetFor(fs)
	if pdb == nil {
		t.Fatal("no budget for 3 replicas")
	}
	if !equalJSON(before, fs) {
		t.Error("podDisruptionBudgetFor modified its input")
	}
	if pdb.Name != "faucet" || pdb.Namespace != "testnet" || pdb.APIVersion != "policy/v1" || pdb.Kind != "PodDisruptionBudget" {
		t.Errorf("budget %s/%s %v", pdb.Namespace, pdb.Name, pdb.TypeMeta)
	}
	if pdb.Spec.MaxUnavailable == nil || *pdb.Spec.MaxUnavailable != intstr.FromInt32(1) || pdb.Spec.MinAvailable != nil {
		t.Errorf("budget %+v, want maxUnavailable 1", pdb.Spec)
	}
	if pdb.Labels[labelManagedBy] != FieldManager {
		t.Errorf("labels %v lack %s, so the manager's cache would not see it", pdb.Labels, labelManagedBy)
	}
	checkOwner(t, pdb.OwnerReferences)
	d := deploymentFor(fs, "img", secretDigests{})
	if !equalJSON(pdb.Spec.Selector, d.Spec.Selector) {
		t.Errorf("budget selector %v, Deployment selector %v", pdb.Spec.Selector, d.Spec.Selector)
	}
}

func checkOwner(t *testing.T, refs []metav1.OwnerReference) {
	t.Helper()
	if len(refs) != 1 {
		t.Fatalf("owner references %v, want one", refs)
	}
	r := refs[0]
	if r.Kind != "FaucetServer" || r.APIVersion != "faucet.stxfaucet.dev/v1alpha1" || r.Name != "faucet" ||
		r.UID != "uid-1" || !*r.Controller || !*r.BlockOwnerDeletion {
		t.Errorf("owner reference %+v", r)
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestTreasury(t *testing.T) {
	plain := deploymentFor(fixture(), "img", secretDigests{keys: "k"})
	for _, a := range plain.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--treasury") || strings.HasPrefix(a, "--refill") {
			t.Errorf("flag %s without spec.treasury", a)
		}
	}
	withTreasury := func(key string, below, amount *int64) *faucetv1alpha1.FaucetServer {
		return fixture(func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{
				KeySecretRef:    faucetv1alpha1.TreasuryKeyReference{Name: "holder", Key: key},
				RefillBelowUSTX: below, RefillAmountUSTX: amount,
			}
		})
	}
	fs := withTreasury("", ptr.To(int64(1000)), ptr.To(int64(5000)))
	d := deploymentFor(fs, "img", secretDigests{keys: "k", treasury: "t1"})
	c := d.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"--treasury-key-file=/etc/faucet/treasury/keys", "--refill-below=1000", "--refill-amount=5000"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "treasury" && m.MountPath == "/etc/faucet/treasury" && m.ReadOnly && m.SubPath == ""
	}) {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == "treasury" && v.Secret != nil && v.Secret.SecretName == "holder" &&
			len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "keys" && *v.Secret.DefaultMode == 0o440
	}) {
		t.Errorf("volumes %+v", d.Spec.Template.Spec.Volumes)
	}
	only := deploymentFor(withTreasury("holder.hex", nil, nil), "img", secretDigests{keys: "k", treasury: "t1"}).Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(only, "--treasury-key-file=/etc/faucet/treasury/holder.hex") || slices.ContainsFunc(only, func(a string) bool { return strings.HasPrefix(a, "--refill") }) {
		t.Errorf("args %v", only)
	}
	hash := func(digest string) string {
		return deploymentFor(fs, "img", secretDigests{keys: "k", treasury: digest}).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	if hash("t1") == hash("t2") {
		t.Error("rotating the treasury key did not change the hash")
	}
	if got := secretNames(fs); !slices.Contains(got, "holder") {
		t.Errorf("secretNames %v lack the treasury Secret", got)
	}
}

// TestTokensRollThePod: adding a token or changing one changes the config
// hash, so the pods restart with the new flags; the args of a FaucetServer
// without any are what they were, so upgrading the operator rolls nothing.
func TestTokensRollThePod(t *testing.T) {
	hash := func(fs *faucetv1alpha1.FaucetServer) string {
		return deploymentFor(fs, "img", secretDigests{keys: "k"}).Spec.Template.Annotations[ConfigHashAnnotation]
	}
	withSBTC := func(amount int64, more ...faucetv1alpha1.AssetSpec) *faucetv1alpha1.FaucetServer {
		return fixture(withAssets(append([]faucetv1alpha1.AssetSpec{sbtcAsset(amount, nil)}, more...)...))
	}
	plain := fixture()
	if hash(plain) == hash(withSBTC(1000)) || hash(withSBTC(1000)) == hash(withSBTC(2000)) ||
		hash(withSBTC(1000)) == hash(withSBTC(1000, tokenAsset("tusd", testnetTUSD, 1, nil))) {
		t.Error("adding a token or changing its amount keeps the config hash")
	}
	for _, a := range deploymentFor(plain, "img", secretDigests{keys: "k"}).Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--token") || strings.HasPrefix(a, "--sbtc") {
			t.Errorf("flag %s without spec.assets", a)
		}
	}
}

// TestConfigHashStableWithoutTreasury pins the hash of a FaucetServer
// without treasury to the formula of earlier operators, so upgrading does
// not roll every faucet.
func TestConfigHashStableWithoutTreasury(t *testing.T) {
	args := []string{"serve", "--x=1"}
	h := sha256.Sum256([]byte("img\x00serve\x00--x=1\x00k\x00"))
	if got, want := configHash("img", args, secretDigests{keys: "k"}), hex.EncodeToString(h[:])[:32]; got != want {
		t.Errorf("hash %s, want %s", got, want)
	}
}
