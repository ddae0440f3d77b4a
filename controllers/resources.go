package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
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
	// settings and the key Secret's data, so either rolls the pod.
	ConfigHashAnnotation = "faucet.stxfaucet.dev/config-hash"

	containerName = "faucet"
	portName      = "http"
	// ServerPort is the port the faucet container listens on.
	ServerPort = 3999
	// DefaultServicePort is the Service port when spec.service.port is unset.
	DefaultServicePort = 3999
	keysVolume         = "keys"
	keysMountPath      = "/etc/faucet/keys"
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

// deploymentFor runs `faucet serve` in exactly one pod: replicas 1 and the
// Recreate strategy, because two pods signing with the same key would race
// for its nonces. keysDigest is a digest of the key Secret's data, never the
// data itself; it only feeds the config hash.
func deploymentFor(fs *faucetv1alpha1.FaucetServer, image, keysDigest string) *appsv1.Deployment {
	if fs.Spec.Image != "" {
		image = fs.Spec.Image
	}
	args := serverArgs(fs)
	keyName := keyFileName(fs)

	podLabels := maps.Clone(fs.Spec.PodLabels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, commonLabels(fs)) // ours win: the selector depends on them
	podAnnotations := maps.Clone(fs.Spec.PodAnnotations)
	if podAnnotations == nil {
		podAnnotations = map[string]string{}
	}
	podAnnotations[ConfigHashAnnotation] = configHash(image, args, keysDigest)

	var resources corev1.ResourceRequirements
	if fs.Spec.Resources != nil {
		resources = *fs.Spec.Resources.DeepCopy()
	}
	var affinity *corev1.Affinity
	if fs.Spec.Affinity != nil {
		affinity = fs.Spec.Affinity.DeepCopy()
	}
	var tolerations []corev1.Toleration
	for _, t := range fs.Spec.Tolerations {
		tolerations = append(tolerations, *t.DeepCopy())
	}
	probe := func(path string, timeout int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(portName)}},
			TimeoutSeconds:   timeout,
			PeriodSeconds:    10,
			FailureThreshold: 3,
		}
	}

	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: objectMeta(fs),
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To(int32(1)),
			Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit: ptr.To(int32(3)),
			Selector:             &metav1.LabelSelector{MatchLabels: selectorLabels(fs)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					ServiceAccountName:           fs.Name,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(nonRootID),
						RunAsGroup:     ptr.To(nonRootID),
						FSGroup:        ptr.To(nonRootID), // lets the non-root user read the 0440 key file
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  containerName,
						Image: image,
						Args:  args,
						Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: ServerPort, Protocol: corev1.ProtocolTCP}},
						// /readyz checks the node and funding with its own 3s bound.
						LivenessProbe:  probe("/healthz", 2),
						ReadinessProbe: probe("/readyz", 5),
						Resources:      resources,
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot:             ptr.To(true),
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: keysVolume, MountPath: keysMountPath, ReadOnly: true}},
					}},
					Volumes: []corev1.Volume{{
						Name: keysVolume,
						VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
							SecretName:  fs.Spec.KeySecretRef.Name,
							Items:       []corev1.KeyToPath{{Key: keyName, Path: keyName}},
							DefaultMode: ptr.To(int32(0o440)),
						}},
					}},
					NodeSelector:      maps.Clone(fs.Spec.NodeSelector),
					Tolerations:       tolerations,
					Affinity:          affinity,
					PriorityClassName: fs.Spec.PriorityClassName,
				},
			},
		},
	}
}

// keyFileName is the Secret data key that holds the private keys.
func keyFileName(fs *faucetv1alpha1.FaucetServer) string {
	if k := fs.Spec.KeySecretRef.Key; k != "" {
		return k
	}
	return faucetv1alpha1.DefaultKeySecretKey
}

// serverArgs maps the spec onto `faucet serve` flags. Unset optional fields
// pass no flag, so the server's own defaults apply.
func serverArgs(fs *faucetv1alpha1.FaucetServer) []string {
	s := fs.Spec
	args := []string{
		"serve",
		"--listen=:" + strconv.Itoa(ServerPort),
		"--log-format=json",
		"--node-url=" + s.Node.URL,
		"--key-file=" + path.Join(keysMountPath, keyFileName(fs)),
	}
	flag := func(name, value string) { args = append(args, "--"+name+"="+value) }
	i64 := func(name string, v *int64) {
		if v != nil {
			flag(name, strconv.FormatInt(*v, 10))
		}
	}
	if s.Node.Timeout != nil {
		flag("node-timeout", s.Node.Timeout.Duration.String())
	}
	i64("chain-id", s.ChainID)
	if a := s.Amounts; a != nil {
		i64("amount", a.Default)
		if a.StackingPaddingPercent != nil {
			flag("stacking-padding-percent", strconv.Itoa(int(*a.StackingPaddingPercent)))
		}
		i64("stacking-amount", a.Stacking)
	}
	if f := s.Fee; f != nil {
		i64("fee-min", f.Min)
		i64("fee-max", f.Max)
		i64("fee-fallback", f.Fallback)
	}
	if s.Memo != nil {
		flag("memo", *s.Memo)
	}
	if rl := s.RateLimits; rl != nil {
		limit := func(name string, l *faucetv1alpha1.RateLimit) {
			if l != nil {
				flag(name, fmt.Sprintf("%d/%s", l.Requests, l.Window.Duration))
			}
		}
		limit("limit-address", rl.PerAddress)
		limit("limit-stacking", rl.StackingPerAddress)
		limit("limit-ip", rl.PerIP)
		if rl.TrustedProxyHops != nil {
			flag("trusted-proxy-hops", strconv.Itoa(int(*rl.TrustedProxyHops)))
		}
	}
	if s.Suspend {
		args = append(args, "--suspend")
	}
	return args
}

// configHash digests what the server runs with. The pod template carries
// everything else already; the keys reach it only through this digest.
func configHash(image string, args []string, keysDigest string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", image, strings.Join(args, "\x00"), keysDigest)
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
