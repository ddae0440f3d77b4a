package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// DefaultKeySecretKey is the Secret data key read when keySecretRef.key
	// is empty.
	DefaultKeySecretKey = "keys"

	// DefaultStoreURIKey is the Secret data key read when
	// store.postgres.uriSecretRef.key is empty: the key CloudNativePG's
	// <cluster>-app Secret holds the connection URI under.
	DefaultStoreURIKey = "uri"

	// DefaultEmbeddedStoreSize is the size of the embedded store's volume
	// when store.embedded.size is unset.
	DefaultEmbeddedStoreSize = "1Gi"

	// DefaultAPITokensSecretKey is the Secret data key read when
	// abuse.apiTokens.secretRef.key is empty.
	DefaultAPITokensSecretKey = "tokens"

	// DefaultBTCKeySecretKey is the Secret data key read when
	// the btc asset's keySecretRef.key is empty.
	DefaultBTCKeySecretKey = "key"

	// DefaultBTCCredentialsSecretKey is the Secret data key read when
	// the btc asset's rpc.credentialsSecretRef.key is empty.
	DefaultBTCCredentialsSecretKey = "credentials"

	// DefaultBTCNetwork is the btc asset's network when unset.
	DefaultBTCNetwork = "regtest"

	// DefaultBTCAmount, DefaultBTCLargeAmount and DefaultBTCXLargeAmount
	// are the btc asset's amounts when unset, in sats: 0.0001, 0.01 and 0.5
	// BTC, the sizes of the BTC faucet this one replaces, and the
	// defaults of `faucet serve --btc-amount` and its siblings.
	DefaultBTCAmount       = 10_000
	DefaultBTCLargeAmount  = 1_000_000
	DefaultBTCXLargeAmount = 50_000_000

	// DefaultLowThreshold is spec.funding.lowThreshold when unset: the
	// number of default drips left below which Funded turns False, reason
	// Low.
	DefaultLowThreshold = 100

	// DefaultOIDCClientSecretKey is the Secret data key read when
	// identity.oidc.clientSecretRef.key is empty.
	DefaultOIDCClientSecretKey = "client-secret"

	// DefaultSessionKeySecretKey is the Secret data key read when
	// identity.sessionKeySecretRef.key is empty.
	DefaultSessionKeySecretKey = "session-key"

	// DefaultNodeHeadersSecretKey is the Secret data key read when
	// node.headersSecretRef.key is empty.
	DefaultNodeHeadersSecretKey = "headers"
)

// Store kinds, as status.store reports them.
const (
	StoreEmbedded = "embedded"
	StorePostgres = "postgres"
)

// FaucetServerSpec is the desired state of a faucet.
//
// Each faucet key must have a single writer, or two pods would hand out the
// same nonces. With the embedded store (the default) the faucet therefore
// runs one pod at most (none while spec.replicas is 0), replaced with the
// Recreate strategy; with a Postgres store several replicas share the keys,
// each key owned by one replica at a time, and roll without a gap.
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas <= 1 || (has(self.store) && has(self.store.postgres))",message="spec.replicas must be 0 or 1 with the embedded store: its volume has a single writer; use spec.store.postgres to run several replicas"
// +kubebuilder:validation:XValidation:rule="has(self.treasury) || !has(self.assets) || self.assets.all(a, !has(a.token) || (!has(a.token.refillBelow) && !has(a.token.refillAmount)))",message="spec.assets[].token.refillBelow and refillAmount tune the refills from spec.treasury: set spec.treasury, or remove them"
// +kubebuilder:validation:XValidation:rule="!has(self.suspendedAssets) || self.suspendedAssets.all(n, n == 'stx' || (has(self.assets) && self.assets.exists(a, a.name == n)))",message="spec.suspendedAssets names stx or the name of an entry of spec.assets"
// +kubebuilder:validation:XValidation:rule="!has(self.disabledAssets) || self.disabledAssets.all(n, n == 'stx' || n == 'sbtc' || n == 'btc' || (has(self.assets) && self.assets.exists(a, a.name == n)))",message="spec.disabledAssets names stx, sbtc, btc or the name of an entry of spec.assets"
type FaucetServerSpec struct {
	// node is the Stacks node the faucet reads chain state from and
	// broadcasts transactions to.
	// +required
	Node NodeSpec `json:"node"`

	// chainID, when set, makes the faucet refuse a node that reports another
	// chain id (testnet is 2147483648). 1 is mainnet and is rejected: the
	// faucet only serves test networks. Unset accepts any testnet node.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	// +kubebuilder:validation:XValidation:rule="self != 1",message="chainID 1 is Stacks mainnet; the faucet only serves test networks"
	ChainID *int64 `json:"chainID,omitempty"`

	// keySecretRef names a Secret in the FaucetServer's namespace holding the
	// faucet's hex private keys (one or more, separated by newlines or commas).
	// The Secret is mounted read-only into the pod as a file; its content never
	// appears in the Deployment, the status or events. Editing the Secret
	// restarts the pod with the new keys.
	// +required
	KeySecretRef KeySecretReference `json:"keySecretRef"`

	// amounts are the µSTX sent per drip.
	// +optional
	// +kubebuilder:default={}
	Amounts *Amounts `json:"amounts,omitempty"`

	// fee bounds the transaction fee the faucet pays per drip, in µSTX.
	// +optional
	// +kubebuilder:default={}
	Fee *Fee `json:"fee,omitempty"`

	// memo is the memo of faucet transfers: at most 34 bytes of UTF-8.
	// Defaults to "faucet".
	// +optional
	// +kubebuilder:default=faucet
	// +kubebuilder:validation:MaxLength=34
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 34",message="memo must be at most 34 bytes of UTF-8"
	Memo *string `json:"memo,omitempty"`

	// batching gathers default drips into send-many contract calls when a
	// key's in-flight slots run short. On its own a key pays about 25 drips
	// per block (the node's limit of unconfirmed transactions per sender);
	// one send-many call pays up to 200 recipients in a single transaction.
	// Unset, batching is adaptive with up to 200 recipients per call: a
	// drip leaves alone while slots are plentiful, and drips that find
	// them scarce leave together when a block frees one.
	// +optional
	Batching *BatchingSpec `json:"batching,omitempty"`

	// rateLimits caps how often an address or a client IP may drip.
	// +optional
	// +kubebuilder:default={}
	RateLimits *RateLimits `json:"rateLimits,omitempty"`

	// abuse holds the checks that keep scripts from draining a public
	// faucet: a proof of work for anonymous drips, API tokens, IP allow and
	// deny lists and a balance cap. Unset, every check is off.
	// +optional
	Abuse *AbuseSpec `json:"abuse,omitempty"`

	// page configures the faucet's web page and the discovery document it
	// reads (/faucet/v1/info). Unset, the faucet's defaults apply.
	// +optional
	Page *PageSpec `json:"page,omitempty"`

	// replicas is the number of faucet pods. It must be 0 or 1 with the
	// embedded store; with store.postgres the replicas split the keys
	// between them (a replica that owns no key is not ready), so give the
	// faucet at least as many keys as replicas. 0 stops the faucet: no pod
	// runs, while its claim, Service and state are kept (Ready=False,
	// reason Stopped), e.g. for a restore; `kubectl scale` sets it through
	// the scale subresource. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Replicas *int32 `json:"replicas,omitempty"`

	// store is where the faucet keeps its nonces, rate-limit slots and drip
	// history, so a restart or a rollout loses nothing. Defaults to the
	// embedded store: an SQLite file on a PersistentVolumeClaim of the
	// FaucetServer.
	// +optional
	// +kubebuilder:default={embedded: {}}
	Store *StoreSpec `json:"store,omitempty"`

	// suspend turns drips off: the faucet answers them with 403 while its pod
	// keeps running and serving the status endpoint. The FaucetServer stays
	// Ready, with reason Suspended.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// suspendedAssets turns off the drips of these assets alone: stx, or
	// the name of an entry of spec.assets. Their drips answer 403 and their
	// entries in /faucet/v1/info say "suspended"; the other assets serve.
	// Unlike removing an entry, the asset stays listed, its funding still
	// reported, and its pods keep their keys and limits. spec.suspend turns
	// every asset off.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=33
	// +kubebuilder:validation:items:MaxLength=32
	SuspendedAssets []string `json:"suspendedAssets,omitempty"`

	// disabledAssets turns these assets off: stx, sbtc, btc, or the name
	// of an entry of spec.assets. Their routes answer 403 "… faucet is not
	// available", as the incumbent's do when TESTNET_<ASSET>_FAUCET_ENABLED
	// is false, and /faucet/v1/info lists them as "off". Like spec.suspend
	// and spec.suspendedAssets, it reaches running pods through a ConfigMap
	// they follow (within about a minute, as the kubelet refreshes it):
	// switching an asset restarts nothing.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=34
	// +kubebuilder:validation:items:MaxLength=32
	DisabledAssets []string `json:"disabledAssets,omitempty"`

	// mcp configures the Model Context Protocol endpoint at /mcp, on by
	// default: agents ask for drips through the same checks and limits as
	// HTTP clients.
	// +optional
	MCP *MCPSpec `json:"mcp,omitempty"`

	// image overrides the container image of the faucet pod. Empty (the
	// default) runs the operator's own image, which contains the same binary.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// service configures the Service in front of the faucet pod.
	// +optional
	// +kubebuilder:default={}
	Service *ServiceSpec `json:"service,omitempty"`

	// resources are the compute resources of the faucet container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector constrains the faucet pod to nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the faucet pod.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity of the faucet pod.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// podAnnotations are added to the faucet pod, e.g. for a service mesh or
	// a metrics scraper.
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// podLabels are added to the faucet pod. They cannot replace the labels
	// the operator selects the pod by.
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// priorityClassName of the faucet pod.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// topologySpreadConstraints of the faucet pods, e.g. to spread the
	// replicas of a Postgres store over zones or nodes. Their labelSelector
	// selects the pods by app.kubernetes.io/name: faucet-server and
	// app.kubernetes.io/instance: <the FaucetServer's name>.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// imagePullSecrets name Secrets in the FaucetServer's namespace to pull
	// the faucet image with, from a private registry.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// logLevel of the faucet server (`faucet serve --log-level`): debug,
	// info, warn or error. Unset, the faucet's default applies: info.
	// +optional
	// +kubebuilder:validation:Enum=debug;info;warn;error
	LogLevel string `json:"logLevel,omitempty"`

	// extraEnv are environment variables added to the faucet container,
	// e.g. GOMEMLIMIT, or HTTPS_PROXY to reach the node through a proxy.
	// Names starting with FAUCET_ are refused: the faucet reads every
	// setting from such a variable as well as from its flag, and the
	// operator derives those settings from the spec, so a FAUCET_ variable
	// would override or bypass it; set the spec's field instead.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:XValidation:rule="!self.name.startsWith('FAUCET_')",message="extraEnv names must not start with FAUCET_: the faucet would read it as one of its settings, which the operator sets from the spec; set the spec's field instead",fieldPath=".name"
	ExtraEnv []corev1.EnvVar `json:"extraEnv,omitempty"`

	// funding configures how the operator judges the faucet's balance,
	// which it reads from spec.node on its own (the manager's
	// --funding-interval) and reports in status.funding and the Funded
	// condition.
	// +optional
	Funding *FundingSpec `json:"funding,omitempty"`

	// treasury names a holder key the faucet refills its keys from when
	// they run low. The key reaches the pod as a mounted Secret file, never
	// through the Deployment spec; its address and balance are reported in
	// status.funding.treasury.
	// +optional
	Treasury *TreasurySpec `json:"treasury,omitempty"`

	// assets are what the faucet drips beside STX, each under its name
	// (POST /extended/v{1,3}/faucets/{name}): any number of SIP-010
	// tokens, sbtc among them, and BTC. Each has its own amount, rate
	// limits and, with spec.treasury, refills, and a token its own low
	// threshold; adding one is an edit of this list alone. Unset, the
	// faucet drips STX only. The object form of earlier releases ({sbtc:
	// …, btc: …}) is refused in a new write, but one stored before the
	// upgrade keeps its content: the schema preserves what it does not
	// know here, so the API server returns the object as it was stored
	// instead of pruning it to {}, and the operator rewrites it as the list
	// it stands for (a Warning event DeprecatedAssets shows the list). The
	// same keeps, rather than drops, a key an entry does not know.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:pruning:PreserveUnknownFields
	Assets AssetList `json:"assets,omitempty"`

	// budget bounds what the faucet pays out in STX in total, whoever
	// asks, and keeps a reserve on its keys (faucet serve --budget
	// asset=stx,…); each entry of spec.assets has a budget of its own.
	// Unset, the faucet's default applies: 2,000 default drips (amounts.
	// default) per 24h, no reserve. Its reserve also shortens the runway
	// status.funding.runway reports.
	// +optional
	Budget *BudgetSpec `json:"budget,omitempty"`

	// identity turns on sign-in through an OpenID Connect provider
	// (Google, GitHub through Dex, Keycloak, Okta, …) and the tiers of
	// requesters: who signs in gets what their tier gives (a larger drip,
	// a limit of their own across addresses and IPs, no proof of work, a
	// share of each budget), and drips without sign-in get the anonymous
	// tier's. The client secret and the session key reach the pod as
	// mounted Secret files, never through the Deployment spec. Unset,
	// nobody signs in and every drip is anonymous.
	// +optional
	Identity *IdentitySpec `json:"identity,omitempty"`

	// assetsObject: spec.assets was in the object form of earlier
	// releases (see AssetList and FaucetServerSpec.UnmarshalJSON).
	assetsObject bool `json:"-"`
}

// MCPSpec configures the MCP endpoint.
type MCPSpec struct {
	// enabled serves /mcp (faucet serve --mcp). Defaults to true.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`
}

// AssetSpec is one asset the faucet drips beside STX: a SIP-010 token
// (token) or BTC (btc).
// +kubebuilder:validation:XValidation:rule="has(self.token) != has(self.btc)",message="each spec.assets entry is a token or BTC: set exactly one of token and btc"
// +kubebuilder:validation:XValidation:rule="!has(self.btc) || self.name == 'btc'",message="the BTC entry of spec.assets must be named btc"
// +kubebuilder:validation:XValidation:rule="!has(self.token) || self.name != 'btc'",message="btc is BTC's name in spec.assets: name the token otherwise"
// +kubebuilder:validation:XValidation:rule="!has(self.token) || has(self.token.assetIdentifier) || self.name == 'sbtc'",message="spec.assets[].token.assetIdentifier is required (ADDRESS.contract-name::token-name); only sbtc may leave it out, to use the sBTC contract the node names in /v2/pox (pox_5_sbtc_contract)"
// +kubebuilder:validation:XValidation:rule="!has(self.btc) || !has(self.lowThreshold)",message="the btc entry of spec.assets takes no lowThreshold: the faucet has no BTC threshold of its own, so spec.funding.lowThreshold applies to BTC"
// +kubebuilder:validation:XValidation:rule="!has(self.budget) || !has(self.budget.stackingPercent)",message="spec.assets[].budget takes no stackingPercent: stacking drips are STX only, so it belongs in spec.budget",fieldPath=".budget.stackingPercent"
type AssetSpec struct {
	// name is the asset's path segment (POST /extended/v1/faucets/{name}
	// and /extended/v3/faucets/{name}) and its label in the metrics: 1 to
	// 32 lower-case letters, digits and '-', starting with a letter. sbtc
	// is the incumbent's sBTC faucet; stx is the faucet's own asset and
	// cannot be listed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z][-a-z0-9]*$')",message="spec.assets[].name must be lower-case letters, digits and '-', starting with a letter, e.g. sbtc or tusd"
	// +kubebuilder:validation:XValidation:rule="self != 'stx'",message="stx is the faucet's own asset, set by spec.amounts: name the token otherwise"
	Name string `json:"name"`

	// token makes the asset a SIP-010 fungible token paid by the faucet's
	// keys, which pay its transaction fees in STX: fund them with both.
	// +optional
	Token *TokenSpec `json:"token,omitempty"`

	// btc makes the asset Bitcoin on a test network (regtest, signet or
	// testnet; never mainnet), paid from the P2WPKH address of the
	// faucet's own Bitcoin key through a Bitcoin Core or btcd node.
	// +optional
	BTC *BTCSpec `json:"btc,omitempty"`

	// rateLimits cap how often an address or a client IP may get this
	// asset, in buckets of its own: its drips do not count against
	// spec.rateLimits nor another asset's, nor theirs against these.
	// +optional
	// +kubebuilder:default={}
	RateLimits *AssetRateLimits `json:"rateLimits,omitempty"`

	// budget bounds what this asset pays out in total, in its base units
	// (a token's, or sats for btc), and keeps a reserve of it (faucet
	// serve --budget asset=<name>,…). Unset, the faucet's default applies:
	// 2,000 drips of the asset's amount (btc: amounts.default) per 24h.
	// +optional
	Budget *BudgetSpec `json:"budget,omitempty"`

	// lowThreshold is the number of this token's drips left below which
	// the Funded condition turns False and the page and alerts say it is
	// low (faucet serve --token …,low-drips=N). Unset, and always for BTC,
	// spec.funding.lowThreshold applies.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LowThreshold *int64 `json:"lowThreshold,omitempty"`

	// legacy marks an entry read from the object form of spec.assets.
	legacy bool `json:"-"`
}

// TokenSpec configures a SIP-010 token's drips.
// +kubebuilder:validation:XValidation:rule="!has(self.refillBelow) || !has(self.refillAmount) || self.refillAmount >= self.refillBelow",message="spec.assets[].token.refillAmount must be at least refillBelow, so that one refill lifts a key above the threshold"
type TokenSpec struct {
	// assetIdentifier names the token: its contract's testnet principal
	// and the token's name in that contract, ADDRESS.contract-name::token-name,
	// e.g. ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd.
	// Mainnet (SP…/SM…) contracts are refused. For sbtc it may be left
	// out: the faucet and the operator then use the sBTC contract the node
	// names in /v2/pox (pox_5_sbtc_contract, Epoch 4.0; testnet's is
	// SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token), and the token
	// sbtc-token in it. The operator also checks the address's checksum
	// and reports a bad one as Stalled, reason InvalidAsset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=212
	// +kubebuilder:validation:XValidation:rule="self.matches('^S[MNPT][0-9A-HJKMNP-TV-Z]{24,39}[.][a-zA-Z][-_a-zA-Z0-9]{0,39}::[a-zA-Z][-_!?+<>=/*a-zA-Z0-9]{0,127}$')",message="spec.assets[].token.assetIdentifier must be a token's asset identifier, ADDRESS.contract-name::token-name (a contract name of up to 40 letters, digits, - and _, a token name of up to 128 characters, each starting with a letter), e.g. ST2CY5V39NHDPWSXMW9QDT3HC3GD6Q6XX4CFRK9AG.tusd-token::tusd"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^S[MP]')",message="spec.assets[].token.assetIdentifier is a mainnet contract (SP…/SM… address); the faucet only serves test networks: use a testnet (ST…/SN…) contract"
	AssetIdentifier string `json:"assetIdentifier,omitempty"`

	// amount is what one drip sends, in the token's base units (its
	// decimals are read from the contract): sats for sBTC (1 sBTC =
	// 100000000 sats), e.g. 100000 for 0.001 sBTC.
	// +required
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="spec.assets[].token.amount must be at least 1: the base units each drip sends"
	Amount int64 `json:"amount"`

	// refillBelow: with spec.treasury, a faucet key whose balance of the
	// token falls below this many base units is refilled from the
	// treasury's. Unset, the faucet's default applies: 20 drips' worth.
	// +optional
	// +kubebuilder:validation:Minimum=1
	RefillBelow *int64 `json:"refillBelow,omitempty"`

	// refillAmount is the base units one refill sends; at least
	// refillBelow. Unset, the faucet's default applies: 10 × refillBelow.
	// +optional
	// +kubebuilder:validation:Minimum=1
	RefillAmount *int64 `json:"refillAmount,omitempty"`
}

// AssetRateLimits are the sliding-window limits of an asset's drips.
type AssetRateLimits struct {
	// perAddress limits the asset's drips per recipient address.
	// Defaults to 5 per 5m.
	// +optional
	// +kubebuilder:default={requests: 5, window: "5m"}
	PerAddress *RateLimit `json:"perAddress,omitempty"`

	// perIP limits the asset's drips per client IP (IPv6 grouped by /64;
	// the client IP as spec.rateLimits.trustedProxyHops selects it).
	// Defaults to 30 per 5m.
	// +optional
	// +kubebuilder:default={requests: 30, window: "5m"}
	PerIP *RateLimit `json:"perIP,omitempty"`
}

// BTCSpec configures Bitcoin drips.
type BTCSpec struct {
	// network is the Bitcoin test network the faucet pays on: regtest,
	// signet or testnet (testnet3). Mainnet is refused. The node of rpc
	// must be on it. Defaults to regtest.
	// +optional
	// +kubebuilder:default=regtest
	// +kubebuilder:validation:XValidation:rule="self in ['regtest', 'signet', 'testnet']",message="the btc entry of spec.assets: network must be regtest, signet or testnet: the faucet pays test-network BTC only, never mainnet"
	Network string `json:"network,omitempty"`

	// rpc is the Bitcoin node the faucet reads the chain from and
	// broadcasts its payouts to, and the operator reads the faucet's
	// balance from.
	// +required
	RPC BTCRPCSpec `json:"rpc"`

	// keySecretRef selects the Secret data key holding the faucet's
	// Bitcoin key file: its first non-empty line is the private key,
	// compressed test-network WIF or 64 hex characters, optionally
	// followed by its P2WPKH address (`faucet keys generate --btc` writes
	// such lines). The Secret is mounted read-only into the pod as a file;
	// its content never appears in the Deployment, the status or events.
	// Editing it restarts the pod.
	// +required
	KeySecretRef BTCKeySecretReference `json:"keySecretRef"`

	// amounts are the sats (1 BTC = 100000000 sats) a drip sends, by size.
	// Each must be at least 546, the dust limit of the costliest common
	// output (P2PKH), and they must not decrease from default to xlarge.
	// +optional
	// +kubebuilder:default={}
	Amounts *BTCAmounts `json:"amounts,omitempty"`

	// startHeight is the block height from which the faucet scans the
	// chain for its coins: the height of the first payment to its
	// address, or lower. Defaults to 0 (the whole chain), which on signet
	// or testnet takes a while at the first start.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StartHeight *int64 `json:"startHeight,omitempty"`

	// fees bounds the fee rate of the faucet's payouts, in sat/vB. The
	// faucet asks the node for an estimate and clamps it to
	// [minRate, maxRate]. Unset fields take the faucet's defaults.
	// +optional
	Fees *BTCFees `json:"fees,omitempty"`
}

// BTCRPCSpec locates a Bitcoin node's JSON-RPC.
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.urls)",message="the btc entry of spec.assets: set rpc.url (one node) or rpc.urls (several nodes of one chain), not both"
type BTCRPCSpec struct {
	// url is the http or https URL of the node's RPC, e.g.
	// http://bitcoind.bitcoin.svc:18443 (regtest), :38332 (signet) or
	// :18332 (testnet). It carries no user or password: those belong in
	// the Secret of credentialsSecretRef, since the spec is not secret.
	// Set url or urls.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="the btc entry of spec.assets: rpc.url must be an http:// or https:// URL with a host, e.g. http://bitcoind:18443"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]*://[^/?#]*@')",message="the btc entry of spec.assets: rpc.url must not carry a user or password: put them in a Secret and name it in btc.rpc.credentialsSecretRef"
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#')",message="the btc entry of spec.assets: rpc.url must not have a query or a fragment"
	URL string `json:"url,omitempty"`

	// urls are several Bitcoin nodes of one chain: the faucet reads from a
	// healthy one at the highest tip and sends each payout to all of them,
	// so one node's restart or lag costs no drip. Each is a URL as url is;
	// the credentials of credentialsSecretRef are sent to every one. Set
	// url or urls.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.all(u, isURL(u) && url(u).getScheme() in ['http', 'https'] && url(u).getHostname() != '' && !u.contains(','))",message="the btc entry of spec.assets: rpc.urls must each be an http:// or https:// URL with a host (and no comma), e.g. http://bitcoind-2:18443"
	// +kubebuilder:validation:XValidation:rule="self.all(u, !u.matches('^[^:/?#]*://[^/?#]*@') && !u.contains('?') && !u.contains('#'))",message="the btc entry of spec.assets: rpc.urls must carry no user or password (put them in the Secret of rpc.credentialsSecretRef), no query and no fragment"
	URLs []string `json:"urls,omitempty"`

	// credentialsSecretRef selects the Secret data key holding the RPC
	// credentials, "user:password" on the first line: the format of
	// Bitcoin Core's .cookie file, or btcd's --rpcuser and --rpcpass
	// joined by a colon. The Secret is mounted read-only into the pod as
	// a file, and the operator reads it to check the faucet's balance; it
	// never appears in the Deployment, the status or events. Editing it
	// restarts the pod. Unset, the node is called without credentials
	// (e.g. through an authenticating proxy).
	// +optional
	CredentialsSecretRef *BTCCredentialsSecretReference `json:"credentialsSecretRef,omitempty"`
}

// BTCKeySecretReference selects the Bitcoin key file inside a Secret.
type BTCKeySecretReference struct {
	// name of the Secret, in the FaucetServer's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key holding the key file. Defaults to "key".
	// +optional
	// +kubebuilder:default=key
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="the btc entry of spec.assets: keySecretRef.key must be a file name, not . or .."
	Key string `json:"key,omitempty"`
}

// BTCCredentialsSecretReference selects the RPC credentials file inside a
// Secret.
type BTCCredentialsSecretReference struct {
	// name of the Secret, in the FaucetServer's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key holding the credentials. Defaults to
	// "credentials".
	// +optional
	// +kubebuilder:default=credentials
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="the btc entry of spec.assets: rpc.credentialsSecretRef.key must be a file name, not . or .."
	Key string `json:"key,omitempty"`
}

// BTCAmounts are the sats of BTC drips, by size.
// +kubebuilder:validation:XValidation:rule="!has(self.default) || !has(self.large) || self.default <= self.large",message="the btc entry of spec.assets: amounts.large (default 1000000) must be at least amounts.default"
// +kubebuilder:validation:XValidation:rule="!has(self.large) || !has(self.xlarge) || self.large <= self.xlarge",message="the btc entry of spec.assets: amounts.xlarge (default 50000000) must be at least amounts.large"
type BTCAmounts struct {
	// default is the sats a regular BTC drip sends. Defaults to 10000
	// (0.0001 BTC).
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:XValidation:rule="self >= 546",message="the btc entry of spec.assets: amounts.default must be at least 546 sats: smaller outputs are dust, which nodes do not relay"
	Default *int64 `json:"default,omitempty"`

	// large is the sats of a large drip. Defaults to 1000000 (0.01 BTC).
	// +optional
	// +kubebuilder:default=1000000
	// +kubebuilder:validation:XValidation:rule="self >= 546",message="the btc entry of spec.assets: amounts.large must be at least 546 sats: smaller outputs are dust, which nodes do not relay"
	Large *int64 `json:"large,omitempty"`

	// xlarge is the sats of an extra-large drip. Defaults to 50000000
	// (0.5 BTC).
	// +optional
	// +kubebuilder:default=50000000
	// +kubebuilder:validation:XValidation:rule="self >= 546",message="the btc entry of spec.assets: amounts.xlarge must be at least 546 sats: smaller outputs are dust, which nodes do not relay"
	XLarge *int64 `json:"xlarge,omitempty"`
}

// BTCFees bounds the fee rate of BTC payouts, in sat/vB.
// +kubebuilder:validation:XValidation:rule="!has(self.minRate) || !has(self.maxRate) || self.minRate <= self.maxRate",message="the btc entry of spec.assets: fees.minRate must not exceed maxRate"
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackRate) || (!has(self.minRate) || self.minRate <= self.fallbackRate) && (!has(self.maxRate) || self.fallbackRate <= self.maxRate)",message="the btc entry of spec.assets: fees.fallbackRate must lie between minRate and maxRate"
type BTCFees struct {
	// fallbackRate is the fee rate when the node has no estimate, as on a
	// fresh regtest chain.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	FallbackRate *int64 `json:"fallbackRate,omitempty"`

	// minRate is the lowest fee rate paid; 1 sat/vB is the relay minimum
	// of Bitcoin Core's defaults.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MinRate *int64 `json:"minRate,omitempty"`

	// maxRate is the highest fee rate paid, whatever the node estimates;
	// at most 10000 sat/vB, above which nodes refuse a transaction by
	// default.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxRate *int64 `json:"maxRate,omitempty"`
}

// FundingSpec configures when the faucet counts as low on funds.
type FundingSpec struct {
	// lowThreshold is the number of default drips (amounts.default plus
	// fee.fallback) left on the faucet's keys below which the faucet is
	// low, for every asset: the Funded condition turns False with reason
	// Low, and the operator passes it to the faucet (`faucet serve
	// --low-drips`), whose web page and /faucet/v1/info then report the
	// state "low" and whose faucet_low_drips_threshold metric, which the
	// chart's FaucetLow alert compares with, carries it. 0 never reports
	// Low, only Empty (the faucet gets --low-drips=1, which means the
	// same to it). Defaults to the deprecated page.lowDrips when that is
	// set, else 100.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LowThreshold *int64 `json:"lowThreshold,omitempty"`
}

// TreasurySpec is a holder account the faucet tops its keys up from: the
// faucet never pays drips with it, so an operator funds a single address.
// +kubebuilder:validation:XValidation:rule="!has(self.refillBelowUSTX) || !has(self.refillAmountUSTX) || self.refillAmountUSTX >= self.refillBelowUSTX",message="treasury.refillAmountUSTX must be at least refillBelowUSTX, so that one refill lifts a key above the threshold"
type TreasurySpec struct {
	// keySecretRef selects the Secret data key holding the treasury's hex
	// private key (exactly one), in the FaucetServer's namespace. The
	// Secret is mounted read-only into the pod as a file; its content never
	// appears in the Deployment, the status or events. Editing it restarts
	// the pod.
	// +required
	KeySecretRef TreasuryKeyReference `json:"keySecretRef"`

	// refillBelowUSTX: a faucet key whose available µSTX falls below this
	// is refilled from the treasury. Unset, the faucet's default applies:
	// 20 default drips' worth.
	// +optional
	// +kubebuilder:validation:Minimum=1
	RefillBelowUSTX *int64 `json:"refillBelowUSTX,omitempty"`

	// refillAmountUSTX is the µSTX a refill sends; at least
	// refillBelowUSTX. Unset, the faucet's default applies: 10 ×
	// refillBelowUSTX.
	// +optional
	// +kubebuilder:validation:Minimum=1
	RefillAmountUSTX *int64 `json:"refillAmountUSTX,omitempty"`
}

// TreasuryKeyReference selects the treasury's key file inside a Secret.
type TreasuryKeyReference struct {
	// name of the Secret, in the FaucetServer's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key holding the private key. Empty means
	// "keys".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="treasury.keySecretRef.key must be a file name, not . or .."
	Key string `json:"key,omitempty"`
}

// NodeSpec locates the Stacks node RPC.
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.urls)",message="node: set url (one node) or urls (several nodes of one chain), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.pollInterval) || !has(self.busyPollInterval) || duration(self.busyPollInterval) <= duration(self.pollInterval)",message="node.busyPollInterval (default 100ms) must not exceed node.pollInterval: the faucet polls at least as often while a transaction is in flight",fieldPath=".busyPollInterval"
type NodeSpec struct {
	// url is the http or https URL of the Stacks node RPC, e.g.
	// http://stacks-node.stacks.svc:20443. Set url or urls.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="node.url must be an http:// or https:// URL with a host, e.g. http://stacks-node:20443"
	URL string `json:"url,omitempty"`

	// urls are several Stacks nodes of one chain, e.g. the miner and a
	// follower: the faucet reads from a healthy one at the highest tip,
	// broadcasts to all of them and sends a transaction again to one that
	// lacks it, so one node's restart or lag costs no drip. Set url or urls.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.all(u, isURL(u) && url(u).getScheme() in ['http', 'https'] && url(u).getHostname() != '' && !u.contains(','))",message="node.urls must each be an http:// or https:// URL with a host (and no comma), e.g. http://stacks-follower:20443"
	URLs []string `json:"urls,omitempty"`

	// timeout bounds each call to the node, as a duration ("10s").
	// Defaults to 10s.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="node.timeout must be a positive duration"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// pollInterval is how often the faucet reads the node's tip
	// (/v2/info) while no transaction is in flight, and how often it
	// probes each node's health, as a duration from 50ms to 1m. Defaults
	// to 1s. Behind a rate-limited gateway such as Hiro's API (50
	// requests a minute without a key, 500 with one) raise it, with
	// busyPollInterval, or the polls alone use up the quota; new blocks
	// are then noticed later.
	// +optional
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('50ms') && duration(self) <= duration('1m')",message="node.pollInterval must be a duration from 50ms to 1m"
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`

	// busyPollInterval is how often the faucet reads the node's tip while
	// a transaction is in flight or drips wait for a key, as a duration
	// from 50ms up to pollInterval. Defaults to 100ms: a confirmation is
	// seen soon after its block. Raise it behind a rate-limited gateway.
	// +optional
	// +kubebuilder:default="100ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('50ms') && duration(self) <= duration('1m')",message="node.busyPollInterval must be a duration from 50ms to 1m"
	BusyPollInterval *metav1.Duration `json:"busyPollInterval,omitempty"`

	// stallAfter is how long without a new Stacks block before the faucet
	// reports the chain stalled: state "stalled" in /faucet/v1/info and on
	// the page, and the tip's age past it for the chart's
	// FaucetChainStalled alert. Drips are still accepted and readiness
	// holds. "0s" never reports a stall. Defaults to 30m: a tenure waits
	// for a Bitcoin block, and Bitcoin's gaps rarely pass half an hour.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	StallAfter *metav1.Duration `json:"stallAfter,omitempty"`

	// headersSecretRef selects the Secret data key holding HTTP header
	// lines, "Name: value", one a line (blank lines and lines starting
	// with # are skipped), sent with every request to the Stacks nodes:
	// the faucet's, and the operator's reads of the balances. For
	// example "x-api-key: <key>" for Hiro's API (https://api.testnet.hiro.so),
	// which rate-limits anonymous clients. Headers the faucet sets itself
	// (Host, User-Agent, Content-Type, …) are refused. The Secret is
	// mounted read-only into the pod as a file, and the operator reads
	// it for its own calls; it never appears in the Deployment, the
	// status or events. Editing it restarts the pods.
	// +optional
	HeadersSecretRef *NodeHeadersSecretReference `json:"headersSecretRef,omitempty"`
}

// NodeHeadersSecretReference selects the Stacks node headers file inside a
// Secret.
type NodeHeadersSecretReference struct {
	// name of the Secret, in the FaucetServer's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key holding the header lines. Defaults to
	// "headers".
	// +optional
	// +kubebuilder:default=headers
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="node.headersSecretRef.key must be a file name, not . or .."
	Key string `json:"key,omitempty"`
}

// KeySecretReference selects the key file inside a Secret.
type KeySecretReference struct {
	// name of the Secret, in the FaucetServer's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key holding the private keys. Defaults to "keys".
	// +optional
	// +kubebuilder:default=keys
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="keySecretRef.key must be a file name, not . or .."
	Key string `json:"key,omitempty"`
}

// Amounts are drip sizes in µSTX (1 STX = 1000000 µSTX).
type Amounts struct {
	// default is the µSTX sent by a regular drip. Defaults to 500000000 (500 STX).
	// +optional
	// +kubebuilder:default=500000000
	// +kubebuilder:validation:XValidation:rule="self > 0",message="amounts.default must be greater than 0"
	Default *int64 `json:"default,omitempty"`

	// stackingPaddingPercent is added to the node's PoX minimum
	// (min_amount_ustx) to size a stacking drip, so the recipient can stack
	// even if the minimum rises a little. 0 sends the minimum exactly.
	// Defaults to 20.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	StackingPaddingPercent *int32 `json:"stackingPaddingPercent,omitempty"`

	// stacking, when set, is a fixed µSTX amount for stacking drips instead
	// of the padded PoX minimum.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self > 0",message="amounts.stacking must be greater than 0"
	Stacking *int64 `json:"stacking,omitempty"`
}

// Fee bounds the fee of each faucet transaction. The faucet asks the node for
// the current fee rate and clamps the result to [min, max].
// +kubebuilder:validation:XValidation:rule="!has(self.min) || !has(self.max) || self.min <= self.max",message="fee.min must not exceed fee.max"
type Fee struct {
	// min is the lowest fee in µSTX. Defaults to 180.
	// +optional
	// +kubebuilder:default=180
	// +kubebuilder:validation:XValidation:rule="self > 0",message="fee.min must be greater than 0"
	Min *int64 `json:"min,omitempty"`

	// max is the highest fee in µSTX. Defaults to 100000.
	// +optional
	// +kubebuilder:default=100000
	// +kubebuilder:validation:XValidation:rule="self > 0",message="fee.max must be greater than 0"
	Max *int64 `json:"max,omitempty"`

	// fallback is the fee in µSTX when the node cannot estimate one.
	// Defaults to 1000.
	// +optional
	// +kubebuilder:default=1000
	// +kubebuilder:validation:XValidation:rule="self > 0",message="fee.fallback must be greater than 0"
	Fallback *int64 `json:"fallback,omitempty"`
}

// BatchingSpec gathers default drips into send-many contract calls. Each
// key pays one transaction per nonce and the node accepts only about 25
// unconfirmed transactions per key, so on its own a key pays about 25 drips
// per block; a send-many call pays up to 200 recipients in one transaction,
// for one fee. Only default drips are batched, never stacking drips.
type BatchingSpec struct {
	// maxRecipients is the most default drips gathered into one send-many
	// call, 2 to 200. 0 or 1 turns batching off: every drip is a transfer
	// of its own. Defaults to 200.
	// +optional
	// +kubebuilder:default=200
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=200
	MaxRecipients *int32 `json:"maxRecipients,omitempty"`

	// window, when set, gathers each batch for this long from its first
	// drip, as a duration ("250ms"); a full batch leaves at once. Unset,
	// batching is adaptive: a drip leaves at once, alone, while slots are
	// plentiful and none waits, and waiting drips leave together the moment
	// a block frees a slot.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="batching.window must be a positive duration"
	Window *metav1.Duration `json:"window,omitempty"`

	// contract is the send-many-memo contract batches call, as a testnet
	// contract id ADDRESS.contract-name. Defaults to the one deployed on
	// testnet, ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.send-many-memo.
	// +optional
	// +kubebuilder:default="ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.send-many-memo"
	// +kubebuilder:validation:MaxLength=82
	// +kubebuilder:validation:XValidation:rule="self.matches('^S[MNPT][0-9A-HJKMNP-TV-Z]{24,39}[.][a-zA-Z][-_a-zA-Z0-9]{0,39}$')",message="batching.contract must be a contract id, ADDRESS.contract-name, e.g. ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.send-many-memo"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^S[MP]')",message="batching.contract is a mainnet contract (SP…/SM… address); the faucet only serves test networks: use a testnet (ST…/SN…) contract"
	Contract *string `json:"contract,omitempty"`
}

// RateLimits are independent sliding-window limits; a drip must fit all that
// apply to it.
type RateLimits struct {
	// perAddress limits regular drips per recipient address.
	// Defaults to 5 per 5m.
	// +optional
	// +kubebuilder:default={requests: 5, window: "5m"}
	PerAddress *RateLimit `json:"perAddress,omitempty"`

	// stackingPerAddress limits stacking drips per recipient address, in a
	// bucket of their own. Defaults to 1 per 48h.
	// +optional
	// +kubebuilder:default={requests: 1, window: "48h"}
	StackingPerAddress *RateLimit `json:"stackingPerAddress,omitempty"`

	// perIP limits all drips per client IP (IPv6 grouped by /64).
	// Defaults to 30 per 5m.
	// +optional
	// +kubebuilder:default={requests: 30, window: "5m"}
	PerIP *RateLimit `json:"perIP,omitempty"`

	// trustedProxyHops is how many X-Forwarded-For entries trusted proxies in
	// front of the faucet (ingress, load balancer) append. 0 uses the peer
	// address, which behind a proxy is the proxy's.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	TrustedProxyHops *int32 `json:"trustedProxyHops,omitempty"`
}

// RateLimit allows a number of drips per sliding window.
type RateLimit struct {
	// requests is how many drips the window allows.
	// +required
	// +kubebuilder:validation:XValidation:rule="self > 0",message="requests must be greater than 0"
	Requests int32 `json:"requests"`

	// window is the length of the sliding window, as a duration ("5m", "48h").
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="window must be a positive duration"
	Window metav1.Duration `json:"window"`
}

// AbuseSpec configures the checks the faucet runs on every drip request
// before it spends anything, in this order: ipDeny refuses, a valid API
// token or an ipAllow address skips the proof of work and the per-IP limit,
// the remaining (anonymous) drips solve the proof of work, and balanceCap
// refuses rich recipients.
type AbuseSpec struct {
	// proofOfWork asks anonymous drips to solve a SHA-256 proof of work,
	// which the faucet's web page does in the browser. API clients must
	// solve it too (or use an API token), so only turn it on for a public
	// faucet whose CI users have tokens.
	// +optional
	ProofOfWork *ProofOfWork `json:"proofOfWork,omitempty"`

	// apiTokens gives CI pipelines and teams tokens with quotas of their
	// own instead of the per-address and per-IP limits, and no proof of
	// work.
	// +optional
	APITokens *APITokens `json:"apiTokens,omitempty"`

	// ipAllow lists client IPs and CIDRs (e.g. 10.0.0.0/8, 2001:db8::/32)
	// that skip the proof of work and the per-IP limit. The client IP is
	// the peer address, or the one rateLimits.trustedProxyHops selects from
	// X-Forwarded-For.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || isCIDR(self)",message="abuse.ipAllow entries must be IP addresses or CIDRs, e.g. 203.0.113.7, 10.0.0.0/8 or 2001:db8::/32"
	IPAllow []string `json:"ipAllow,omitempty"`

	// ipDeny lists client IPs and CIDRs whose drips are refused, API
	// tokens included.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || isCIDR(self)",message="abuse.ipDeny entries must be IP addresses or CIDRs, e.g. 203.0.113.7, 10.0.0.0/8 or 2001:db8::/32"
	IPDeny []string `json:"ipDeny,omitempty"`

	// balanceCapUSTX refuses drips to an address that already holds at
	// least this many µSTX (balance plus locked). 0 or unset turns the cap
	// off.
	// +optional
	// +kubebuilder:validation:Minimum=0
	BalanceCapUSTX *int64 `json:"balanceCapUSTX,omitempty"`
}

// ProofOfWork is the faucet's self-hosted proof of work: the client fetches
// a challenge the faucet signs and finds a counter whose SHA-256, with the
// challenge, starts with a number of zero bits. Each challenge serves one
// drip.
// +kubebuilder:validation:XValidation:rule="!has(self.difficulty) || !has(self.maxDifficulty) || self.maxDifficulty >= self.difficulty",message="abuse.proofOfWork.maxDifficulty (default 24) must not be below difficulty"
type ProofOfWork struct {
	// difficulty is the number of leading zero bits asked of every
	// anonymous drip; each bit doubles the work, and 18 costs a browser
	// about a second. 0 asks for none unless raiseAbove raises it.
	// Defaults to 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	Difficulty *int32 `json:"difficulty,omitempty"`

	// raiseAbove makes the difficulty adaptive: while more than requests
	// anonymous drips passed within window, new challenges ask for more,
	// from max(difficulty, 16) up by 2 bits per doubling of the rate, at
	// most maxDifficulty. Unset, the difficulty stays fixed.
	// +optional
	RaiseAbove *RateLimit `json:"raiseAbove,omitempty"`

	// maxDifficulty caps the raised difficulty, in bits. It must not be
	// below difficulty. Defaults to 24.
	// +optional
	// +kubebuilder:default=24
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32
	MaxDifficulty *int32 `json:"maxDifficulty,omitempty"`

	// ttl is how long a challenge stays valid, as a duration ("5m"), at
	// least 1s. Defaults to 5m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="abuse.proofOfWork.ttl must be at least 1s"
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// APITokens points the faucet at its API tokens file.
type APITokens struct {
	// secretRef selects the Secret data key holding the tokens file, one
	// token per line: NAME TOKEN|sha256:HEX QUOTA [PER_ADDRESS], with QUOTA
	// and PER_ADDRESS as N/duration ("500/1h"); lines starting with # are
	// comments. Clients send "Authorization: Bearer <token>".
	//
	// The Secret is mounted read-only into the pod as a file; its content
	// never appears in the Deployment, the status or events. Unlike the key
	// Secret, editing it does not restart the pod: the kubelet updates the
	// mounted file in place (within a minute or so) and the faucet re-reads
	// it; a file that does not parse is logged and the previous tokens stay
	// in force. A missing Secret or data key stalls the FaucetServer until
	// it exists.
	// +required
	SecretRef APITokensSecretReference `json:"secretRef"`
}

// APITokensSecretReference selects the API tokens file inside a Secret.
type APITokensSecretReference struct {
	// name of the Secret, in the FaucetServer's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key holding the tokens file. Defaults to
	// "tokens".
	// +optional
	// +kubebuilder:default=tokens
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="abuse.apiTokens.secretRef.key must be a file name, not . or .."
	Key string `json:"key,omitempty"`
}

// PageSpec configures the faucet's web page and what the discovery
// document reports.
type PageSpec struct {
	// explorerTxURL is the explorer link the page shows for a drip: an
	// http:// or https:// URL in which {txid} stands for the 0x-prefixed
	// transaction id. Defaults to the Hiro explorer on testnet,
	// https://explorer.hiro.so/txid/{txid}?chain=testnet.
	// +optional
	// +kubebuilder:default="https://explorer.hiro.so/txid/{txid}?chain=testnet"
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="page.explorerTxURL must start with https:// or http://"
	// +kubebuilder:validation:XValidation:rule="self.contains('{txid}')",message="page.explorerTxURL must contain {txid}, which the page replaces with the transaction id"
	ExplorerTxURL *string `json:"explorerTxURL,omitempty"`

	// lowDrips is deprecated: set spec.funding.lowThreshold, the one
	// threshold of the Funded condition, the web page, /faucet/v1/info
	// and the faucet_low_drips_threshold metric. Still accepted: while
	// funding.lowThreshold is unset, lowDrips stands in for it
	// everywhere; once lowThreshold is set, lowDrips is ignored.
	// +optional
	// +kubebuilder:validation:Minimum=1
	LowDrips *int32 `json:"lowDrips,omitempty"`
}

// ServiceSpec configures the faucet's Service.
type ServiceSpec struct {
	// type of the Service: ClusterIP (default), NodePort or LoadBalancer.
	// +optional
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	Type corev1.ServiceType `json:"type,omitempty"`

	// port the Service exposes the faucet API on. Defaults to 3999, the
	// Stacks Blockchain API port clients expect.
	// +optional
	// +kubebuilder:default=3999
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

	// annotations are added to the Service, e.g. for a cloud load balancer.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// StoreSpec selects the faucet's store: embedded or postgres, not both.
// +kubebuilder:validation:XValidation:rule="!(has(self.embedded) && has(self.postgres))",message="spec.store: set either embedded or postgres, not both"
// +kubebuilder:validation:XValidation:rule="has(self.embedded) || has(self.postgres)",message="spec.store: set embedded or postgres"
type StoreSpec struct {
	// embedded keeps the state in an SQLite file on a ReadWriteOnce
	// PersistentVolumeClaim named <name>-data, owned by the FaucetServer
	// (deleted with it). One pod at most: spec.replicas must be 0 or 1.
	// +optional
	Embedded *EmbeddedStore `json:"embedded,omitempty"`

	// postgres keeps the state in a PostgreSQL database, which several
	// replicas can share. The connection URI comes from a Secret and reaches
	// the pod as an environment variable, never through the Deployment spec.
	// +optional
	Postgres *PostgresStore `json:"postgres,omitempty"`
}

// EmbeddedStore sizes the volume of the embedded SQLite store.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",message="store.embedded.storageClassName cannot change: a volume's StorageClass is fixed when it is created"
type EmbeddedStore struct {
	// size of the volume. It may grow (if the StorageClass allows volume
	// expansion) but never shrink: Kubernetes cannot shrink a volume.
	// Defaults to 1Gi.
	// +optional
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="store.embedded.size must be positive"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="store.embedded.size cannot shrink: Kubernetes cannot make a volume smaller"
	Size *resource.Quantity `json:"size,omitempty"`

	// storageClassName of the volume. Unset uses the cluster's default
	// StorageClass. Fixed once the volume exists.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// PostgresStore points the faucet at a PostgreSQL database.
type PostgresStore struct {
	// uriSecretRef selects the Secret data key holding the connection URI,
	// postgres://user:password@host:5432/db (or postgresql://). The key
	// defaults to "uri", which is what CloudNativePG's <cluster>-app Secret
	// holds. Editing the Secret rolls the pods.
	// +required
	URISecretRef SecretKeyReference `json:"uriSecretRef"`
}

// SecretKeyReference selects a data key of a Secret in the FaucetServer's
// namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key is the Secret data key. Defaults to "uri".
	// +optional
	// +kubebuilder:default=uri
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// FaucetServerStatus is the observed state of a faucet.
type FaucetServerStatus struct {
	// conditions are Ready, Reconciling and Stalled, kstatus-compatible:
	// Reconciling and Stalled are present only while true. See
	// conditions.go for the reasons.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// faucetAddresses are the testnet (ST…) addresses of the keys in the key
	// Secret, the accounts to fund. Addresses only, never keys.
	// +optional
	// +listType=atomic
	FaucetAddresses []string `json:"faucetAddresses,omitempty"`

	// url is the in-cluster URL of the faucet's Service,
	// http://<name>.<namespace>.svc:<port>.
	// +optional
	URL string `json:"url,omitempty"`

	// replicas is the number of faucet pods the Deployment has, ready or
	// not: the scale subresource's status.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of ready faucet pods. With a Postgres
	// store a replica that owns no key is not ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// selector is the label selector of the faucet's pods, in the string
	// form of `kubectl get pods -l`, for the scale subresource (kubectl
	// scale, a HorizontalPodAutoscaler).
	// +optional
	Selector string `json:"selector,omitempty"`

	// store is the kind of store the faucet runs with: embedded or postgres.
	// +optional
	Store string `json:"store,omitempty"`

	// funding is what the operator last read from the node about the
	// faucet's keys (and treasury): balances, drips left and an estimate of
	// how long they last. The Funded condition summarises it.
	// +optional
	Funding *FundingStatus `json:"funding,omitempty"`

	// nodes are the Stacks nodes of spec.node as the operator last probed
	// them (/v2/info), in their order. The faucet pods keep their own
	// rotation (GET /faucet/v1/info lists it); this is the operator's view.
	// +optional
	// +listType=map
	// +listMapKey=url
	Nodes []NodeHealth `json:"nodes,omitempty"`

	// nodesSummary is how many of the nodes answered, e.g. "2/2": the NODES
	// column.
	// +optional
	NodesSummary string `json:"nodesSummary,omitempty"`

	// btcNodes are the Bitcoin nodes of the btc entry of spec.assets as the
	// operator last probed them (getblockchaininfo), in their order; the faucet
	// pods' own rotation is btc_nodes in GET /faucet/v1/info.
	// +optional
	// +listType=map
	// +listMapKey=url
	BTCNodes []NodeHealth `json:"btcNodes,omitempty"`
}

// NodeHealth is a Stacks or Bitcoin node as the operator last probed it.
type NodeHealth struct {
	// url is the node's URL, without credentials.
	// +required
	URL string `json:"url"`

	// reachable is true when the node is in rotation: it answered the
	// probe, on the faucet's chain, within a few blocks of the best tip
	// (the faucet's own rule, package nodepool).
	// +required
	Reachable bool `json:"reachable"`

	// tipHeight is the height of the node's chain tip.
	// +optional
	TipHeight *int64 `json:"tipHeight,omitempty"`

	// lagBlocks is how far the node trailed the highest tip of the nodes.
	// +optional
	LagBlocks *int64 `json:"lagBlocks,omitempty"`

	// message says why the node is not reachable.
	// +optional
	Message string `json:"message,omitempty"`
}

// FundingStatus reports the balances of the faucet's keys, as the operator
// last read them from the node. Addresses only, never keys.
type FundingStatus struct {
	// keys are the faucet's keys, in the order of the key Secret.
	// +optional
	// +listType=atomic
	Keys []KeyFunding `json:"keys,omitempty"`

	// totalUSTX is the sum of the keys' spendable balances, in µSTX.
	// +optional
	TotalUSTX int64 `json:"totalUSTX"`

	// balanceSTX is totalUSTX in STX with two decimals (rounded down),
	// e.g. "12345.67": the BALANCE column.
	// +optional
	BalanceSTX string `json:"balanceSTX,omitempty"`

	// dripsLeft is how many default drips (amounts.default plus
	// fee.fallback) the keys can still pay, each key counted on its own
	// (a drip is paid by one key).
	// +optional
	DripsLeft int64 `json:"dripsLeft"`

	// runway estimates how long the keys' STX above spec.budget.reserve
	// lasts at the rate it was spent at recently (a short in-memory
	// history of the operator): the RUNWAY column. 0s once the balance is
	// down to the reserve. Absent while unknown or when the balance is not
	// going down.
	// +optional
	Runway *metav1.Duration `json:"runway,omitempty"`

	// lastChecked is when the balances were last read successfully.
	// +optional
	LastChecked *metav1.Time `json:"lastChecked,omitempty"`

	// treasury is the holder account of spec.treasury.
	// +optional
	Treasury *AccountFunding `json:"treasury,omitempty"`

	// assets are the balances of spec.assets, in its order, read with
	// the STX balances above (BTC's from its own node). The report of
	// earlier releases, an object ({sbtc: …, btc: …}) that the API server
	// now returns as {}, reads as none (FundingStatus.UnmarshalJSON) until
	// the next read of the balances replaces it.
	// +optional
	// +listType=map
	// +listMapKey=name
	Assets []AssetFunding `json:"assets,omitempty"`

	// assetsSummary is each asset's drips left, e.g. "sbtc:998 tusd:1000
	// btc:600" ("?" while unknown): the ASSETS column.
	// +optional
	AssetsSummary string `json:"assetsSummary,omitempty"`
}

// AssetFunding is how much of an asset of spec.assets the faucet holds,
// in the asset's base units (sats for sBTC and BTC).
type AssetFunding struct {
	// name is the asset's name in spec.assets.
	// +required
	Name string `json:"name"`

	// assetIdentifier is the token read, ADDRESS.contract-name::token-name:
	// for sbtc without one in spec.assets, the contract the node names in
	// /v2/pox. Absent for BTC.
	// +optional
	AssetIdentifier string `json:"assetIdentifier,omitempty"`

	// network and address are BTC's: its test network, and the faucet's
	// P2WPKH address, derived from the key Secret: send test BTC there to
	// fund the faucet.
	// +optional
	Network string `json:"network,omitempty"`
	// +optional
	Address string `json:"address,omitempty"`

	// keys are a token's balances on the faucet's keys, in the order of
	// the key Secret.
	// +optional
	// +listType=atomic
	Keys []KeyTokenFunding `json:"keys,omitempty"`

	// balance is the keys' balance of the token summed, or BTC's confirmed
	// balance (mined coins count before they mature). Absent until the
	// asset was first read: unknown is not 0.
	// +optional
	Balance *int64 `json:"balance,omitempty"`

	// dripsLeft is how many drips of the asset's amount the balance pays,
	// for a token each key counted on its own (a drip is paid by one key,
	// its fee in STX). BTC's payout fees, paid from the same coins, are
	// not counted. Absent until the asset was first read.
	// +optional
	DripsLeft *int64 `json:"dripsLeft,omitempty"`

	// treasuryBalance is a token's balance on the treasury account
	// (status.funding.treasury), when spec.treasury is set.
	// +optional
	TreasuryBalance *int64 `json:"treasuryBalance,omitempty"`

	// lastChecked is when the balance was last read successfully.
	// +optional
	LastChecked *metav1.Time `json:"lastChecked,omitempty"`

	// message says why the latest read of the asset failed (the node
	// names no sBTC contract, refuses the token's get-balance, the Bitcoin
	// node is unreachable); the figures above, if any, are then those of
	// lastChecked. Absent once a read succeeds.
	// +optional
	Message string `json:"message,omitempty"`
}

// KeyTokenFunding is the token balance of one faucet key.
type KeyTokenFunding struct {
	// address is the key's testnet (ST…) address.
	// +required
	Address string `json:"address"`

	// balance is the key's confirmed balance of the token, in its base
	// units.
	// +optional
	Balance int64 `json:"balance"`

	// dripsLeft is how many drips of the asset this key can pay.
	// +optional
	DripsLeft int64 `json:"dripsLeft"`
}

// KeyFunding is the balance of one faucet key.
type KeyFunding struct {
	// address is the key's testnet (ST…) address.
	// +required
	Address string `json:"address"`

	// balanceUSTX is the confirmed spendable balance, in µSTX.
	// +optional
	BalanceUSTX int64 `json:"balanceUSTX"`

	// dripsLeft is how many default drips this key can pay.
	// +optional
	DripsLeft int64 `json:"dripsLeft"`
}

// AccountFunding is the balance of an account.
type AccountFunding struct {
	// address is the account's testnet (ST…) address.
	// +required
	Address string `json:"address"`

	// balanceUSTX is the confirmed spendable balance, in µSTX.
	// +optional
	BalanceUSTX int64 `json:"balanceUSTX"`
}

// FaucetServer runs a Stacks testnet STX faucet: a Deployment serving the
// faucet HTTP API (one pod on an embedded store's volume, or several sharing
// a Postgres store; either way one writer per key keeps nonces sound), its
// ServiceAccount, a Service and, for the embedded store, a
// PersistentVolumeClaim. Its Ready, Reconciling and Stalled conditions
// follow kstatus, so `kubectl wait --for=condition=Ready` works.
//
// Its name is also the name of its Service, so it must be a DNS-1035 label.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a letter): it also names the faucet's Service"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:scope=Namespaced,shortName=fsrv,categories=faucet
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="URL",type="string",JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Balance",type="string",JSONPath=`.status.funding.balanceSTX`,description="STX on the faucet's keys"
// +kubebuilder:printcolumn:name="Drips Left",type="integer",JSONPath=`.status.funding.dripsLeft`
// +kubebuilder:printcolumn:name="Runway",type="string",JSONPath=`.status.funding.runway`,description="how long the STX above spec.budget.reserve lasts at the recent spending rate; empty while unknown or not falling"
// +kubebuilder:printcolumn:name="Assets",type="string",JSONPath=`.status.funding.assetsSummary`,description="drips left of each asset of spec.assets"
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=`.status.nodesSummary`,description="Stacks nodes of spec.node that answered the operator"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=`.spec.node.url`,priority=1
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=`.spec.replicas`,priority=1
// +kubebuilder:printcolumn:name="Store",type="string",JSONPath=`.status.store`,priority=1
type FaucetServer struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the faucet.
	// +required
	Spec FaucetServerSpec `json:"spec"`

	// status is the observed state of the faucet.
	// +optional
	Status FaucetServerStatus `json:"status,omitzero"`
}

// FaucetServerList is a list of FaucetServers.
// +kubebuilder:object:root=true
type FaucetServerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the FaucetServers.
	// +required
	Items []FaucetServer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FaucetServer{}, &FaucetServerList{})
}
