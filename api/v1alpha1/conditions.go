package v1alpha1

// Condition types of a FaucetServer. They follow kstatus, so `kubectl wait
// --for=condition=Ready` and kstatus-based tools (Flux, kpt) read them as-is.
const (
	// ConditionReady is True when the faucet pod is available behind its
	// Service. Normal polarity: True is good.
	ConditionReady = "Ready"

	// ConditionReconciling is True while the faucet is on its way to Ready:
	// a rollout in progress, a pod not ready yet, a retried error.
	// Abnormal-true polarity: removed, not set False, once done.
	ConditionReconciling = "Reconciling"

	// ConditionStalled is True when the faucet cannot make progress until a
	// user fixes something: a missing key, store, API tokens or BTC Secret,
	// unusable keys, a child name taken by someone else's object, a rollout
	// past its deadline, an image that cannot be pulled, a container that
	// keeps crashing or cannot be created. Abnormal-true polarity: removed,
	// not set False.
	ConditionStalled = "Stalled"

	// ConditionFunded reports whether the faucet's keys can pay for drips,
	// from the balances the operator reads from the node on its own
	// (status.funding). Normal polarity: True is good. It is absent until
	// the first read and while the keys are unusable.
	//
	// Ready does not depend on Funded: a faucet running low still serves
	// drips, and an empty one still serves its status and page, so neither
	// is a failed rollout; kstatus tools (`kubectl wait`, Flux) should not
	// block on funds. Alert on Funded, or on the events it emits when it
	// changes (Normal for True, Warning otherwise).
	ConditionFunded = "Funded"
)

// Reasons of the Funded condition.
const (
	// ReasonFunded (Funded=True): the keys hold at least
	// spec.funding.lowThreshold default drips of STX, and of every asset
	// of spec.assets at least its own lowThreshold (else the faucet's).
	ReasonFunded = "Funded"

	// ReasonLow (Funded=False): fewer drips left than the threshold, but
	// at least one, of STX or of an asset of spec.assets; the message
	// leads with the worst asset, by its name.
	ReasonLow = "Low"

	// ReasonEmpty (Funded=False): no key can pay one default drip of STX,
	// or one drip of an asset of spec.assets; the message names which.
	// Empty wins over Low when one asset is empty and another low.
	ReasonEmpty = "Empty"

	// ReasonNodeUnreachable (Funded=Unknown): the operator could not read
	// the balances from the node, or with a btc entry in spec.assets the
	// BTC balance from the Bitcoin node (the message names which);
	// status.funding keeps the last values read.
	ReasonNodeUnreachable = "NodeUnreachable"

	// ReasonAssetUnreadable (Funded=Unknown): the node answers, but refuses
	// to read a token of spec.assets (its read-only get-balance call
	// fails: typically no such contract at that identifier on this
	// network), names no sBTC contract in /v2/pox for an sbtc entry
	// without an assetIdentifier, or the Bitcoin node answers but cannot
	// tell an address's balance (btcd without --addrindex); the message
	// names the asset and the cause, and so does that asset's message in
	// status.funding.assets. The other assets' figures stay fresh.
	ReasonAssetUnreadable = "AssetUnreadable"
)

// Reasons of the conditions above.
const (
	// ReasonAvailable (Ready=True): the faucet pod is ready.
	ReasonAvailable = "Available"

	// ReasonSuspended (Ready=True): the pod is ready and serves status, but
	// spec.suspend makes it answer drips with 403.
	ReasonSuspended = "Suspended"

	// ReasonProgressing (Ready=False, Reconciling=True): the Deployment is
	// rolling out the current spec or keys.
	ReasonProgressing = "Progressing"

	// ReasonDeploymentUnavailable (Ready=False, Reconciling=True): the
	// rollout is done but the pod is not ready, typically because /readyz
	// fails: node unreachable, wrong chain or no funded key.
	ReasonDeploymentUnavailable = "DeploymentUnavailable"

	// ReasonProgressDeadlineExceeded (Ready=False, Stalled=True): the
	// Deployment gave up waiting for its rollout.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"

	// ReasonStopped (Ready=False, neither Reconciling nor Stalled):
	// spec.replicas is 0 and no faucet pod is left. A deliberate stop is a
	// settled state (kstatus Current); the claim, Service and keys stay.
	ReasonStopped = "Stopped"

	// The reasons below say why the pods of the current pod template do
	// not run, read from their status while the Deployment is not
	// available; they replace Progressing, DeploymentUnavailable and
	// ProgressDeadlineExceeded, and go once the pods recover. Messages name
	// the pod and quote the kubelet or the scheduler, bounded, never a
	// Secret's content.

	// ReasonImagePullFailed (Ready=False, Stalled=True): the kubelet cannot
	// pull the faucet image (ErrImagePull, ImagePullBackOff) or the image
	// is not a valid reference (InvalidImageName). The message names the
	// image and where it comes from: spec.image, else the manager's
	// --server-image.
	ReasonImagePullFailed = "ImagePullFailed"

	// ReasonCrashLooping (Ready=False, Stalled=True): the faucet container
	// keeps exiting (CrashLoopBackOff, or an exit with an error). The
	// message gives its exit code, the runtime's reason and the last lines
	// it logged.
	ReasonCrashLooping = "CrashLooping"

	// ReasonContainerConfigError (Ready=False, Stalled=True): the kubelet
	// cannot create the container (CreateContainerConfigError,
	// CreateContainerError), e.g. a Secret or ConfigMap key that
	// spec.extraEnv refers to does not exist.
	ReasonContainerConfigError = "ContainerConfigError"

	// ReasonUnschedulable (Ready=False, Reconciling=True): the scheduler
	// finds no node for the pod; the message is the scheduler's. It may
	// resolve by itself (a node added, capacity freed), so it is not
	// Stalled unless the rollout's deadline has passed.
	ReasonUnschedulable = "Unschedulable"

	// ReasonKeySecretNotFound (Ready=False, Stalled=True): the Secret named
	// by spec.keySecretRef does not exist. Creating it resumes the faucet.
	ReasonKeySecretNotFound = "KeySecretNotFound"

	// ReasonInvalidKeys (Ready=False, Stalled=True): the Secret lacks the
	// data key, or its content is not a list of hex private keys. Messages
	// name the key's position only, never its content.
	ReasonInvalidKeys = "InvalidKeys"

	// ReasonStoreSecretNotFound (Ready=False, Stalled=True): the Secret
	// named by spec.store.postgres.uriSecretRef does not exist. Creating it
	// resumes the faucet.
	ReasonStoreSecretNotFound = "StoreSecretNotFound"

	// ReasonInvalidStoreSecret (Ready=False, Stalled=True): the store
	// Secret lacks the data key, or its value is not a postgres:// or
	// postgresql:// URI. Messages never quote the value: it holds a
	// password.
	ReasonInvalidStoreSecret = "InvalidStoreSecret"

	// ReasonAPITokensSecretNotFound (Ready=False, Stalled=True): the Secret
	// named by spec.abuse.apiTokens.secretRef does not exist; the pod could
	// not mount it. Creating it resumes the faucet.
	ReasonAPITokensSecretNotFound = "APITokensSecretNotFound"

	// ReasonInvalidAPITokensSecret (Ready=False, Stalled=True): the API
	// tokens Secret lacks the data key. The operator does not parse the
	// tokens file: the faucet does, and logs bad lines by number, never
	// their content.
	ReasonInvalidAPITokensSecret = "InvalidAPITokensSecret"

	// ReasonTreasurySecretNotFound (Ready=False, Stalled=True): the Secret
	// named by spec.treasury.keySecretRef does not exist; the pod could not
	// mount it. Creating it resumes the faucet.
	ReasonTreasurySecretNotFound = "TreasurySecretNotFound"

	// ReasonInvalidTreasuryKey (Ready=False, Stalled=True): the treasury
	// Secret lacks the data key, or it does not hold exactly one hex
	// private key. Messages never quote the key.
	ReasonInvalidTreasuryKey = "InvalidTreasuryKey"

	// ReasonBTCKeySecretNotFound (Ready=False, Stalled=True): the Secret
	// named by the keySecretRef of spec.assets' btc entry does not exist;
	// the pod could not mount it. Creating it resumes the faucet.
	ReasonBTCKeySecretNotFound = "BTCKeySecretNotFound"

	// ReasonInvalidBTCKey (Ready=False, Stalled=True): the BTC key Secret
	// lacks the data key, or its first non-empty line is not a Bitcoin
	// test-network private key (WIF or 64 hex), optionally followed by
	// its P2WPKH address on the btc entry's network. Messages never quote
	// the key.
	ReasonInvalidBTCKey = "InvalidBTCKey"

	// ReasonBTCCredentialsSecretNotFound (Ready=False, Stalled=True): the
	// Secret named by the btc entry's rpc.credentialsSecretRef does not
	// exist. Creating it resumes the faucet.
	ReasonBTCCredentialsSecretNotFound = "BTCCredentialsSecretNotFound"

	// ReasonInvalidBTCCredentials (Ready=False, Stalled=True): the BTC RPC
	// credentials Secret lacks the data key, or its first line is not
	// "user:password". Messages never quote it.
	ReasonInvalidBTCCredentials = "InvalidBTCCredentials"

	// ReasonOIDCClientSecretNotFound (Ready=False, Stalled=True): the
	// Secret named by spec.identity.oidc.clientSecretRef does not exist;
	// the pod could not mount it. Creating it resumes the faucet.
	ReasonOIDCClientSecretNotFound = "OIDCClientSecretNotFound"

	// ReasonInvalidOIDCClientSecret (Ready=False, Stalled=True): the
	// client secret Secret lacks the data key, holds only whitespace (the
	// faucet would refuse to start), or, without
	// spec.identity.sessionKeySecretRef, is shorter than the 16 bytes the
	// session key is derived from. Messages never quote it.
	ReasonInvalidOIDCClientSecret = "InvalidOIDCClientSecret"

	// ReasonSessionKeySecretNotFound (Ready=False, Stalled=True): the
	// Secret named by spec.identity.sessionKeySecretRef does not exist.
	// Creating it resumes the faucet.
	ReasonSessionKeySecretNotFound = "SessionKeySecretNotFound"

	// ReasonInvalidSessionKey (Ready=False, Stalled=True): the session key
	// Secret lacks the data key, or the key is shorter than 16 bytes
	// (whitespace around it not counted), which the faucet refuses.
	// Messages never quote it.
	ReasonInvalidSessionKey = "InvalidSessionKey"

	// ReasonNodeHeadersSecretNotFound (Ready=False, Stalled=True): the
	// Secret named by spec.node.headersSecretRef does not exist. Creating
	// it resumes the faucet.
	ReasonNodeHeadersSecretNotFound = "NodeHeadersSecretNotFound"

	// ReasonInvalidNodeHeaders (Ready=False, Stalled=True): the node
	// headers Secret lacks the data key, or a line is not a "Name: value"
	// header the faucet can send (or names one it sets itself). Messages
	// name the line and the header, never a value.
	ReasonInvalidNodeHeaders = "InvalidNodeHeaders"

	// ReasonInvalidAsset (Ready=False, Stalled=True): an asset identifier
	// of spec.assets passed the CRD's checks but does not parse, e.g. its
	// address fails the c32 checksum (a typo). The faucet would refuse to
	// start with it, so running pods are left alone until it is fixed.
	ReasonInvalidAsset = "InvalidAsset"

	// ReasonDeprecatedAssets (Ready=False, Stalled=True): spec.assets is
	// in the object form of earlier releases ({sbtc: …, btc: …}) with
	// nothing in it, {}: which assets it configured is unknown, so running
	// pods are left alone (they keep the assets they started with) until
	// spec.assets is rewritten as a list. The same reason names the
	// Warning event the operator records when it rewrites an object form
	// with content as the list it stands for, or runs the faucet with that
	// list in place because the API server refuses to store it.
	ReasonDeprecatedAssets = "DeprecatedAssets"

	// ReasonNameConflict (Ready=False, Stalled=True): a Deployment,
	// Service, ServiceAccount or PersistentVolumeClaim with the name of one
	// of the FaucetServer's children exists and is not controlled by it. The
	// operator leaves it alone and does not retry by itself: a change to the
	// FaucetServer (an edit or an annotation) retries, and so does the
	// deletion of a leftover child of an earlier FaucetServer of that name.
	ReasonNameConflict = "NameConflict"

	// ReasonReconcileFailed (Ready=False, Reconciling=True): applying the
	// children failed; the operator retries with backoff.
	ReasonReconcileFailed = "ReconcileFailed"
)
