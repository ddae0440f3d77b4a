package controllers

import (
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/options"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

// The faucet's Deployment, from pure builders like those of resources.go:
// the FaucetServer in, one part of the Deployment out, no client.

// DeploymentFor is the faucet Deployment the operator applies for fs, with
// image as the default image. It leaves the Secrets out of the config hash
// (the reconciler adds their digests); everything else is as applied, so
// tests outside this package can check the container's args and env.
func DeploymentFor(fs *faucetv1alpha1.FaucetServer, image string) *appsv1.Deployment {
	return deploymentFor(fs, image, secretDigests{})
}

// deploymentFor runs `faucet serve` (podTemplateFor) in replicasOf(fs)
// pods, rolled out by deploymentStrategy.
func deploymentFor(fs *faucetv1alpha1.FaucetServer, image string, digests secretDigests) *appsv1.Deployment {
	if fs.Spec.Image != "" {
		image = fs.Spec.Image
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: objectMeta(fs),
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To(replicasOf(fs)),
			Strategy:             deploymentStrategy(fs),
			RevisionHistoryLimit: ptr.To(int32(3)),
			Selector:             &metav1.LabelSelector{MatchLabels: selectorLabels(fs)},
			Template:             podTemplateFor(fs, image, digests),
		},
	}
}

// deploymentStrategy replaces the one pod of the embedded store with the
// Recreate strategy: the volume is ReadWriteOnce and two pods signing with
// the same key would race for its nonces. The pods of a Postgres store,
// which split the keys through the database, roll one extra pod at a time
// with none taken away first, so a rollout leaves no gap.
func deploymentStrategy(fs *faucetv1alpha1.FaucetServer) appsv1.DeploymentStrategy {
	if fs.StoreURISecretKey() == nil {
		return appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
	return appsv1.DeploymentStrategy{
		Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			MaxSurge:       ptr.To(intstr.FromInt32(1)),
		},
	}
}

// podTemplateFor is the faucet's pod running image with the flags of
// serverArgs, under a config hash of both and of the Secrets' digests.
func podTemplateFor(fs *faucetv1alpha1.FaucetServer, image string, digests secretDigests) corev1.PodTemplateSpec {
	args := serverArgs(fs)
	volumes, mounts := podVolumes(fs)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      podLabels(fs),
			Annotations: podAnnotations(fs, configHash(image, args, digests)),
		},
		Spec: podSpecFor(fs, containerFor(fs, image, args, mounts), volumes),
	}
}

// podLabels are spec.podLabels with the common labels over them: ours win,
// as the selector depends on them.
func podLabels(fs *faucetv1alpha1.FaucetServer) map[string]string {
	l := maps.Clone(fs.Spec.PodLabels)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, commonLabels(fs))
	return l
}

// podAnnotations are spec.podAnnotations with ConfigHashAnnotation set to
// hash.
func podAnnotations(fs *faucetv1alpha1.FaucetServer, hash string) map[string]string {
	a := maps.Clone(fs.Spec.PodAnnotations)
	if a == nil {
		a = map[string]string{}
	}
	a[ConfigHashAnnotation] = hash
	return a
}

// podSpecFor runs container c with volumes as fs's ServiceAccount, without
// its token, hardened, and scheduled as the spec says.
func podSpecFor(fs *faucetv1alpha1.FaucetServer, c corev1.Container, volumes []corev1.Volume) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName:           fs.Name,
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		SecurityContext:              podSecurityContext(),
		Containers:                   []corev1.Container{c},
		// The lame duck and the drain must end before the kubelet kills.
		TerminationGracePeriodSeconds: ptr.To(int64(terminationGraceOf(fs) / time.Second)),
		Volumes:                       volumes,
		NodeSelector:                  maps.Clone(fs.Spec.NodeSelector),
		Tolerations:                   deepCopies(fs.Spec.Tolerations, (*corev1.Toleration).DeepCopy),
		Affinity:                      fs.Spec.Affinity.DeepCopy(),
		TopologySpreadConstraints:     deepCopies(fs.Spec.TopologySpreadConstraints, (*corev1.TopologySpreadConstraint).DeepCopy),
		PriorityClassName:             fs.Spec.PriorityClassName,
		ImagePullSecrets:              slices.Clone(fs.Spec.ImagePullSecrets),
	}
}

// podSecurityContext runs the pod as the non-root user, with the runtime's
// default seccomp profile.
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true),
		RunAsUser:    ptr.To(nonRootID),
		RunAsGroup:   ptr.To(nonRootID),
		// Lets the non-root user read the 0440 key and tokens files and
		// write the store's volume.
		FSGroup: ptr.To(nonRootID),
		// Only chown a volume that is not ours yet: a large store would
		// otherwise slow down every start.
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerFor runs `faucet serve` with args from image, its files mounted
// by mounts.
func containerFor(fs *faucetv1alpha1.FaucetServer, image string, args []string, mounts []corev1.VolumeMount) corev1.Container {
	var resources corev1.ResourceRequirements
	if fs.Spec.Resources != nil {
		resources = *fs.Spec.Resources.DeepCopy()
	}
	return corev1.Container{
		Name:  containerName,
		Image: image,
		Args:  args,
		Env:   containerEnv(fs),
		Ports: containerPorts(fs),
		// /readyz checks the node, funding and (with Postgres) that this
		// replica owns a key, with its own 3s bound. It checks BTC too,
		// which the probe leaves out: a Bitcoin node's outage fails the
		// BTC drips alone (with a reason) and must not take the STX and
		// token drips out of the Service.
		// The kubelet probes on a fixed tick from the pod's start, so a
		// replacement pod joins the Service up to one period after it can
		// serve: with the one pod of the embedded store, that is the outage
		// of a pod deletion. A 2s tick keeps it short; /readyz is cheap.
		LivenessProbe:   httpProbe("/healthz", 10, 2),
		ReadinessProbe:  httpProbe(readyzPath, readinessPeriod, 5),
		Resources:       resources,
		SecurityContext: containerSecurityContext(),
		VolumeMounts:    mounts,
		// A failed run's last log lines become its termination message,
		// which the Ready condition quotes (podTrouble): the faucet writes
		// no termination file, prints its fatal error last, and never logs
		// a key.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// httpProbe GETs path on the faucet's port every period seconds, each
// within timeout seconds; probeFailures failures in a row count.
func httpProbe(path string, period, timeout int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(portName)}},
		TimeoutSeconds:   timeout,
		PeriodSeconds:    period,
		FailureThreshold: probeFailures,
	}
}

const (
	// readyzPath is the readiness probe's path: every check of the
	// faucet's /readyz but BTC's.
	readyzPath            = "/readyz?exclude=btc"
	readinessPeriod int32 = 2
	probeFailures   int32 = 3
	// lameDuck is how long a terminating faucet pod of several fails
	// /readyz while still serving: until the readiness probe has failed
	// often enough to take it out of the Service, plus one period for the
	// endpoints change to reach every node's proxy. Kubernetes drops a
	// terminating pod from the endpoints at once, but a probe-driven load
	// balancer does not.
	lameDuck = time.Duration(readinessPeriod*(probeFailures+1)) * time.Second
	// exitMargin is the room left for the process to exit after the drain
	// of in-flight drips (settings.ShutdownTimeout).
	exitMargin = 4 * time.Second
)

// lameDuckOf is fs's pods' lame duck: lameDuck with several replicas, none
// with one. A lone pod has no peer to take its traffic, and on the
// embedded store its replacement starts only once it has exited (the
// store's lock): failing readiness early would only lengthen the gap.
func lameDuckOf(fs *faucetv1alpha1.FaucetServer) time.Duration {
	if replicasOf(fs) > 1 {
		return lameDuck
	}
	return 0
}

// terminationGraceOf covers the lame duck, the drain and the exit.
func terminationGraceOf(fs *faucetv1alpha1.FaucetServer) time.Duration {
	return lameDuckOf(fs) + settings.ShutdownTimeout + exitMargin
}

// containerSecurityContext: non-root, no privilege escalation, no
// capabilities, a read-only root filesystem.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerEnv is FAUCET_STORE from the Postgres URI's Secret, then
// spec.extraEnv; nil when there is neither. The extra variables come after
// the operator's own: the CRD refuses FAUCET_ names, so none of them can
// replace FAUCET_STORE or pose as a setting.
func containerEnv(fs *faucetv1alpha1.FaucetServer) []corev1.EnvVar {
	var env []corev1.EnvVar
	if ref := fs.StoreURISecretKey(); ref != nil {
		env = append(env, corev1.EnvVar{Name: StoreEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ref}})
	}
	if forwardsBTC(fs) {
		env = append(env, corev1.EnvVar{Name: options.PodIPEnv, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}})
	}
	return append(env, deepCopies(fs.Spec.ExtraEnv, (*corev1.EnvVar).DeepCopy)...)
}

// forwardsBTC: replicas sharing a Postgres store with BTC on forward BTC
// drips to the one holding the Bitcoin key, at its pod IP's peer port.
func forwardsBTC(fs *faucetv1alpha1.FaucetServer) bool {
	return fs.StoreURISecretKey() != nil && fs.BTC() != nil
}

// containerPorts is the HTTP port, and the peer port of replicas that
// forward BTC drips to each other.
func containerPorts(fs *faucetv1alpha1.FaucetServer) []corev1.ContainerPort {
	ports := []corev1.ContainerPort{{Name: portName, ContainerPort: ServerPort, Protocol: corev1.ProtocolTCP}}
	if forwardsBTC(fs) {
		ports = append(ports, corev1.ContainerPort{Name: "peer", ContainerPort: options.PeerPort, Protocol: corev1.ProtocolTCP})
	}
	return ports
}

// secretFile is a Secret data key the pod reads as a file, in a directory
// of its own.
type secretFile struct {
	volume, dir string
	ref         *corev1.SecretKeySelector // nil when fs does not use it
}

// secretFiles are the Secret files of fs's pod: the keys, then the API
// tokens, the treasury key, the BTC key, the BTC RPC credentials, the
// OpenID Connect client secret, the session key and the node headers.
func secretFiles(fs *faucetv1alpha1.FaucetServer) []secretFile {
	return []secretFile{
		{keysVolume, keysMountPath, fs.KeySecretKey()},
		{apiTokensVolume, apiTokensMountPath, fs.APITokensSecretKey()},
		{treasuryVolume, treasuryMountPath, fs.TreasurySecretKey()},
		{btcKeyVolume, btcKeyMountPath, fs.BTCKeySecretKey()},
		{btcCredentialsVolume, btcCredentialsMountPath, fs.BTCCredentialsSecretKey()},
		{oidcClientSecretVolume, oidcClientSecretMountPath, fs.OIDCClientSecretKey()},
		{sessionKeyVolume, sessionKeyMountPath, fs.SessionKeySecretKey()},
		{nodeHeadersVolume, nodeHeadersMountPath, fs.NodeHeadersSecretKey()},
	}
}

// podVolumes are the pod's volumes and the container's mounts of them: each
// Secret file fs uses and the switches' ConfigMap, read-only, then, with
// the embedded store, its claim, writable. A Secret is mounted as a directory, never with subPath, so the
// kubelet updates the file in place when the Secret changes (the faucet
// re-reads the API tokens).
func podVolumes(fs *faucetv1alpha1.FaucetServer) ([]corev1.Volume, []corev1.VolumeMount) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, f := range secretFiles(fs) {
		if f.ref == nil {
			continue
		}
		mounts = append(mounts, corev1.VolumeMount{Name: f.volume, MountPath: f.dir, ReadOnly: true})
		volumes = append(volumes, secretVolume(f.volume, f.ref.Name, f.ref.Key))
	}
	mounts = append(mounts, corev1.VolumeMount{Name: switchesVolume, MountPath: switchesMountPath, ReadOnly: true})
	volumes = append(volumes, corev1.Volume{
		Name: switchesVolume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: SwitchesConfigMapName(fs)},
			DefaultMode:          ptr.To[int32](0o444),
		}},
	})
	if fs.StoreURISecretKey() == nil {
		mounts = append(mounts, corev1.VolumeMount{Name: dataVolume, MountPath: dataMountPath})
		volumes = append(volumes, corev1.Volume{
			Name: dataVolume,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: VolumeClaimName(fs),
			}},
		})
	}
	return volumes, mounts
}

// deepCopies is a deep copy of each item of s; nil when s is empty.
func deepCopies[T any](s []T, deepCopy func(*T) *T) []T {
	var out []T
	for i := range s {
		out = append(out, *deepCopy(&s[i]))
	}
	return out
}
