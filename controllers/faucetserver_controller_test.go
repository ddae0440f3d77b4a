package controllers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

const fsName = "faucet"

var _ = Describe("FaucetServer controller", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fsrv-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name // envtest has no namespace controller to delete it; names never repeat
	})

	It("creates the ServiceAccount, Deployment and Service, owned by the FaucetServer", func() {
		keys := newKeys(1)
		createKeySecret(ns, keys)
		fs := createFaucetServer(ns, nil)

		By("applying a Deployment that runs `faucet serve` with the spec; the defaults the CRD filled in are serve's, so no flag")
		d := eventuallyDeployment(ns)
		Expect(*d.Spec.Replicas).To(Equal(int32(1)))
		Expect(d.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType))
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Image).To(Equal(testImage))
		defaulted := getFaucetServer(Default, ns).Spec
		Expect(defaulted.Amounts).NotTo(BeNil(), "the CRD fills in spec.amounts")
		Expect(defaulted.Fee).NotTo(BeNil(), "the CRD fills in spec.fee")
		Expect(defaulted.RateLimits).NotTo(BeNil(), "the CRD fills in spec.rateLimits")
		Expect(c.Args).To(Equal([]string{
			"serve", "--node-url=http://stacks-node.stacks.svc:20443", "--key-file=/etc/faucet/keys/keys",
			"--switches-file=/etc/faucet/switches/switches.json",
			"--store=/var/lib/faucet/faucet.db", "--listen=:3999", "--shutdown-delay=0s", "--log-format=json",
		}))
		Expect(c.Args).To(Equal(serverArgs(newFaucetServer(ns))), "the spec as the user wrote it, before defaulting, passes the same flags")
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--suspend")))
		for _, prefix := range []string{"--pow-", "--api-tokens-file", "--ip-", "--balance-cap", "--explorer-tx-url", "--low-drips"} {
			Expect(c.Args).NotTo(ContainElement(HavePrefix(prefix)), "no spec.abuse or spec.page, no flag: the server's defaults apply")
		}
		Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(d.Spec.Template.Spec.Volumes[0].Secret.SecretName).To(Equal("faucet-keys"))
		Expect(d.Spec.Template.Annotations).To(HaveKey(ConfigHashAnnotation))
		expectOwnedBy(d, fs)

		By("keeping the state in the embedded store, on a volume the FaucetServer owns")
		Expect(c.Args).To(ContainElement("--store=/var/lib/faucet/faucet.db"))
		Expect(c.Env).To(BeEmpty())
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(
			HaveField("Name", "data"), HaveField("PersistentVolumeClaim.ClaimName", "faucet-data"))))
		Expect(c.VolumeMounts).To(ContainElement(And(
			HaveField("Name", "data"), HaveField("MountPath", "/var/lib/faucet"), HaveField("ReadOnly", BeFalse()))))
		pvc := &corev1.PersistentVolumeClaim{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-data"}, pvc)).To(Succeed())
		Expect(pvc.Spec.AccessModes).To(ConsistOf(corev1.ReadWriteOnce))
		Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("1Gi"))
		expectOwnedBy(pvc, fs)
		stored := getFaucetServer(Default, ns).Spec.Store
		Expect(stored).NotTo(BeNil(), "the CRD defaults an omitted store to the embedded one")
		Expect(stored.Embedded).NotTo(BeNil())
		Expect(stored.Embedded.Size.String()).To(Equal("1Gi"))

		By("applying the ServiceAccount and the Service")
		sa := &corev1.ServiceAccount{}
		Expect(k8sClient.Get(suiteCtx, key(ns), sa)).To(Succeed())
		Expect(sa.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
		expectOwnedBy(sa, fs)
		svc := &corev1.Service{}
		Expect(k8sClient.Get(suiteCtx, key(ns), svc)).To(Succeed())
		Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Expect(svc.Spec.Ports).To(HaveLen(1))
		Expect(svc.Spec.Ports[0].Port).To(Equal(int32(3999)))
		Expect(svc.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
		expectOwnedBy(svc, fs)

		By("reporting the rollout, the URL and the faucet address, with no finalizer")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			expectCondition(g, got, faucetv1alpha1.ConditionReconciling, metav1.ConditionTrue, faucetv1alpha1.ReasonProgressing)
			g.Expect(got.Status.URL).To(Equal(fmt.Sprintf("http://faucet.%s.svc:3999", ns)))
			g.Expect(got.Status.FaucetAddresses).To(Equal(addresses(keys)))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.Store).To(Equal(faucetv1alpha1.StoreEmbedded))
			g.Expect(got.Finalizers).To(BeEmpty())
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeNormal, faucetv1alpha1.ReasonProgressing)
	})

	It("follows the Deployment's availability in Ready", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		eventuallyDeployment(ns)

		By("the pod becoming available")
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionReconciling)).To(BeNil())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
			g.Expect(got.Status.ReadyReplicas).To(Equal(int32(1)))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeNormal, faucetv1alpha1.ReasonAvailable)

		By("reconciling with nothing changed: no status write, no event")
		rv := getFaucetServer(Default, ns).ResourceVersion
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-keys"}, secret)).To(Succeed())
		secret.Labels = map[string]string{"touched": "true"} // the Secret watch requeues the FaucetServer
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(getFaucetServer(g, ns).ResourceVersion).To(Equal(rv))
		}, 2*time.Second).Should(Succeed())
		var events eventsv1.EventList
		Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).To(ContainElement(And(HaveField("Reason", faucetv1alpha1.ReasonAvailable), HaveField("Series", BeNil()))))
		Expect(events.Items).To(HaveEach(HaveField("Series", BeNil())), "an event was repeated")

		By("the pod becoming unready")
		setDeploymentStatus(ns, false)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonDeploymentUnavailable)
			expectCondition(g, got, faucetv1alpha1.ConditionReconciling, metav1.ConditionTrue, faucetv1alpha1.ReasonDeploymentUnavailable)
			g.Expect(got.Status.ReadyReplicas).To(BeZero())
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonDeploymentUnavailable)
	})

	It("reports a missing key Secret, then recovers when it is created", func() {
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonKeySecretNotFound)
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonKeySecretNotFound)
			g.Expect(got.Status.FaucetAddresses).To(BeEmpty())
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonKeySecretNotFound)
		err := k8sClient.Get(suiteCtx, key(ns), &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Deployment without keys, got %v", err)

		By("creating the Secret, which the Secret watch reports: no polling")
		keys := newKeys(2)
		createKeySecret(ns, keys)
		eventuallyDeployment(ns)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
			g.Expect(got.Status.FaucetAddresses).To(Equal(addresses(keys)))
		}).Should(Succeed())
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
		}).Should(Succeed())
	})

	It("reports unparsable keys by position only", func() {
		good := newKeys(1)[0]
		bad := strings.Repeat("ab", 32) + "02" // 33 bytes without the 01 marker
		createKeySecretData(ns, "keys", good.Hex()+"\n"+bad)
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidKeys)
			g.Expect(c.Message).To(ContainSubstring("key #2"))
			g.Expect(c.Message).NotTo(ContainSubstring("abab"))
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidKeys)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonInvalidKeys)
	})

	It("reports a Secret without the data key as invalid keys", func() {
		createKeySecretData(ns, "other", newKeys(1)[0].Hex())
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidKeys)
			g.Expect(c.Message).To(ContainSubstring(`no data key "keys"`))
		}).Should(Succeed())
	})

	It("lists the address of every key in a multi-key Secret", func() {
		k := newKeys(3)
		uncompressed, err := stacks.ParsePrivateKey(k[2].Hex()[:64]) // same secret, other address
		Expect(err).NotTo(HaveOccurred())
		createKeySecretData(ns, "keys", fmt.Sprintf("# faucet keys\n%s,%s\n\n%s\n%s\n", k[0].Hex(), k[1].Hex(), k[2].Hex(), uncompressed.Hex()))
		createFaucetServer(ns, nil)
		want := addresses([]*stacks.PrivateKey{k[0], k[1], k[2], uncompressed})
		Eventually(func(g Gomega) {
			g.Expect(getFaucetServer(g, ns).Status.FaucetAddresses).To(Equal(want))
		}).Should(Succeed())
	})

	It("rolls the pod when the keys are rotated", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		before := eventuallyDeployment(ns).Spec.Template.Annotations[ConfigHashAnnotation]

		rotated := newKeys(2)
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-keys"}, secret)).To(Succeed())
		secret.Data = map[string][]byte{"keys": []byte(hexKeys(rotated))}
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())

		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(before))
			g.Expect(getFaucetServer(g, ns).Status.FaucetAddresses).To(Equal(addresses(rotated)))
		}).Should(Succeed())
	})

	It("updates the Deployment when the spec changes, and undoes drift", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		before := eventuallyDeployment(ns)

		// A merge patch, not an update: the operator writes the status
		// (funding reads included) at any time.
		fs := getFaucetServer(Default, ns)
		patch := client.MergeFrom(fs.DeepCopy())
		fs.Spec.Amounts.Default = ptr.To(int64(1_000_000))
		fs.Spec.Memo = ptr.To("hackathon")
		fs.Spec.Service.Port = ptr.To(int32(80))
		fs.Spec.NodeSelector = map[string]string{"pool": "faucets"}
		Expect(k8sClient.Patch(suiteCtx, fs, patch)).To(Succeed())

		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			args := d.Spec.Template.Spec.Containers[0].Args
			g.Expect(args).To(ContainElements("--amount=1000000", "--memo=hackathon"))
			g.Expect(args).NotTo(ContainElement("--amount=500000000"))
			g.Expect(d.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("pool", "faucets"))
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(before.Spec.Template.Annotations[ConfigHashAnnotation]))
			got := getFaucetServer(g, ns)
			g.Expect(got.Status.URL).To(HaveSuffix(".svc:80"))
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())

		By("someone scaling the Deployment up: one writer per key, so back to 1")
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
		patch = client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(int32(3))
		Expect(k8sClient.Patch(suiteCtx, d, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
		}).Should(Succeed())
	})

	It("stalls on an object of the same name that it does not control, without retrying", func() {
		// E.g. a FaucetServer named like the Stacks node's own Service.
		theirs := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fsName},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "stacks-node"},
				Ports:    []corev1.ServicePort{{Name: "rpc", Port: 20443}},
			},
		}
		Expect(k8sClient.Create(suiteCtx, theirs)).To(Succeed())
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonNameConflict)
			g.Expect(c.Message).To(ContainSubstring(`Service "faucet" already exists and is not controlled by this FaucetServer`))
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonNameConflict)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionReconciling)).To(BeNil())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonNameConflict)
		svc := &corev1.Service{}
		Expect(k8sClient.Get(suiteCtx, key(ns), svc)).To(Succeed())
		Expect(svc.ResourceVersion).To(Equal(theirs.ResourceVersion), "the foreign Service was modified")
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}} {
			Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns), obj))).To(BeTrue(), "%T applied despite the conflict", obj)
		}

		By("not retrying with backoff: freeing the name alone changes nothing")
		Expect(k8sClient.Delete(suiteCtx, theirs)).To(Succeed())
		Consistently(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns), &appsv1.Deployment{}))
		}, 3*time.Second).Should(BeTrue(), "the stalled FaucetServer was retried on its own")

		By("retrying on a change to the FaucetServer: an annotation")
		fs := getFaucetServer(Default, ns)
		patch := client.MergeFrom(fs.DeepCopy())
		fs.Annotations = map[string]string{"faucet.stxfaucet.dev/retry": "1"}
		Expect(k8sClient.Patch(suiteCtx, fs, patch)).To(Succeed())
		d := eventuallyDeployment(ns)
		Expect(k8sClient.Get(suiteCtx, key(ns), svc)).To(Succeed())
		expectOwnedBy(svc, getFaucetServer(Default, ns))
		expectOwnedBy(d, getFaucetServer(Default, ns))
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
		}).Should(Succeed())
	})

	It("resumes by itself when a leftover child of an earlier FaucetServer of the same name goes away", func() {
		// What the garbage collector has not removed yet after a delete
		// and re-create: our labels, a controller reference to the old UID.
		leftover := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: "faucet-data",
				Labels: map[string]string{labelName: appName, labelInstance: fsName, labelManagedBy: FieldManager},
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: faucetv1alpha1.GroupVersion.String(), Kind: "FaucetServer", Name: fsName,
					UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true),
				}},
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		Expect(k8sClient.Create(suiteCtx, leftover)).To(Succeed())
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, nil)
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonNameConflict)
			g.Expect(c.Message).To(ContainSubstring(`PersistentVolumeClaim "faucet-data" already exists`))
		}).Should(Succeed())

		By("the old claim being deleted: its watch event retries, no one touches the FaucetServer")
		// envtest has no garbage collector and no controller to lift the
		// claim protection finalizer its admission adds: play both.
		Expect(k8sClient.Delete(suiteCtx, leftover)).To(Succeed())
		Eventually(func() error {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(leftover), pvc); err != nil {
				return err
			}
			pvc.Finalizers = nil
			return k8sClient.Update(suiteCtx, pvc)
		}).Should(Succeed())
		eventuallyDeployment(ns)
		Eventually(func(g Gomega) {
			pvc := &corev1.PersistentVolumeClaim{}
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-data"}, pvc)).To(Succeed())
			g.Expect(metav1.GetControllerOf(pvc)).To(HaveField("UID", getFaucetServer(g, ns).UID))
			g.Expect(meta.FindStatusCondition(getFaucetServer(g, ns).Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
		}).Should(Succeed())
	})

	It("runs several replicas on a Postgres store, the URI only ever in its Secret", func() {
		const password = "s3cr3t-pa55w0rd"
		uri := "postgresql://app:" + password + "@faucet-db-rw:5432/app"
		createKeySecret(ns, newKeys(3))
		createSecret(ns, "faucet-db-app", map[string]string{"uri": uri, "password": password})
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Replicas = ptr.To(int32(3))
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{Postgres: &faucetv1alpha1.PostgresStore{
				URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "faucet-db-app"},
			}}
		})

		By("rolling out 3 replicas without a gap, FAUCET_STORE from the Secret, no volume")
		d := eventuallyDeployment(ns)
		Expect(*d.Spec.Replicas).To(Equal(int32(3)))
		Expect(d.Spec.Strategy.Type).To(Equal(appsv1.RollingUpdateDeploymentStrategyType))
		Expect(d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(BeZero())
		Expect(d.Spec.Strategy.RollingUpdate.MaxSurge.IntValue()).To(Equal(1))
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Env).To(ConsistOf(And(
			HaveField("Name", "FAUCET_STORE"),
			HaveField("Value", BeEmpty()),
			HaveField("ValueFrom.SecretKeyRef.Name", "faucet-db-app"),
			HaveField("ValueFrom.SecretKeyRef.Key", "uri"), // the CRD's default: CloudNativePG's key
		)))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--store")))
		Expect(d.Spec.Template.Spec.Volumes).To(ConsistOf(HaveField("Name", "keys"), HaveField("Name", "switches")), "no data volume")
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-data"}, &corev1.PersistentVolumeClaim{}))).
			To(BeTrue(), "a claim for a Postgres store")
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			g.Expect(got.Status.Store).To(Equal(faucetv1alpha1.StorePostgres))
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
		}).Should(Succeed())

		By("rolling the pods when the URI changes, e.g. a rotated password")
		before := d.Spec.Template.Annotations[ConfigHashAnnotation]
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-db-app"}, secret)).To(Succeed())
		secret.Data["uri"] = []byte(strings.Replace(uri, password, password+"-2", 1))
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).NotTo(Equal(before))
		}).Should(Succeed())

		By("and not when only the Secret's other data changes")
		after := d.Spec.Template.Annotations[ConfigHashAnnotation]
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-db-app"}, secret)).To(Succeed())
		secret.Data["username"] = []byte("app")
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).To(Equal(after))
		}, 2*time.Second).Should(Succeed())

		By("a PodDisruptionBudget letting a drain take one replica at a time")
		pdb := &policyv1.PodDisruptionBudget{}
		Eventually(func() error { return k8sClient.Get(suiteCtx, key(ns), pdb) }).Should(Succeed())
		Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))))
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))
		expectOwnedBy(pdb, getFaucetServer(Default, ns))

		By("all replicas available: Ready")
		setDeploymentReplicas(ns, 3, 3)
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
			g.Expect(got.Status.ReadyReplicas).To(Equal(int32(3)))
		}).Should(Succeed())

		By("never putting the URI or the password in the Deployment, the status or events")
		expectNoSecretText(ns, password)
	})

	It("switches a faucet between the embedded store and Postgres, both ways", func() {
		createKeySecret(ns, newKeys(2))
		createSecret(ns, "faucet-db-app", map[string]string{"uri": "postgresql://app:pw@db:5432/app"})
		createFaucetServer(ns, nil)
		Expect(eventuallyDeployment(ns).Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType))

		update := func(mutate func(*faucetv1alpha1.FaucetServer)) {
			GinkgoHelper()
			Eventually(func() error {
				fs := getFaucetServer(Default, ns)
				mutate(fs)
				return k8sClient.Update(suiteCtx, fs)
			}).Should(Succeed())
		}
		By("to Postgres with two replicas: RollingUpdate, no volume, the claim left in place")
		update(func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Replicas = ptr.To(int32(2))
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{Postgres: &faucetv1alpha1.PostgresStore{
				URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "faucet-db-app"},
			}}
		})
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
			g.Expect(d.Spec.Strategy.Type).To(Equal(appsv1.RollingUpdateDeploymentStrategyType))
			g.Expect(d.Spec.Template.Spec.Volumes).To(ConsistOf(HaveField("Name", "keys"), HaveField("Name", "switches")), "no data volume")
			g.Expect(d.Spec.Template.Spec.Containers[0].Env).To(HaveLen(1))
			g.Expect(getFaucetServer(g, ns).Status.Store).To(Equal(faucetv1alpha1.StorePostgres))
		}).Should(Succeed())
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-data"}, &corev1.PersistentVolumeClaim{})).
			To(Succeed(), "the embedded store's data is kept until the FaucetServer goes")
		Eventually(func() error { return k8sClient.Get(suiteCtx, key(ns), &policyv1.PodDisruptionBudget{}) }).
			Should(Succeed(), "two replicas get a PodDisruptionBudget")

		By("back to the embedded store: Recreate again, without the rolling-update settings")
		update(func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Replicas = ptr.To(int32(1))
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{Embedded: &faucetv1alpha1.EmbeddedStore{}}
		})
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
			g.Expect(d.Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType))
			g.Expect(d.Spec.Strategy.RollingUpdate).To(BeNil())
			g.Expect(d.Spec.Template.Spec.Containers[0].Env).To(BeEmpty())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--store=/var/lib/faucet/faucet.db"))
			got := getFaucetServer(g, ns)
			g.Expect(got.Status.Store).To(Equal(faucetv1alpha1.StoreEmbedded))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionReconciling)).
				To(HaveField("Reason", faucetv1alpha1.ReasonProgressing), "no apply error")
			g.Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns), &policyv1.PodDisruptionBudget{}))).
				To(BeTrue(), "one pod: the budget of the replicas is deleted")
		}).Should(Succeed())
	})

	It("reports a missing store Secret, then an unusable URI, naming neither its value", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{Postgres: &faucetv1alpha1.PostgresStore{
				URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "faucet-db-app", Key: "dsn"},
			}}
		})
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonStoreSecretNotFound)
			g.Expect(c.Message).To(ContainSubstring(`store Secret "faucet-db-app" not found`))
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonStoreSecretNotFound)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonStoreSecretNotFound)
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns), &appsv1.Deployment{}))).To(BeTrue(), "a Deployment whose pods could not start")

		By("a Secret without the data key")
		createSecret(ns, "faucet-db-app", map[string]string{"uri": "postgresql://app:hidden-1@db:5432/app"})
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidStoreSecret)
			g.Expect(c.Message).To(ContainSubstring(`has no data key "dsn"`))
		}).Should(Succeed())

		By("a value that is no Postgres URI, which the faucet would take for an SQLite path")
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-db-app"}, secret)).To(Succeed())
		secret.Data["dsn"] = []byte("host=db user=app password=hidden-2")
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidStoreSecret)
			g.Expect(c.Message).To(ContainSubstring("not a postgres:// or postgresql:// URI"))
		}).Should(Succeed())

		By("a URI with a trailing newline")
		secret.Data["dsn"] = []byte("postgres://app:hidden-3@db:5432/app\n")
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidStoreSecret)
			g.Expect(c.Message).To(ContainSubstring("trailing newline"))
		}).Should(Succeed())
		expectNoSecretText(ns, "hidden-")

		By("a good URI: the faucet starts")
		secret.Data["dsn"] = []byte("postgres://app:hidden-4@db:5432/app")
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		eventuallyDeployment(ns)
		Eventually(func(g Gomega) {
			g.Expect(meta.FindStatusCondition(getFaucetServer(g, ns).Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
		}).Should(Succeed())
	})

	It("passes several Stacks nodes to the faucet as one --node-url list", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node = faucetv1alpha1.NodeSpec{URLs: []string{"http://miner.stacks:20443", "http://follower.stacks:20443"}}
		})
		Expect(eventuallyDeployment(ns).Spec.Template.Spec.Containers[0].Args).
			To(ContainElement("--node-url=http://miner.stacks:20443,http://follower.stacks:20443"))
	})

	It("passes the pod settings into the Deployment: log level, extra env, pull Secrets, topology spread", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.LogLevel = "warn"
			fs.Spec.ExtraEnv = []corev1.EnvVar{{Name: "TZ", Value: "UTC"}}
			fs.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
			fs.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
			}}
		})
		pod := eventuallyDeployment(ns).Spec.Template.Spec
		Expect(pod.Containers[0].Args).To(ContainElement("--log-level=warn"))
		Expect(pod.Containers[0].Env).To(ConsistOf(HaveField("Name", "TZ")))
		Expect(pod.ImagePullSecrets).To(ConsistOf(HaveField("Name", "regcred")))
		Expect(pod.TopologySpreadConstraints).To(ConsistOf(HaveField("TopologyKey", "topology.kubernetes.io/zone")))
	})

	It("suspends the faucet through the switches' ConfigMap and stays Ready with reason Suspended", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Suspend = true })
		d := eventuallyDeployment(ns)
		Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--suspend")), "the switches are no flags")
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--switches-file=/etc/faucet/switches/switches.json"))
		expectSwitches(ns, `{"suspend":true}`)
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonSuspended)
			g.Expect(c.Message).To(ContainSubstring("403"))
		}).Should(Succeed())

		By("resuming: the ConfigMap follows, the pods stay")
		fs := getFaucetServer(Default, ns)
		patch := client.MergeFrom(fs.DeepCopy())
		fs.Spec.Suspend = false
		Expect(k8sClient.Patch(suiteCtx, fs, patch)).To(Succeed())
		expectSwitches(ns, `{}`)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
		}).Should(Succeed())
		expectSameDeployment(ns, d)
	})

	It("keeps the switches in a ConfigMap the pods follow: switching an asset restarts nothing", func() {
		createKeySecret(ns, newKeys(1))
		fs := createFaucetServer(ns, nil)
		d := eventuallyDeployment(ns)

		By("applying the ConfigMap, owned and labelled like every child, with every switch off")
		cm := expectSwitches(ns, `{}`)
		expectOwnedBy(cm, fs)
		Expect(cm.Labels).To(Equal(map[string]string{labelName: appName, labelInstance: fsName, labelManagedBy: FieldManager}))
		Expect(cm.Data).To(HaveLen(1))

		By("mounting it whole, read-only, as the directory --switches-file reads")
		pod := d.Spec.Template.Spec
		Expect(pod.Volumes).To(ContainElement(And(
			HaveField("Name", "switches"),
			HaveField("ConfigMap.Name", "faucet-switches"),
			HaveField("ConfigMap.Items", BeEmpty()),
			HaveField("ConfigMap.DefaultMode", HaveValue(Equal(int32(0o444)))),
		)))
		Expect(pod.Containers[0].VolumeMounts).To(ContainElement(And(
			HaveField("Name", "switches"), HaveField("MountPath", "/etc/faucet/switches"),
			HaveField("ReadOnly", BeTrue()), HaveField("SubPath", BeEmpty()))))
		Expect(pod.Containers[0].Args).To(ContainElement("--switches-file=/etc/faucet/switches/switches.json"))
		Expect(pod.Containers[0].Args).NotTo(ContainElement(HavePrefix("--suspend")))

		By("turning STX off and suspending the faucet: the ConfigMap follows")
		fs = getFaucetServer(Default, ns)
		patch := client.MergeFrom(fs.DeepCopy())
		fs.Spec.DisabledAssets = []string{"stx"}
		fs.Spec.Suspend = true
		Expect(k8sClient.Patch(suiteCtx, fs, patch)).To(Succeed())
		expectSwitches(ns, `{"suspend":true,"disabledAssets":["stx"]}`)

		By("leaving the Deployment, its pod template and config hash, as it was")
		expectSameDeployment(ns, d)

		By("undoing an edit of the ConfigMap")
		cm = &corev1.ConfigMap{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-switches"}, cm)).To(Succeed())
		cmPatch := client.MergeFrom(cm.DeepCopy())
		cm.Data["switches.json"] = `{}`
		Expect(k8sClient.Patch(suiteCtx, cm, cmPatch)).To(Succeed())
		expectSwitches(ns, `{"suspend":true,"disabledAssets":["stx"]}`)

		By("turning everything back on")
		fs = getFaucetServer(Default, ns)
		patch = client.MergeFrom(fs.DeepCopy())
		fs.Spec.DisabledAssets = nil
		fs.Spec.Suspend = false
		Expect(k8sClient.Patch(suiteCtx, fs, patch)).To(Succeed())
		expectSwitches(ns, `{}`)
		expectSameDeployment(ns, d)
	})

	It("passes spec.mcp.enabled false as --mcp=false", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.MCP = &faucetv1alpha1.MCPSpec{Enabled: ptr.To(false)}
		})
		Expect(eventuallyDeployment(ns).Spec.Template.Spec.Containers[0].Args).To(ContainElement("--mcp=false"))
	})

	It("never puts key material in status, events or children", func() {
		good := newKeys(2)
		createKeySecret(ns, good)
		createFaucetServer(ns, nil)
		eventuallyDeployment(ns)
		setDeploymentStatus(ns, true)
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionTrue, faucetv1alpha1.ReasonAvailable)
		}).Should(Succeed())

		By("breaking the keys, so error paths run too")
		broken := good[1].Hex()[:63] + "g" // 64 characters, not hex
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-keys"}, secret)).To(Succeed())
		secret.Data = map[string][]byte{"keys": []byte(good[0].Hex() + "," + broken)}
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonInvalidKeys)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonInvalidKeys)

		var dumps []any
		fs := getFaucetServer(Default, ns)
		dumps = append(dumps, fs.Status)
		var events eventsv1.EventList
		Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
		Expect(events.Items).NotTo(BeEmpty())
		dumps = append(dumps, events.Items)
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
			Expect(k8sClient.Get(suiteCtx, key(ns), obj)).To(Succeed())
			dumps = append(dumps, obj)
		}
		for _, d := range dumps {
			raw, err := json.Marshal(d)
			Expect(err).NotTo(HaveOccurred())
			for _, secretText := range []string{good[0].Hex()[:64], good[1].Hex()[:64], broken} {
				// Any 16-character run of a key would be a leak.
				for i := 0; i+16 <= len(secretText); i += 8 {
					Expect(string(raw)).NotTo(ContainSubstring(secretText[i:i+16]), "key material in %T", d)
				}
			}
		}
	})

	It("runs the abuse checks and the page settings; editing the API tokens does not roll the pod", func() {
		createKeySecret(ns, newKeys(1))
		const tokens = "ci-pipeline sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 500/1h 20/1h\n"
		createSecret(ns, "faucet-api-tokens", map[string]string{"tokens": tokens})
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{
				ProofOfWork: &faucetv1alpha1.ProofOfWork{
					Difficulty: ptr.To(int32(18)),
					RaiseAbove: &faucetv1alpha1.RateLimit{Requests: 120, Window: metav1.Duration{Duration: time.Minute}},
				},
				APITokens:      &faucetv1alpha1.APITokens{SecretRef: faucetv1alpha1.APITokensSecretReference{Name: "faucet-api-tokens"}},
				IPAllow:        []string{"10.0.0.0/8", "2001:db8::/32", "203.0.113.7"},
				IPDeny:         []string{"198.51.100.0/24", "2001:db8:bad::1"},
				BalanceCapUSTX: ptr.To(int64(5_000_000_000)),
			}
			fs.Spec.Page = &faucetv1alpha1.PageSpec{LowDrips: ptr.To(int32(250))}
		})

		By("passing every setting as a flag; the defaults the CRD filled in are serve's, so no flag")
		d := eventuallyDeployment(ns)
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(Equal([]string{
			"serve", "--node-url=http://stacks-node.stacks.svc:20443", "--key-file=/etc/faucet/keys/keys",
			"--pow-difficulty=18", "--pow-raise-above=120/1m0s",
			"--api-tokens-file=/etc/faucet/api-tokens/tokens",
			"--ip-allow=10.0.0.0/8,2001:db8::/32,203.0.113.7/32", "--ip-deny=198.51.100.0/24,2001:db8:bad::1/128",
			"--balance-cap=5000000000", "--switches-file=/etc/faucet/switches/switches.json",
			"--store=/var/lib/faucet/faucet.db", "--listen=:3999",
			"--low-drips=250", "--shutdown-delay=0s", "--log-format=json",
		}))
		stored := getFaucetServer(Default, ns).Spec
		Expect(stored.Abuse.ProofOfWork.MaxDifficulty).To(HaveValue(Equal(int32(24))), "the CRD's default, serve's")
		Expect(stored.Abuse.ProofOfWork.TTL).To(HaveValue(Equal(metav1.Duration{Duration: 5 * time.Minute})), "the CRD's default, serve's")
		Expect(stored.Page.ExplorerTxURL).To(HaveValue(Equal("https://explorer.hiro.so/txid/{txid}?chain=testnet")), "the CRD's default, serve's")
		Expect(stored.Abuse.APITokens.SecretRef.Key).To(Equal("tokens"), "the key defaults to tokens")
		Expect(c.VolumeMounts).To(ContainElement(And(
			HaveField("Name", "api-tokens"), HaveField("MountPath", "/etc/faucet/api-tokens"),
			HaveField("ReadOnly", BeTrue()), HaveField("SubPath", BeEmpty()))))
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(
			HaveField("Name", "api-tokens"),
			HaveField("Secret.SecretName", "faucet-api-tokens"),
			HaveField("Secret.Items", ConsistOf(corev1.KeyToPath{Key: "tokens", Path: "tokens"})),
		)))
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
		}).Should(Succeed())

		By("editing the tokens: the kubelet updates the file in place, so the pod template stays")
		before := d.Spec.Template.Annotations[ConfigHashAnnotation]
		generation := d.Generation
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-api-tokens"}, secret)).To(Succeed())
		secret.Data["tokens"] = []byte(tokens + "workshop e3b0c44298fc1c149afbf4c8996fb924 100/24h\n")
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).To(Equal(before))
			g.Expect(d.Generation).To(Equal(generation))
		}, 2*time.Second).Should(Succeed())

		By("never putting a token in the Deployment, the status or events")
		expectNoSecretText(ns, "e3b0c44298fc1c14")
		expectNoSecretText(ns, "9f86d081884c7d65")
	})

	It("reports a missing API tokens Secret, then one without the data key, and recovers", func() {
		createKeySecret(ns, newKeys(1))
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{APITokens: &faucetv1alpha1.APITokens{
				SecretRef: faucetv1alpha1.APITokensSecretReference{Name: "faucet-api-tokens", Key: "ci.txt"},
			}}
		})
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			c := expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonAPITokensSecretNotFound)
			g.Expect(c.Message).To(ContainSubstring(`API tokens Secret "faucet-api-tokens" not found`))
			expectCondition(g, got, faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonAPITokensSecretNotFound)
		}).Should(Succeed())
		expectEvent(ns, corev1.EventTypeWarning, faucetv1alpha1.ReasonAPITokensSecretNotFound)
		err := k8sClient.Get(suiteCtx, key(ns), &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Deployment whose pod could not mount its tokens, got %v", err)

		By("creating the Secret under another data key: the Secret watch reports it")
		createSecret(ns, "faucet-api-tokens", map[string]string{"tokens": "ci sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 10/1h\n"})
		Eventually(func(g Gomega) {
			c := expectCondition(g, getFaucetServer(g, ns), faucetv1alpha1.ConditionStalled, metav1.ConditionTrue, faucetv1alpha1.ReasonInvalidAPITokensSecret)
			g.Expect(c.Message).To(ContainSubstring(`API tokens Secret "faucet-api-tokens" has no data key "ci.txt"`))
			g.Expect(c.Message).NotTo(ContainSubstring("9f86d081"))
		}).Should(Succeed())

		By("adding the data key")
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "faucet-api-tokens"}, secret)).To(Succeed())
		secret.Data["ci.txt"] = secret.Data["tokens"]
		Expect(k8sClient.Update(suiteCtx, secret)).To(Succeed())
		d := eventuallyDeployment(ns)
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--api-tokens-file=/etc/faucet/api-tokens/ci.txt"))
		Eventually(func(g Gomega) {
			got := getFaucetServer(g, ns)
			expectCondition(g, got, faucetv1alpha1.ConditionReady, metav1.ConditionFalse, faucetv1alpha1.ReasonProgressing)
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, faucetv1alpha1.ConditionStalled)).To(BeNil())
		}).Should(Succeed())
	})

	DescribeTable("refuses invalid FaucetServers with readable messages",
		func(mutate func(*faucetv1alpha1.FaucetServer), message string) {
			fs := newFaucetServer(ns)
			mutate(fs)
			err := k8sClient.Create(suiteCtx, fs)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("mainnet chain id", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.ChainID = ptr.To(int64(1)) },
			"chainID 1 is Stacks mainnet; the faucet only serves test networks"),
		Entry("URL with another scheme", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = "ftp://stacks-node:20443" },
			"node.url must be an http:// or https:// URL with a host"),
		Entry("URL without a scheme", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = "stacks-node:20443" },
			"node.url must be an http:// or https:// URL with a host"),
		Entry("URL without a host", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URL = "http:///v2/info" },
			"node.url must be an http:// or https:// URL with a host"),
		Entry("url and urls", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.URLs = []string{"http://follower:20443"} },
			"node: set url (one node) or urls (several nodes of one chain), not both"),
		Entry("neither url nor urls", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node = faucetv1alpha1.NodeSpec{} },
			"node: set url (one node) or urls (several nodes of one chain), not both"),
		Entry("a node of urls without a scheme", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node = faucetv1alpha1.NodeSpec{URLs: []string{"http://miner:20443", "follower:20443"}}
		}, "node.urls must each be an http:// or https:// URL with a host (and no comma)"),
		Entry("a node listed twice in urls", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node = faucetv1alpha1.NodeSpec{URLs: []string{"http://miner:20443", "http://miner:20443"}}
		}, "Duplicate value"),
		Entry("a FAUCET_ variable in extraEnv", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.ExtraEnv = []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: "200MiB"}, {Name: "FAUCET_LOW_DRIPS", Value: "5"}}
		}, "spec.extraEnv[1].name: Invalid value: extraEnv names must not start with FAUCET_: the faucet would read it as one of its settings, which the operator sets from the spec; set the spec's field instead"),
		Entry("FAUCET_STORE in extraEnv", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.ExtraEnv = []corev1.EnvVar{{Name: "FAUCET_STORE", Value: "postgres://x"}}
		}, "extraEnv names must not start with FAUCET_"),
		Entry("an extraEnv name given twice", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.ExtraEnv = []corev1.EnvVar{{Name: "TZ", Value: "UTC"}, {Name: "TZ", Value: "CET"}}
		}, "spec.extraEnv[1]: Duplicate value"),
		Entry("an unknown log level", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.LogLevel = "verbose" },
			`spec.logLevel: Unsupported value: "verbose": supported values: "debug", "info", "warn", "error"`),
		Entry("fee.min above fee.max", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Fee = &faucetv1alpha1.Fee{Min: ptr.To(int64(2000)), Max: ptr.To(int64(1000))}
		}, "fee.min must not exceed fee.max"),
		Entry("fee.min above the default fee.max", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Fee = &faucetv1alpha1.Fee{Min: ptr.To(int64(200_000))}
		}, "fee.min must not exceed fee.max"),
		Entry("zero amount", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Amounts = &faucetv1alpha1.Amounts{Default: ptr.To(int64(0))}
		}, "amounts.default must be greater than 0"),
		Entry("negative stacking amount", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Amounts = &faucetv1alpha1.Amounts{Stacking: ptr.To(int64(-5))}
		}, "amounts.stacking must be greater than 0"),
		Entry("zero rate-limit window", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.RateLimits = &faucetv1alpha1.RateLimits{PerIP: &faucetv1alpha1.RateLimit{Requests: 10, Window: metav1.Duration{}}}
		}, "window must be a positive duration"),
		Entry("zero rate-limit count", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.RateLimits = &faucetv1alpha1.RateLimits{PerAddress: &faucetv1alpha1.RateLimit{Requests: 0, Window: metav1.Duration{Duration: time.Minute}}}
		}, "requests must be greater than 0"),
		Entry("zero node timeout", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.Timeout = &metav1.Duration{} },
			"node.timeout must be a positive duration"),
		Entry("a busy poll slower than the idle one", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.PollInterval, fs.Spec.Node.BusyPollInterval = &metav1.Duration{Duration: 5 * time.Second}, &metav1.Duration{Duration: 10 * time.Second}
		}, "spec.node.busyPollInterval: Invalid value: node.busyPollInterval (default 100ms) must not exceed node.pollInterval"),
		Entry("an idle poll below the default busy poll", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.PollInterval = &metav1.Duration{Duration: 50 * time.Millisecond}
		}, "node.busyPollInterval (default 100ms) must not exceed node.pollInterval"),
		Entry("a zero poll interval", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Node.PollInterval = &metav1.Duration{} },
			"node.pollInterval must be a duration from 50ms to 1m"),
		Entry("a poll interval over a minute", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.PollInterval = &metav1.Duration{Duration: 2 * time.Minute}
		}, "node.pollInterval must be a duration from 50ms to 1m"),
		Entry("a busy poll interval under 50ms", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Node.BusyPollInterval = &metav1.Duration{Duration: 10 * time.Millisecond}
		}, "node.busyPollInterval must be a duration from 50ms to 1m"),
		Entry("memo over 34 bytes of UTF-8", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Memo = ptr.To(strings.Repeat("é", 20)) },
			"memo must be at most 34 bytes of UTF-8"),
		// The name is also the Service's, which must be a DNS-1035 label:
		// accepting these would leave the FaucetServer failing forever.
		Entry("name with a dot", func(fs *faucetv1alpha1.FaucetServer) { fs.Name = "faucet.testnet" },
			"metadata.name must be a DNS-1035 label"),
		Entry("name starting with a digit", func(fs *faucetv1alpha1.FaucetServer) { fs.Name = "1faucet" },
			"metadata.name must be a DNS-1035 label"),
		Entry("name over 63 characters", func(fs *faucetv1alpha1.FaucetServer) { fs.Name = "f" + strings.Repeat("a", 63) },
			"metadata.name must be a DNS-1035 label"),
		// The embedded store's volume is ReadWriteOnce with one writer.
		Entry("two replicas on the default (embedded) store", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Replicas = ptr.To(int32(2)) },
			"spec.replicas must be 0 or 1 with the embedded store"),
		Entry("two replicas on an explicit embedded store", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Replicas = ptr.To(int32(2))
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{Embedded: &faucetv1alpha1.EmbeddedStore{}}
		}, "spec.replicas must be 0 or 1 with the embedded store"),
		Entry("both an embedded and a Postgres store", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{
				Embedded: &faucetv1alpha1.EmbeddedStore{},
				Postgres: &faucetv1alpha1.PostgresStore{URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "db"}},
			}
		}, "spec.store: set either embedded or postgres, not both"),
		Entry("an empty store", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Store = &faucetv1alpha1.StoreSpec{} },
			"spec.store: set embedded or postgres"),
		Entry("negative replicas", func(fs *faucetv1alpha1.FaucetServer) { fs.Spec.Replicas = ptr.To(int32(-1)) },
			"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"),
		Entry("a zero-sized volume", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{Embedded: &faucetv1alpha1.EmbeddedStore{Size: ptr.To(resource.MustParse("0"))}}
		}, "store.embedded.size must be positive"),
		// spec.abuse and spec.page.
		Entry("a CIDR with a prefix longer than the address", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{IPAllow: []string{"10.0.0.0/8", "10.0.0.0/33"}}
		}, `spec.abuse.ipAllow[1]: Invalid value: "10.0.0.0/33": abuse.ipAllow entries must be IP addresses or CIDRs`),
		Entry("a host name in ipDeny", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{IPDeny: []string{"bots.example.com"}}
		}, "abuse.ipDeny entries must be IP addresses or CIDRs"),
		Entry("two addresses in one ipDeny entry", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{IPDeny: []string{"192.0.2.1,192.0.2.2"}}
		}, "abuse.ipDeny entries must be IP addresses or CIDRs"),
		Entry("more than 100 ipAllow entries", func(fs *faucetv1alpha1.FaucetServer) {
			ips := make([]string, 101)
			for i := range ips {
				ips[i] = fmt.Sprintf("192.0.2.%d", i)
			}
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{IPAllow: ips}
		}, "spec.abuse.ipAllow: Too many"),
		Entry("maxDifficulty below difficulty", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{ProofOfWork: &faucetv1alpha1.ProofOfWork{
				Difficulty: ptr.To(int32(20)), MaxDifficulty: ptr.To(int32(16)),
			}}
		}, "abuse.proofOfWork.maxDifficulty (default 24) must not be below difficulty"),
		Entry("a difficulty above the default maxDifficulty", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{ProofOfWork: &faucetv1alpha1.ProofOfWork{Difficulty: ptr.To(int32(28))}}
		}, "abuse.proofOfWork.maxDifficulty (default 24) must not be below difficulty"),
		Entry("a difficulty over 32 bits", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{ProofOfWork: &faucetv1alpha1.ProofOfWork{
				Difficulty: ptr.To(int32(33)), MaxDifficulty: ptr.To(int32(32)),
			}}
		}, "spec.abuse.proofOfWork.difficulty"),
		Entry("a challenge TTL under a second", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{ProofOfWork: &faucetv1alpha1.ProofOfWork{TTL: &metav1.Duration{Duration: 500 * time.Millisecond}}}
		}, "abuse.proofOfWork.ttl must be at least 1s"),
		Entry("a zero raiseAbove count", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{ProofOfWork: &faucetv1alpha1.ProofOfWork{
				RaiseAbove: &faucetv1alpha1.RateLimit{Requests: 0, Window: metav1.Duration{Duration: time.Minute}},
			}}
		}, "requests must be greater than 0"),
		Entry("a negative balance cap", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{BalanceCapUSTX: ptr.To(int64(-1))}
		}, "spec.abuse.balanceCapUSTX"),
		Entry("an API tokens Secret without a name", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{APITokens: &faucetv1alpha1.APITokens{}}
		}, "spec.abuse.apiTokens.secretRef.name"),
		Entry("an API tokens key that is no file name", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{APITokens: &faucetv1alpha1.APITokens{
				SecretRef: faucetv1alpha1.APITokensSecretReference{Name: "tokens", Key: ".."},
			}}
		}, "abuse.apiTokens.secretRef.key must be a file name"),
		Entry("an explorer template without {txid}", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Page = &faucetv1alpha1.PageSpec{ExplorerTxURL: ptr.To("https://explorer.hiro.so/txid/?chain=testnet")}
		}, "page.explorerTxURL must contain {txid}"),
		Entry("an explorer template that is no http(s) URL", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Page = &faucetv1alpha1.PageSpec{ExplorerTxURL: ptr.To("javascript:alert('{txid}')")}
		}, "page.explorerTxURL must start with https:// or http://"),
		Entry("lowDrips of zero", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Page = &faucetv1alpha1.PageSpec{LowDrips: ptr.To(int32(0))}
		}, "spec.page.lowDrips"),
		// spec.batching.
		Entry("a batch of more than 200 recipients", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{MaxRecipients: ptr.To(int32(201))}
		}, "spec.batching.maxRecipients: Invalid value: 201: spec.batching.maxRecipients in body should be less than or equal to 200"),
		Entry("a negative batch size", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{MaxRecipients: ptr.To(int32(-1))}
		}, "spec.batching.maxRecipients"),
		Entry("a zero batch window", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{Window: &metav1.Duration{}}
		}, "batching.window must be a positive duration"),
		Entry("a batch contract without a name", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{Contract: ptr.To("ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B")}
		}, "batching.contract must be a contract id, ADDRESS.contract-name"),
		Entry("a batch contract name starting with a digit", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{Contract: ptr.To("ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.1send-many")}
		}, "batching.contract must be a contract id, ADDRESS.contract-name"),
		Entry("a mainnet batch contract", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{Contract: ptr.To("SP3FBR2AGK5H9QBDH3EEN6DF8EK8JY7RX8QJ5SVTE.send-many-memo")}
		}, "batching.contract is a mainnet contract (SP…/SM… address); the faucet only serves test networks"),
		// spec.assets: each entry's own checks.
		Entry("a mainnet token", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sbtc", "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token", 1000, nil))(fs)
		}, "spec.assets[0].token.assetIdentifier: Invalid value: \"SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token::sbtc-token\": spec.assets[].token.assetIdentifier is a mainnet contract (SP…/SM… address); the faucet only serves test networks: use a testnet (ST…/SN…) contract"),
		Entry("a token identifier without a token name", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sbtc", "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token", 1000, nil))(fs)
		}, "spec.assets[].token.assetIdentifier must be a token's asset identifier, ADDRESS.contract-name::token-name"),
		Entry("a token identifier that is a standard principal", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sbtc", "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1::sbtc-token", 1000, nil))(fs)
		}, "spec.assets[].token.assetIdentifier must be a token's asset identifier"),
		Entry("a contract name over 40 characters", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sbtc", "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1."+strings.Repeat("s", 41)+"::sbtc-token", 1000, nil))(fs)
		}, "spec.assets[].token.assetIdentifier must be a token's asset identifier"),
		Entry("a token name starting with a digit", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sbtc", "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token::1sbtc", 1000, nil))(fs)
		}, "spec.assets[].token.assetIdentifier must be a token's asset identifier"),
		Entry("a token identifier with a lowercase address", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sbtc", "st1f7qa2mdf17s807epa36tss8amefy4ka9tvgwxt.sbtc-token::sbtc-token", 1000, nil))(fs)
		}, "spec.assets[].token.assetIdentifier must be a token's asset identifier"),
		Entry("a zero token amount", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sbtc", testnetSBTC, 0, nil))(fs)
		}, "spec.assets[].token.amount must be at least 1: the base units each drip sends"),
		Entry("a zero token rate-limit count", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(sbtcAsset(1000, &faucetv1alpha1.AssetRateLimits{PerIP: &faucetv1alpha1.RateLimit{Window: metav1.Duration{Duration: time.Minute}}}))(fs)
		}, "spec.assets[0].rateLimits.perIP.requests: Invalid value: 0: requests must be greater than 0"),
		Entry("a negative lowThreshold", func(fs *faucetv1alpha1.FaucetServer) {
			a := sbtcAsset(1000, nil)
			a.LowThreshold = ptr.To(int64(-1))
			withAssets(a)(fs)
		}, "spec.assets[0].lowThreshold"),
		Entry("a token refill amount below its threshold", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Treasury = &faucetv1alpha1.TreasurySpec{KeySecretRef: faucetv1alpha1.TreasuryKeyReference{Name: "holder"}}
			a := sbtcAsset(1000, nil)
			a.Token.RefillBelow, a.Token.RefillAmount = ptr.To(int64(50_000)), ptr.To(int64(10_000))
			withAssets(a)(fs)
		}, "spec.assets[].token.refillAmount must be at least refillBelow, so that one refill lifts a key above the threshold"),
		Entry("token refills without a treasury", func(fs *faucetv1alpha1.FaucetServer) {
			a := tokenAsset("tusd", testnetTUSD, 1000, nil)
			a.Token.RefillAmount = ptr.To(int64(50_000))
			withAssets(sbtcAsset(1000, nil), a)(fs)
		}, "spec.assets[].token.refillBelow and refillAmount tune the refills from spec.treasury: set spec.treasury, or remove them"),
		// spec.assets: what the list holds.
		Entry("a token without an identifier not named sbtc", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(faucetv1alpha1.AssetSpec{Name: "tusd", Token: &faucetv1alpha1.TokenSpec{Amount: 1}})(fs)
		}, "spec.assets[0]: Invalid value: spec.assets[].token.assetIdentifier is required (ADDRESS.contract-name::token-name); only sbtc may leave it out, to use the sBTC contract the node names in /v2/pox (pox_5_sbtc_contract)"),
		Entry("an entry with both token and btc", func(fs *faucetv1alpha1.FaucetServer) {
			a := btcAsset(btcSpec(false))
			a.Token = &faucetv1alpha1.TokenSpec{AssetIdentifier: testnetSBTC, Amount: 1}
			withAssets(a)(fs)
		}, "each spec.assets entry is a token or BTC: set exactly one of token and btc"),
		Entry("an entry with neither token nor btc", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(faucetv1alpha1.AssetSpec{Name: "tusd"})(fs)
		}, "spec.assets[0]: Invalid value: each spec.assets entry is a token or BTC: set exactly one of token and btc"),
		Entry("a btc entry not named btc", func(fs *faucetv1alpha1.FaucetServer) {
			a := btcAsset(btcSpec(false))
			a.Name = "bitcoin"
			withAssets(a)(fs)
		}, "the BTC entry of spec.assets must be named btc"),
		Entry("a token named btc", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("btc", testnetSBTC, 1, nil))(fs)
		}, "btc is BTC's name in spec.assets: name the token otherwise"),
		Entry("a token named stx", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("stx", testnetSBTC, 1, nil))(fs)
		}, "spec.assets[0].name: Invalid value: \"stx\": stx is the faucet's own asset, set by spec.amounts: name the token otherwise"),
		Entry("a suspended asset that is not in spec.assets", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sbtc", testnetSBTC, 1, nil))(fs)
			fs.Spec.SuspendedAssets = []string{"stx", "tusd"}
		}, "spec.suspendedAssets names stx or the name of an entry of spec.assets"),
		Entry("a suspended asset named twice", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.SuspendedAssets = []string{"stx", "stx"}
		}, "spec.suspendedAssets[1]: Duplicate value"),
		Entry("a disabled asset the faucet does not know", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.DisabledAssets = []string{"stx", "doge"}
		}, "spec.disabledAssets names stx, sbtc, btc or the name of an entry of spec.assets"),
		Entry("a disabled asset that is not in spec.assets", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(sbtcAsset(1, nil))(fs)
			fs.Spec.DisabledAssets = []string{"tusd"}
		}, "spec.disabledAssets names stx, sbtc, btc or the name of an entry of spec.assets"),
		Entry("a disabled asset named twice", func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.DisabledAssets = []string{"btc", "btc"}
		}, "spec.disabledAssets[1]: Duplicate value"),
		Entry("an upper-case name", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset("sBTC", testnetSBTC, 1, nil))(fs)
		}, "spec.assets[0].name: Invalid value: \"sBTC\": spec.assets[].name must be lower-case letters, digits and '-', starting with a letter, e.g. sbtc or tusd"),
		Entry("a name longer than 32", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(tokenAsset(strings.Repeat("t", 33), testnetSBTC, 1, nil))(fs)
		}, "spec.assets[0].name: Too long: may not be more than 32 bytes"),
		Entry("two entries with one name", func(fs *faucetv1alpha1.FaucetServer) {
			withAssets(sbtcAsset(1, nil), tokenAsset("sbtc", testnetTUSD, 2, nil))(fs)
		}, `spec.assets[1]: Duplicate value: {"name":"sbtc"}`),
		Entry("more than 32 entries", func(fs *faucetv1alpha1.FaucetServer) {
			for i := range 33 {
				withAssets(tokenAsset(fmt.Sprintf("t%d", i), testnetTUSD, 1, nil))(fs)
			}
		}, "spec.assets: Too many: 33: must have at most 32 items"),
	)

	It("defaults each entry's rate limits and accepts Clarity's names and lengths, and sbtc without an identifier", func() {
		fs := newFaucetServer(ns)
		withAssets(sbtcAsset(1000, nil), tokenAsset("tusd", testnetTUSD, 7, nil))(fs)
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		for _, a := range fs.Spec.Assets {
			Expect(a.RateLimits).To(Equal(&faucetv1alpha1.AssetRateLimits{
				PerAddress: &faucetv1alpha1.RateLimit{Requests: 5, Window: metav1.Duration{Duration: 5 * time.Minute}},
				PerIP:      &faucetv1alpha1.RateLimit{Requests: 30, Window: metav1.Duration{Duration: 5 * time.Minute}},
			}), a.Name)
			Expect(a.Token.RefillBelow).To(BeNil())
			Expect(a.LowThreshold).To(BeNil())
		}
		Expect(fs.Spec.RateLimits.PerAddress.Requests).To(Equal(int32(5)), "spec.rateLimits is as it was")

		for _, id := range []string{
			// The longest names Clarity allows, a devnet deployer, and
			// a token name with the punctuation Clarity names may hold.
			"ST1PQHQKV0RJXZFY1DGX8MNSNYVE3VGZJSRTPGZGM." + strings.Repeat("c", 40) + "::" + strings.Repeat("t", 128),
			"SN2ZNGJ85ENDY6QRHQ5P2D4FXKGZWCKTB2T0Z55KS.my_token-v2::a-b_c!?+<>=/*",
			"ST000000000000000000002AMW42H.sbtc::sbtc",
		} {
			fs := newFaucetServer(ns)
			withAssets(tokenAsset("t-"+strings.Repeat("x", 30), id, 1, nil))(fs)
			Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed(), id)
		}

		fs = newFaucetServer(ns)
		withAssets(faucetv1alpha1.AssetSpec{Name: "sbtc", Token: &faucetv1alpha1.TokenSpec{Amount: 100_000}})(fs)
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed(), "sbtc from /v2/pox")
		Expect(fs.Spec.Assets[0].Token.AssetIdentifier).To(BeEmpty())
	})

	It("accepts stx, sbtc, btc and the names of spec.assets in spec.disabledAssets, and defaults spec.mcp.enabled to true", func() {
		for _, disabled := range [][]string{{"stx"}, {"sbtc"}, {"btc"}, {"stx", "sbtc", "btc"}} {
			fs := newFaucetServer(ns)
			fs.Spec.DisabledAssets = disabled
			Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed(), "%q without spec.assets", disabled)
		}
		fs := newFaucetServer(ns)
		withAssets(tokenAsset("tusd", testnetTUSD, 7, nil))(fs)
		fs.Spec.DisabledAssets = []string{"tusd", "sbtc"}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed(), "a token of spec.assets")

		fs = newFaucetServer(ns)
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		Expect(fs.Spec.MCP).To(BeNil(), "spec.mcp has no default of its own, so upgrading rolls no pod")
		fs = newFaucetServer(ns)
		fs.Spec.MCP = &faucetv1alpha1.MCPSpec{}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		Expect(fs.Spec.MCP.Enabled).To(HaveValue(BeTrue()))
	})

	It("defaults the batching settings: 200 recipients, adaptive (no window), the testnet send-many-memo contract", func() {
		fs := newFaucetServer(ns)
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		Expect(fs.Spec.Batching).To(BeNil(), "batching has no default of its own, so upgrading rolls no pod")

		fs = newFaucetServer(ns)
		fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		Expect(fs.Spec.Batching.MaxRecipients).To(HaveValue(BeEquivalentTo(200)))
		Expect(fs.Spec.Batching.Window).To(BeNil(), "no window: adaptive")
		Expect(fs.Spec.Batching.Contract).To(HaveValue(Equal("ST3F1X4QGV2SM8XD96X45M6RTQXKA1PZJZZCQAB4B.send-many-memo")))

		fs = newFaucetServer(ns)
		fs.Spec.Batching = &faucetv1alpha1.BatchingSpec{
			MaxRecipients: ptr.To(int32(200)),
			Window:        &metav1.Duration{Duration: time.Second},
			Contract:      ptr.To("ST000000000000000000002AMW42H.send_many-2"),
		}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
	})

	It("accepts IPv4 and IPv6 addresses and CIDRs, and defaults the abuse and page settings", func() {
		fs := newFaucetServer(ns)
		fs.Spec.Abuse = &faucetv1alpha1.AbuseSpec{
			ProofOfWork: &faucetv1alpha1.ProofOfWork{},
			APITokens:   &faucetv1alpha1.APITokens{SecretRef: faucetv1alpha1.APITokensSecretReference{Name: "tokens"}},
			IPAllow:     []string{"203.0.113.7", "10.0.0.0/8", "10.1.2.3/8", "2001:db8::1", "2001:db8::/32", "::/0"},
			IPDeny:      []string{"0.0.0.0/0"},
		}
		fs.Spec.Page = &faucetv1alpha1.PageSpec{}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		pow := fs.Spec.Abuse.ProofOfWork
		Expect(pow.Difficulty).To(HaveValue(BeZero()))
		Expect(pow.MaxDifficulty).To(HaveValue(Equal(int32(24))))
		Expect(pow.TTL).To(HaveValue(HaveField("Duration", 5*time.Minute)))
		Expect(pow.RaiseAbove).To(BeNil())
		Expect(fs.Spec.Abuse.APITokens.SecretRef.Key).To(Equal("tokens"))
		Expect(fs.Spec.Abuse.BalanceCapUSTX).To(BeNil())
		Expect(fs.Spec.Page.ExplorerTxURL).To(HaveValue(Equal("https://explorer.hiro.so/txid/{txid}?chain=testnet")))
		Expect(fs.Spec.Page.LowDrips).To(BeNil(), "deprecated, so no default: spec.funding.lowThreshold is the one threshold")
	})

	It("accepts the pod settings: topology spread, pull Secrets, a log level and extra env", func() {
		fs := newFaucetServer(ns)
		fs.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": fsName}},
		}}
		fs.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		fs.Spec.LogLevel = "debug"
		fs.Spec.ExtraEnv = []corev1.EnvVar{
			{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			{Name: "faucet_lowercase", Value: "not a setting: the faucet reads upper-case names only"},
		}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
	})

	It("accepts several replicas on a Postgres store", func() {
		fs := newFaucetServer(ns)
		fs.Spec.Replicas = ptr.To(int32(3))
		fs.Spec.Store = &faucetv1alpha1.StoreSpec{Postgres: &faucetv1alpha1.PostgresStore{
			URISecretRef: faucetv1alpha1.SecretKeyReference{Name: "faucet-db-app"},
		}}
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		Expect(fs.Spec.Store.Postgres.URISecretRef.Key).To(Equal("uri"), "the key defaults to CloudNativePG's")
	})

	It("refuses to shrink the volume or change its StorageClass", func() {
		createFaucetServer(ns, func(fs *faucetv1alpha1.FaucetServer) {
			fs.Spec.Store = &faucetv1alpha1.StoreSpec{Embedded: &faucetv1alpha1.EmbeddedStore{
				Size: ptr.To(resource.MustParse("2Gi")), StorageClassName: ptr.To("fast"),
			}}
		})
		update := func(mutate func(*faucetv1alpha1.EmbeddedStore)) error {
			for {
				fs := getFaucetServer(Default, ns)
				mutate(fs.Spec.Store.Embedded)
				// The operator's status patches race with this update.
				if err := k8sClient.Update(suiteCtx, fs, client.DryRunAll); !apierrors.IsConflict(err) {
					return err
				}
			}
		}
		err := update(func(e *faucetv1alpha1.EmbeddedStore) { e.Size = ptr.To(resource.MustParse("2000Mi")) })
		Expect(err).To(MatchError(ContainSubstring("store.embedded.size cannot shrink")))
		err = update(func(e *faucetv1alpha1.EmbeddedStore) { e.StorageClassName = ptr.To("slow") })
		Expect(err).To(MatchError(ContainSubstring("store.embedded.storageClassName cannot change")))
		err = update(func(e *faucetv1alpha1.EmbeddedStore) { e.StorageClassName = nil })
		Expect(err).To(MatchError(ContainSubstring("store.embedded.storageClassName cannot change")))
		Expect(update(func(e *faucetv1alpha1.EmbeddedStore) { e.Size = ptr.To(resource.MustParse("3Gi")) })).To(Succeed(), "growing")
		Expect(update(func(e *faucetv1alpha1.EmbeddedStore) { e.Size = ptr.To(resource.MustParse("2048Mi")) })).To(Succeed(), "the same size, written otherwise")
	})

	It("accepts the every-field example of docs/kubernetes.md", func() {
		page, err := os.ReadFile(filepath.Join("..", "docs", "kubernetes.md"))
		Expect(err).NotTo(HaveOccurred())
		var example string
		for block := range strings.SplitSeq(string(page), "```yaml\n") {
			if body, _, ok := strings.Cut(block, "```"); ok && strings.Contains(body, "kind: FaucetServer") && strings.Contains(body, "priorityClassName") {
				example = body
			}
		}
		Expect(example).NotTo(BeEmpty(), "no FaucetServer example with every field in docs/kubernetes.md")
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(example), &u.Object)).To(Succeed())
		u.SetNamespace(ns)
		Expect(k8sClient.Create(suiteCtx, u, client.DryRunAll)).To(Succeed())
	})
})

func key(ns string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: fsName} }

func newKeys(n int) []*stacks.PrivateKey {
	keys := make([]*stacks.PrivateKey, n)
	for i := range keys {
		k, err := stacks.GeneratePrivateKey()
		Expect(err).NotTo(HaveOccurred())
		keys[i] = k
	}
	return keys
}

func hexKeys(keys []*stacks.PrivateKey) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.Hex()
	}
	return strings.Join(s, "\n")
}

func addresses(keys []*stacks.PrivateKey) []string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.TestnetAddress().String()
	}
	return s
}

func createKeySecret(ns string, keys []*stacks.PrivateKey) {
	createKeySecretData(ns, "keys", hexKeys(keys))
}

func createKeySecretData(ns, dataKey, data string) {
	GinkgoHelper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "faucet-keys"},
		Data:       map[string][]byte{dataKey: []byte(data)},
	}
	Expect(k8sClient.Create(suiteCtx, s)).To(Succeed())
}

func createSecret(ns, name string, data map[string]string) {
	GinkgoHelper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	Expect(k8sClient.Create(suiteCtx, s)).To(Succeed())
}

// expectNoSecretText fails if text appears in the FaucetServer, its events
// or any child.
func expectNoSecretText(ns, text string) {
	GinkgoHelper()
	var dumps []any
	dumps = append(dumps, getFaucetServer(Default, ns))
	var events eventsv1.EventList
	Expect(k8sClient.List(suiteCtx, &events, client.InNamespace(ns))).To(Succeed())
	dumps = append(dumps, events.Items)
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
		if err := k8sClient.Get(suiteCtx, key(ns), obj); err == nil {
			dumps = append(dumps, obj)
		}
	}
	for _, d := range dumps {
		raw, err := json.Marshal(d)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(text), "secret text in %T", d)
	}
}

func newFaucetServer(ns string) *faucetv1alpha1.FaucetServer {
	return &faucetv1alpha1.FaucetServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fsName},
		Spec: faucetv1alpha1.FaucetServerSpec{
			Node:         faucetv1alpha1.NodeSpec{URL: "http://stacks-node.stacks.svc:20443"},
			KeySecretRef: faucetv1alpha1.KeySecretReference{Name: "faucet-keys"},
		},
	}
}

func createFaucetServer(ns string, mutate func(*faucetv1alpha1.FaucetServer)) *faucetv1alpha1.FaucetServer {
	GinkgoHelper()
	fs := newFaucetServer(ns)
	if mutate != nil {
		mutate(fs)
	}
	Expect(k8sClient.Create(suiteCtx, fs)).To(Succeed())
	return fs
}

func getFaucetServer(g Gomega, ns string) *faucetv1alpha1.FaucetServer {
	fs := &faucetv1alpha1.FaucetServer{}
	g.Expect(k8sClient.Get(suiteCtx, key(ns), fs)).To(Succeed())
	return fs
}

// expectSwitches waits for the switches' ConfigMap to hold switches.json
// want, and returns it.
func expectSwitches(ns, want string) *corev1.ConfigMap {
	GinkgoHelper()
	cm := &corev1.ConfigMap{}
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: fsName + "-switches"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("switches.json", want))
	}).Should(Succeed())
	return cm
}

// expectSameDeployment waits for the operator to have reconciled the
// FaucetServer's generation, then checks that the Deployment is at
// before's generation with before's pod template: no pod restarts.
func expectSameDeployment(ns string, before *appsv1.Deployment) {
	GinkgoHelper()
	// The status is written at the end of the pass that applied the
	// Deployment, so the Deployment below is that pass's.
	Eventually(func(g Gomega) {
		got := getFaucetServer(g, ns)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).Should(Succeed())
	d := &appsv1.Deployment{}
	Expect(k8sClient.Get(suiteCtx, key(ns), d)).To(Succeed())
	Expect(d.Generation).To(Equal(before.Generation), "the Deployment's spec changed")
	Expect(d.Spec.Template.Annotations[ConfigHashAnnotation]).To(Equal(before.Spec.Template.Annotations[ConfigHashAnnotation]))
	Expect(d.Spec.Template).To(Equal(before.Spec.Template))
}

func eventuallyDeployment(ns string) *appsv1.Deployment {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Eventually(func() error { return k8sClient.Get(suiteCtx, key(ns), d) }).Should(Succeed())
	return d
}

// setDeploymentStatus plays the Deployment controller for the current
// generation: one updated pod, available or not.
func setDeploymentStatus(ns string, available bool) {
	GinkgoHelper()
	n := int32(0)
	if available {
		n = 1
	}
	setDeploymentReplicas(ns, 1, n)
}

// setDeploymentReplicas plays the Deployment controller for the current
// generation: replicas updated pods, available of them available.
func setDeploymentReplicas(ns string, replicas, available int32) {
	GinkgoHelper()
	Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(suiteCtx, key(ns), d); err != nil {
			return err
		}
		availableCond := corev1.ConditionFalse
		if available == replicas {
			availableCond = corev1.ConditionTrue
		}
		now := metav1.Now()
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation,
			Replicas:           replicas, UpdatedReplicas: replicas, ReadyReplicas: available, AvailableReplicas: available,
			UnavailableReplicas: replicas - available,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: availableCond, Reason: "MinimumReplicas", LastUpdateTime: now, LastTransitionTime: now},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
			},
		}
		return k8sClient.Status().Update(suiteCtx, d)
	}).Should(Succeed())
}

func expectCondition(g Gomega, fs *faucetv1alpha1.FaucetServer, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	c := meta.FindStatusCondition(fs.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "no %s condition in %+v", typ, fs.Status.Conditions)
	g.Expect(c.Status).To(Equal(status), "%s: %s", typ, c.Message)
	g.Expect(c.Reason).To(Equal(reason), "%s: %s", typ, c.Message)
	g.Expect(c.ObservedGeneration).To(Equal(fs.Generation))
	return c
}

func expectOwnedBy(obj client.Object, fs *faucetv1alpha1.FaucetServer) {
	GinkgoHelper()
	Expect(obj.GetOwnerReferences()).To(ConsistOf(And(
		HaveField("Kind", "FaucetServer"),
		HaveField("Name", fs.Name),
		HaveField("UID", fs.UID),
		HaveField("Controller", HaveValue(BeTrue())),
	)))
}

// expectEvent waits for an events.k8s.io event on the FaucetServer; events
// are sent asynchronously.
func expectEvent(ns, eventType, reason string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var list eventsv1.EventList
		g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(ContainElement(And(
			HaveField("Regarding.Kind", "FaucetServer"),
			HaveField("Regarding.Name", fsName),
			HaveField("Type", eventType),
			HaveField("Reason", reason),
		)))
	}).Should(Succeed())
}
