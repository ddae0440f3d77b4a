//go:build !serveonly

// The operator pulls in client-go and controller-runtime, most of a cold
// build: the serveonly tag (make run) leaves this file out.

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/controllers"
	"github.com/stxfaucet/faucet-operator/server/options"
)

// managerOptions are the settings of `faucet manager`, each also an env
// variable (FAUCET_SERVER_IMAGE, FAUCET_WATCH_NAMESPACES, ...).
type managerOptions struct {
	metricsAddr             string
	metricsSecure           bool
	metricsCertDir          string
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	leaderElectionCreate    bool
	watchNamespaces         string
	serverImage             string
	kubeconfig              string
	fundingInterval         time.Duration
	fundingWorkers          int
	log                     options.Log
}

func (o *managerOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", `address of the Prometheus metrics endpoint ("0" disables it)`)
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients the API server authenticates (TokenReview) and authorizes (SubjectAccessReview: get on the non-resource URL /metrics); false serves plain HTTP to anyone")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory holding the metrics server's "+metricsCertName+" and "+metricsKeyName+", reloaded when they change (default: a self-signed certificate generated at start)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", `address of /healthz and /readyz ("0" disables them)`)
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader, so only one manager replica reconciles at a time")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "faucet-operator.stxfaucet.dev", "name of the leader election Lease")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's own; required out of cluster)")
	fs.BoolVar(&o.leaderElectionCreate, "leader-election-create-lease", true, "create the Lease when it is missing; false when something else owns it (the Helm chart creates it, so helm uninstall deletes it)")
	fs.StringVar(&o.watchNamespaces, "watch-namespaces", "", "comma-separated namespaces to watch (default: all)")
	fs.StringVar(&o.serverImage, "server-image", "", "image of faucet pods whose FaucetServer sets no spec.image: the manager's own image")
	fs.DurationVar(&o.fundingInterval, "funding-interval", controllers.DefaultFundingInterval, "how often the balances of each FaucetServer's keys are read from its node, ±10 % jitter")
	fs.IntVar(&o.fundingWorkers, "funding-workers", controllers.DefaultFundingWorkers, "how many balance reads may be in flight at once, across all FaucetServers")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else the in-cluster config, else ~/.kube/config)")
	o.log = options.Defaults().Log
	o.log.BindFlags(options.NewFlags(fs))
}

// parseManagerOptions parses flags and env and checks them.
func parseManagerOptions(args []string) (managerOptions, error) {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	var o managerOptions
	o.register(fs)
	fs.Usage = usageFunc(fs, managerUsage, managerFlagGroups...)
	if err := parseWithEnv(fs, args); err != nil {
		return o, err
	}
	if err := o.check(); err != nil {
		return o, flagError(fs, err)
	}
	if _, err := o.log.Logger(); err != nil {
		return o, flagError(fs, err)
	}
	return o, nil
}

const managerUsage = `usage: faucet manager --server-image IMAGE [flags]

Runs the FaucetServer operator. Every flag can also be set as FAUCET_<NAME>
(e.g. FAUCET_SERVER_IMAGE); a flag on the command line wins.
`

// managerFlagGroups order `faucet manager -h` by concern.
var managerFlagGroups = []flagGroup{
	{"faucet pods", []string{"server-image", "watch-namespaces"}},
	{"funding", []string{"funding-interval", "funding-workers"}},
	{"leader election", []string{"leader-elect", "leader-election-id", "leader-election-namespace", "leader-election-create-lease"}},
	{"metrics and probes", []string{"metrics-bind-address", "metrics-secure", "metrics-cert-dir", "health-probe-bind-address"}},
	{"cluster access", []string{"kubeconfig"}},
	{"logging", []string{"log-level", "log-format"}},
}

// check refuses settings the manager cannot run with: the command line's
// fault, so an exit 2.
func (o managerOptions) check() error {
	if o.serverImage == "" {
		return errors.New("--server-image (or FAUCET_SERVER_IMAGE) is required: the image faucet pods run by default")
	}
	if o.fundingInterval < time.Second {
		return fmt.Errorf("--funding-interval %s: must be at least 1s", o.fundingInterval)
	}
	if o.fundingWorkers < 1 {
		return fmt.Errorf("--funding-workers %d: must be at least 1", o.fundingWorkers)
	}
	if o.leaderElect && !o.leaderElectionCreate && o.leaderElectionNamespace == "" {
		return errors.New("--leader-election-create-lease=false needs --leader-election-namespace: the namespace of the Lease that exists")
	}
	if o.metricsCertDir != "" && !o.metricsSecure {
		return errors.New("--metrics-cert-dir needs --metrics-secure: plain HTTP uses no certificate")
	}
	return nil
}

// The file names controller-runtime reads from --metrics-cert-dir: those of
// a kubernetes.io/tls Secret (cert-manager's too), so one mounts as is.
const (
	metricsCertName = "tls.crt"
	metricsKeyName  = "tls.key"
)

// metricsOptions serve /metrics as kubebuilder's scaffold does: HTTPS with
// every request authenticated and authorized by the API server, so only a
// scraper bound to a role allowing get on /metrics reads it.
func (o managerOptions) metricsOptions() metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr}
	if !o.metricsSecure {
		return m
	}
	m.SecureServing = true
	m.FilterProvider = filters.WithAuthenticationAndAuthorization
	m.CertDir, m.CertName, m.KeyName = o.metricsCertDir, metricsCertName, metricsKeyName
	// HTTP/1.1 only: HTTP/2 exposes the Stream Cancellation and Rapid
	// Reset CVEs (GHSA-qppj-fm5r-hxr3, GHSA-4374-p667-p6c8), and a scrape
	// gains nothing from it.
	m.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return m
}

// checkMetricsCerts fails when --metrics-cert-dir lacks the certificate or
// the key: controller-runtime would fall back to a self-signed certificate
// without a word, and scrapers that verify it would fail.
func (o managerOptions) checkMetricsCerts() error {
	if o.metricsCertDir == "" {
		return nil
	}
	for _, name := range []string{metricsCertName, metricsKeyName} {
		if _, err := os.Stat(filepath.Join(o.metricsCertDir, name)); err != nil {
			return fmt.Errorf("--metrics-cert-dir: %w", err)
		}
	}
	return nil
}

// namespaces splits --watch-namespaces; empty means all namespaces.
func (o managerOptions) namespaces() []string {
	var out []string
	for ns := range strings.SplitSeq(o.watchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// ctrlOptions are the controller-runtime manager options.
func (o managerOptions) ctrlOptions(scheme *runtime.Scheme) ctrl.Options {
	c := cache.Options{ByObject: controllers.CacheByObject()}
	if nss := o.namespaces(); len(nss) > 0 {
		c.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range nss {
			c.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return ctrl.Options{
		Scheme: scheme,
		Cache:  c,
		// Secrets are read from the API server, never from a cache: a
		// cached read would start an informer holding every Secret in
		// reach, keys and passwords included.
		Client:                  client.Options{Cache: controllers.ClientCacheOptions()},
		Metrics:                 o.metricsOptions(),
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderElectionID,
		LeaderElectionNamespace: o.leaderElectionNamespace,
		// The process exits as soon as the manager stops, so handing the
		// lease over early is safe and speeds up failover.
		LeaderElectionReleaseOnCancel: true,
	}
}

// existingLeaseLock is the leader-election lock on a Lease the manager never
// creates. The chart creates the Lease with the release, and helm uninstall
// deletes it before the manager pod stops; a lock that created a missing
// Lease would bring it back from the stopping pod and leave it behind.
func (o managerOptions) existingLeaseLock(cfg *rest.Config) (resourcelock.Interface, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// A hung call must not outlast half the renew deadline (controller-
	// runtime's default of 10s), as controller-runtime's own lock does.
	cfg.Timeout = 5 * time.Second
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaderElectionNamespace, o.leaderElectionID,
		core, coordination, resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	return existingLease{lock}, nil
}

// existingLease refuses to create its Lease; everything else is the Lease lock.
type existingLease struct{ resourcelock.Interface }

func (l existingLease) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return fmt.Errorf("the leader election Lease %s does not exist; with --leader-election-create-lease=false it comes with the Helm release", l.Describe())
}

// fundingMonitor reads the faucets' balances from their nodes.
func (o managerOptions) fundingMonitor(clk procClock) *controllers.FundingMonitor {
	return &controllers.FundingMonitor{Interval: o.fundingInterval, Workers: o.fundingWorkers, Clock: clk}
}

func (o managerOptions) restConfig() (*rest.Config, error) {
	if o.kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	return ctrlconfig.GetConfig()
}

func newManagerScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := faucetv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// runManager runs the operator until ctx ends.
func runManager(ctx context.Context, clk procClock, args []string, _ io.Writer) error {
	o, err := parseManagerOptions(args)
	if err != nil {
		return err
	}
	logger, err := o.log.Logger()
	if err != nil {
		return err
	}
	log := logr.FromSlogHandler(logger.Handler())
	ctrl.SetLogger(log)
	klog.SetLogger(log) // client-go (leader election, informers) logs through klog
	if err := o.checkMetricsCerts(); err != nil {
		return err
	}

	cfg, err := o.restConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "faucet-operator/" + version
	scheme, err := newManagerScheme()
	if err != nil {
		return err
	}
	opts := o.ctrlOptions(scheme)
	if o.leaderElect && !o.leaderElectionCreate {
		if opts.LeaderElectionResourceLockInterface, err = o.existingLeaseLock(cfg); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("failed to create manager: %w", err)
	}
	r := &controllers.FaucetServerReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Recorder:     mgr.GetEventRecorder("faucet-operator"),
		DefaultImage: o.serverImage,
		Funding:      o.fundingMonitor(clk),
		Clock:        clk,
	}
	if err := r.SetupWithManager(ctx, mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	logger.Info("manager starting", "version", version, "serverImage", o.serverImage,
		"watchNamespaces", o.namespaces(), "leaderElection", o.leaderElect, "fundingInterval", o.fundingInterval,
		"metricsAddress", o.metricsAddr, "metricsSecure", o.metricsSecure)
	return mgr.Start(ctx)
}
