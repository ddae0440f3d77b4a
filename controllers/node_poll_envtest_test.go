package controllers

import (
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// spec.node.pollInterval and busyPollInterval against a real API server:
// the CRD takes what `faucet serve` takes, and defaults them to serve's
// defaults, so an object filled in by the API server passes no flag.
var _ = Describe("Node poll cadences", func() {
	var ns string

	BeforeEach(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fsrv-polls-"}}
		Expect(k8sClient.Create(suiteCtx, n)).To(Succeed())
		ns = n.Name
	})

	It("defaults both to serve's defaults, which pass no flag, and accepts the bounds", func() {
		fs := newFaucetServer(ns)
		Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed())
		Expect(fs.Spec.Node.PollInterval).To(HaveValue(Equal(metav1.Duration{Duration: time.Second})))
		Expect(fs.Spec.Node.BusyPollInterval).To(HaveValue(Equal(metav1.Duration{Duration: 100 * time.Millisecond})))
		Expect(fs.Spec.Node.StallAfter).To(HaveValue(Equal(metav1.Duration{Duration: 30 * time.Minute})))
		Expect(slices.ContainsFunc(serverArgs(fs), func(a string) bool { return strings.Contains(a, "stall-after") })).To(BeFalse(),
			"the defaulted stall threshold is serve's default: no flag")
		Expect(slices.ContainsFunc(serverArgs(fs), func(a string) bool { return strings.Contains(a, "poll-interval") })).To(BeFalse(),
			"the defaulted cadences are serve's defaults: no flag")

		for _, c := range [][2]time.Duration{{50 * time.Millisecond, 50 * time.Millisecond}, {time.Minute, time.Minute}, {20 * time.Second, 5 * time.Second}} {
			fs := newFaucetServer(ns)
			fs.Spec.Node.PollInterval, fs.Spec.Node.BusyPollInterval = &metav1.Duration{Duration: c[0]}, &metav1.Duration{Duration: c[1]}
			Expect(k8sClient.Create(suiteCtx, fs, client.DryRunAll)).To(Succeed(), "poll %s, busy poll %s", c[0], c[1])
			o := serverOptions(fs)
			o.Abuse.SwitchesFile = "" // no switches: the pod's file is no concern here
			Expect(o.Validate()).To(Succeed(), "the faucet takes what the CRD took: poll %s, busy poll %s", c[0], c[1])
		}
	})

	// Written as YAML: Go's metav1.Duration cannot send a malformed one.
	DescribeTable("refuses malformed and inconsistent cadences with readable messages",
		func(nodeYAML, message string) {
			u := unstructuredFaucetServer(ns, "node: {url: 'http://stacks-node:20443', "+nodeYAML+"}")
			err := k8sClient.Create(suiteCtx, u, client.DryRunAll)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a poll interval without a unit", "pollInterval: '20'", "spec.node.pollInterval in body should match"),
		Entry("a busy poll interval in words", "busyPollInterval: 1 minute", "spec.node.busyPollInterval in body should match"),
		Entry("a busy poll slower than the idle one", "pollInterval: 5s, busyPollInterval: 10s",
			"spec.node.busyPollInterval: Invalid value: node.busyPollInterval (default 100ms) must not exceed node.pollInterval"),
		Entry("a negative poll interval", "pollInterval: -1s", "spec.node.pollInterval in body should match"),
		Entry("a stall threshold in words", "stallAfter: half an hour", "spec.node.stallAfter in body should match"),
		Entry("a negative stall threshold", "stallAfter: -5m", "spec.node.stallAfter in body should match"),
	)
})
