package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/settings"
	"github.com/stxfaucet/faucet-operator/server/switches"
)

// The builders in this file are pure: a FaucetServer in, an object out, no
// client. Everything they set is what the operator owns through server-side
// apply; fields they leave out stay with whoever else sets them.

const (
	// FieldManager is the server-side apply field manager of the operator.
	FieldManager = "faucet-operator"

	// Labels on every child. The selector uses only name and instance, which
	// never change for a given FaucetServer.
	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	appName        = "faucet-server"

	// ConfigHashAnnotation on the pod template changes with the server
	// settings and the data of the key, store, treasury, BTC, sign-in and
	// node headers Secrets, so any of them rolls the pods. The API tokens Secret is not
	// part of it: the kubelet updates its volume in place and the faucet
	// re-reads the file.
	ConfigHashAnnotation = "faucet.stxfaucet.dev/config-hash"

	containerName = "faucet"
	portName      = "http"
	// ServerPort is the port the faucet container listens on.
	ServerPort = settings.Port
	// DefaultServicePort is the Service port when spec.service.port is unset.
	DefaultServicePort = settings.Port
	keysVolume         = "keys"
	keysMountPath      = "/etc/faucet/keys"
	// The API tokens file, from its own Secret (spec.abuse.apiTokens).
	apiTokensVolume    = "api-tokens"
	apiTokensMountPath = "/etc/faucet/api-tokens"
	// The treasury's holder key, from its own Secret (spec.treasury).
	treasuryVolume    = "treasury"
	treasuryMountPath = "/etc/faucet/treasury"
	// The Bitcoin key and the Bitcoin node's RPC credentials, from the
	// Secrets of the btc entry of spec.assets.
	btcKeyVolume            = "btc-key"
	btcKeyMountPath         = "/etc/faucet/btc-key"
	btcCredentialsVolume    = "btc-rpc-credentials"
	btcCredentialsMountPath = "/etc/faucet/btc-rpc"
	// The OpenID Connect client secret and the sign-in session key, from
	// the Secrets of spec.identity.
	oidcClientSecretVolume    = "oidc-client-secret"
	oidcClientSecretMountPath = "/etc/faucet/oidc"
	sessionKeyVolume          = "session-key"
	sessionKeyMountPath       = "/etc/faucet/session"
	// The header lines sent to the Stacks nodes, from the Secret of
	// spec.node.headersSecretRef.
	nodeHeadersVolume    = "node-headers"
	nodeHeadersMountPath = "/etc/faucet/node-headers"

	// The switches (spec.suspend, suspendedAssets, disabledAssets), from
	// the FaucetServer's ConfigMap, which the faucet follows while it runs.
	switchesVolume    = "switches"
	switchesMountPath = "/etc/faucet/switches"
	switchesFile      = "switches.json"

	// The embedded store: an SQLite file on the FaucetServer's volume.
	dataVolume    = "data"
	dataMountPath = "/var/lib/faucet"
	storeFile     = "faucet.db"
	// StoreEnv carries a Postgres URI into the container from its Secret:
	// `faucet serve` reads every flag from FAUCET_<NAME>, and an env var
	// keeps the password out of the Deployment spec and the process list.
	StoreEnv = "FAUCET_STORE"
	// nonRootID is distroless's "nonroot" user; any non-zero id works.
	nonRootID int64 = 65532
)

// selectorLabels select a FaucetServer's pod.
func selectorLabels(fs *faucetv1alpha1.FaucetServer) map[string]string {
	return map[string]string{labelName: appName, labelInstance: fs.Name}
}

// commonLabels mark every child; the manager caches only objects carrying
// labelManagedBy.
func commonLabels(fs *faucetv1alpha1.FaucetServer) map[string]string {
	l := selectorLabels(fs)
	l[labelManagedBy] = FieldManager
	return l
}

func objectMeta(fs *faucetv1alpha1.FaucetServer) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            fs.Name,
		Namespace:       fs.Namespace,
		Labels:          commonLabels(fs),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(fs, faucetv1alpha1.GroupVersion.WithKind("FaucetServer"))},
	}
}

// serviceAccountFor is the pod's identity. The faucet never calls the
// Kubernetes API, so no token is mounted and no role is bound.
func serviceAccountFor(fs *faucetv1alpha1.FaucetServer) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:                     metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta:                   objectMeta(fs),
		AutomountServiceAccountToken: ptr.To(false),
	}
}

// SwitchesConfigMapName is the name of the ConfigMap holding fs's
// switches.
func SwitchesConfigMapName(fs *faucetv1alpha1.FaucetServer) string { return fs.Name + "-switches" }

// SwitchesConfigMapFor is the ConfigMap of fs's switches the pods mount
// (for tests that play the kubelet's part).
func SwitchesConfigMapFor(fs *faucetv1alpha1.FaucetServer) *corev1.ConfigMap { return switchesFor(fs) }

// switchesFor is the ConfigMap of fs's switches. It is mounted as a
// directory (never subPath), so the kubelet replaces the file in the
// running pods and the faucet applies it without a restart; its content is
// not in the pod template's hash for the same reason. switches.json is
// always one whole JSON object, `{}` when nothing is off: the faucet
// applies nothing else (an empty file, as a key without a value projects,
// keeps the switches in force), so "every asset on" must be written out.
func switchesFor(fs *faucetv1alpha1.FaucetServer) *corev1.ConfigMap {
	st := switches.State{Suspend: fs.Spec.Suspend, SuspendedAssets: fs.Spec.SuspendedAssets, DisabledAssets: fs.Spec.DisabledAssets}
	b, _ := json.Marshal(st) // strings and a bool: cannot fail
	meta := objectMeta(fs)
	meta.Name = SwitchesConfigMapName(fs)
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Data:       map[string]string{switchesFile: string(b)},
	}
}

// serviceFor exposes the faucet API (and /metrics) on spec.service.port.
func serviceFor(fs *faucetv1alpha1.FaucetServer) *corev1.Service {
	svcType, port := corev1.ServiceTypeClusterIP, int32(DefaultServicePort)
	var annotations map[string]string
	if s := fs.Spec.Service; s != nil {
		if s.Type != "" {
			svcType = s.Type
		}
		port = ptr.Deref(s.Port, port)
		annotations = maps.Clone(s.Annotations)
	}
	meta := objectMeta(fs)
	meta.Annotations = annotations
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:     svcType,
			Selector: selectorLabels(fs),
			Ports: []corev1.ServicePort{{
				Name:       portName,
				Protocol:   corev1.ProtocolTCP,
				Port:       port,
				TargetPort: intstr.FromString(portName),
			}},
		},
	}
}

// secretDigests are digests of the Secrets the pods read, never their data:
// they only feed the config hash, so a changed Secret rolls the pods.
type secretDigests struct {
	keys     string // the key Secret's data key
	store    string // the Postgres URI; "" for the embedded store
	treasury string // the treasury key; "" without spec.treasury
	// The Bitcoin key and RPC credentials; "" without a btc entry in spec.assets
	// (or, for the credentials, without credentialsSecretRef).
	btcKey, btcCredentials string
	// The OpenID Connect client secret and the session key; "" without
	// spec.identity or the Secret.
	oidcClientSecret, sessionKey string
	// The Stacks node headers; "" without spec.node.headersSecretRef.
	nodeHeaders string
}

// replicasOf is the number of pods fs runs: spec.replicas with a Postgres
// store, at most one with the embedded store, whose volume has one writer
// (none when spec.replicas is 0: the faucet is stopped).
func replicasOf(fs *faucetv1alpha1.FaucetServer) int32 {
	n := ptr.Deref(fs.Spec.Replicas, 1)
	if fs.StoreKind() != faucetv1alpha1.StorePostgres {
		return min(n, 1)
	}
	return n
}

// stopped says fs's spec.replicas is 0: no faucet pod should run.
func stopped(fs *faucetv1alpha1.FaucetServer) bool { return replicasOf(fs) == 0 }

// podSelector is the label selector of fs's pods in its string form, for
// status.selector and the scale subresource.
func podSelector(fs *faucetv1alpha1.FaucetServer) string {
	return labels.SelectorFromSet(selectorLabels(fs)).String()
}

// podDisruptionBudgetFor lets a voluntary disruption (a node drain, a
// cluster upgrade) take one of fs's pods at a time, so the others keep
// serving; nil when fs runs a single pod, which a budget could only keep
// from being drained at all.
func podDisruptionBudgetFor(fs *faucetv1alpha1.FaucetServer) *policyv1.PodDisruptionBudget {
	if replicasOf(fs) <= 1 {
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(fs),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: selectorLabels(fs)},
		},
	}
}

// VolumeClaimName names the embedded store's PersistentVolumeClaim.
func VolumeClaimName(fs *faucetv1alpha1.FaucetServer) string { return fs.Name + "-data" }

// persistentVolumeClaimFor is the embedded store's volume. existing is the
// claim as it is now, nil before it is created. A claim's StorageClass and
// access modes are fixed at creation and its size can only grow, and only
// once it is bound, so the claim keeps its class and never asks for less
// than it has: applying anything else would be refused over and over.
func persistentVolumeClaimFor(fs *faucetv1alpha1.FaucetServer, existing *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	size := resource.MustParse(faucetv1alpha1.DefaultEmbeddedStoreSize)
	var class *string
	if s := fs.Spec.Store; s != nil && s.Embedded != nil {
		if s.Embedded.Size != nil {
			size = s.Embedded.Size.DeepCopy()
		}
		class = copyPtr(s.Embedded.StorageClassName)
	}
	if existing != nil {
		class = copyPtr(existing.Spec.StorageClassName)
		if current, ok := existing.Spec.Resources.Requests[corev1.ResourceStorage]; ok &&
			(existing.Status.Phase != corev1.ClaimBound || size.Cmp(current) < 0) {
			size = current.DeepCopy()
		}
	}
	meta := objectMeta(fs)
	meta.Name = VolumeClaimName(fs)
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: class,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: size},
			},
		},
	}
}

// embeddedStoreClaim is the claim fs's store needs: persistentVolumeClaimFor
// with the embedded store, nil with Postgres.
func embeddedStoreClaim(fs *faucetv1alpha1.FaucetServer, existing *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	if fs.StoreKind() != faucetv1alpha1.StoreEmbedded {
		return nil
	}
	return persistentVolumeClaimFor(fs, existing)
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}

// secretVolume projects one key of a Secret as a file of the same name,
// readable by the owner and group only.
func secretVolume(name, secret, key string) corev1.Volume {
	return corev1.Volume{
		Name: name,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  secret,
			Items:       []corev1.KeyToPath{{Key: key, Path: key}},
			DefaultMode: ptr.To(int32(0o440)),
		}},
	}
}

// configHash digests what the server runs with. The pod template carries
// everything else already; the Secrets reach it only through their digests.
func configHash(image string, args []string, digests secretDigests) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s", image, strings.Join(args, "\x00"), digests.keys, digests.store)
	// The optional Secrets count only when used, so adding one to the
	// operator leaves the hash of every faucet without it, and with it its
	// pods, as it was.
	for _, d := range [...]struct{ name, digest string }{
		{"treasury", digests.treasury},
		{"btc-key", digests.btcKey},
		{"btc-rpc-credentials", digests.btcCredentials},
		{"oidc-client-secret", digests.oidcClientSecret},
		{"session-key", digests.sessionKey},
		{"node-headers", digests.nodeHeaders},
	} {
		if d.digest != "" {
			fmt.Fprintf(h, "\x00%s\x00%s", d.name, d.digest)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// serviceURL is the in-cluster URL of the faucet's Service. It uses the
// ".svc" form, which resolves whatever the cluster domain is.
func serviceURL(svc *corev1.Service) string {
	if svc == nil || len(svc.Spec.Ports) == 0 {
		return ""
	}
	return fmt.Sprintf("http://%s.%s.svc:%d", svc.Name, svc.Namespace, svc.Spec.Ports[0].Port)
}
