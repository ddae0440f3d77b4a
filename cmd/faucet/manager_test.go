package main

import (
	"context"
	"crypto/tls"
	"flag"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestManagerOptions(t *testing.T) {
	tests := map[string]struct {
		// args and env are the command line and environment
		args []string
		env  map[string]string
		// check inspects the parsed options
		check func(t *testing.T, o managerOptions)
		// wantErr is a substring of the expected error, "" for none
		wantErr string
	}{
		"defaults": {
			args: []string{"--server-image", "img:1"},
			check: func(t *testing.T, o managerOptions) {
				c := o.ctrlOptions(nil)
				if c.Metrics.BindAddress != ":8443" || c.HealthProbeBindAddress != ":8081" {
					t.Errorf("addresses %q %q", c.Metrics.BindAddress, c.HealthProbeBindAddress)
				}
				if !c.Metrics.SecureServing || c.Metrics.FilterProvider == nil || c.Metrics.CertDir != "" {
					t.Errorf("metrics secure %v, filter %v, cert dir %q: want HTTPS through the API server's authn and authz, self-signed",
						c.Metrics.SecureServing, c.Metrics.FilterProvider != nil, c.Metrics.CertDir)
				}
				if !c.LeaderElection || c.LeaderElectionID == "" || !c.LeaderElectionReleaseOnCancel {
					t.Errorf("leader election %v id %q", c.LeaderElection, c.LeaderElectionID)
				}
				if c.Cache.DefaultNamespaces != nil {
					t.Errorf("namespaces %v, want all", c.Cache.DefaultNamespaces)
				}
				if len(c.Cache.ByObject) != 7 {
					t.Errorf("child caches %v, want the 7 managed-label filters", c.Cache.ByObject)
				}
			},
		},
		"flags": {
			args: []string{
				"--server-image=img:2", "--metrics-bind-address=:8080", "--metrics-secure=false", "--health-probe-bind-address=:9",
				"--leader-elect=false", "--leader-election-namespace=ops", "--watch-namespaces", " a, b ,,c",
			},
			check: func(t *testing.T, o managerOptions) {
				c := o.ctrlOptions(nil)
				if c.Metrics.BindAddress != ":8080" || c.HealthProbeBindAddress != ":9" || c.LeaderElection || c.LeaderElectionNamespace != "ops" {
					t.Errorf("options %+v", c)
				}
				if c.Metrics.SecureServing || c.Metrics.FilterProvider != nil {
					t.Errorf("--metrics-secure=false: secure %v, filter %v", c.Metrics.SecureServing, c.Metrics.FilterProvider != nil)
				}
				got := slices.Sorted(maps.Keys(c.Cache.DefaultNamespaces))
				if !slices.Equal(got, []string{"a", "b", "c"}) {
					t.Errorf("namespaces %v", got)
				}
			},
		},
		"environment": {
			env: map[string]string{"FAUCET_SERVER_IMAGE": "img:env", "FAUCET_WATCH_NAMESPACES": "x", "FAUCET_LEADER_ELECT": "false"},
			check: func(t *testing.T, o managerOptions) {
				if o.serverImage != "img:env" || !slices.Equal(o.namespaces(), []string{"x"}) || o.leaderElect {
					t.Errorf("options %+v", o)
				}
			},
		},
		"flags win over the environment": {
			args: []string{"--server-image=img:flag"},
			env:  map[string]string{"FAUCET_SERVER_IMAGE": "img:env"},
			check: func(t *testing.T, o managerOptions) {
				if o.serverImage != "img:flag" {
					t.Errorf("image %q", o.serverImage)
				}
			},
		},
		"funding defaults": {
			args: []string{"--server-image=i"},
			check: func(t *testing.T, o managerOptions) {
				m := o.fundingMonitor(clock.RealClock{})
				if m.Interval != time.Minute || m.Workers != 8 {
					t.Errorf("funding monitor interval %s workers %d, want 1m and 8", m.Interval, m.Workers)
				}
			},
		},
		"funding flags and environment": {
			args: []string{"--server-image=i", "--funding-interval=30s"},
			env:  map[string]string{"FAUCET_FUNDING_WORKERS": "3"},
			check: func(t *testing.T, o managerOptions) {
				m := o.fundingMonitor(clock.RealClock{})
				if m.Interval != 30*time.Second || m.Workers != 3 {
					t.Errorf("funding monitor interval %s workers %d", m.Interval, m.Workers)
				}
			},
		},
		"a metrics certificate directory": {
			args: []string{"--server-image=i", "--metrics-cert-dir=/certs"},
			env:  map[string]string{"FAUCET_METRICS_BIND_ADDRESS": ":9443"},
			check: func(t *testing.T, o managerOptions) {
				m := o.ctrlOptions(nil).Metrics
				if m.BindAddress != ":9443" || !m.SecureServing || m.CertDir != "/certs" || m.CertName != "tls.crt" || m.KeyName != "tls.key" {
					t.Errorf("metrics options %+v", m)
				}
				cfg := &tls.Config{}
				for _, opt := range m.TLSOpts {
					opt(cfg)
				}
				if !slices.Equal(cfg.NextProtos, []string{"http/1.1"}) {
					t.Errorf("ALPN %q, want HTTP/1.1 only", cfg.NextProtos)
				}
			},
		},
		"a certificate needs HTTPS": {
			args: []string{"--server-image=i", "--metrics-cert-dir=/certs", "--metrics-secure=false"}, wantErr: "--metrics-cert-dir",
		},
		"funding interval too short":   {args: []string{"--server-image=i", "--funding-interval=10ms"}, wantErr: "--funding-interval"},
		"funding workers at least one": {args: []string{"--server-image=i", "--funding-workers=0"}, wantErr: "--funding-workers"},
		"server image is required":     {wantErr: "--server-image"},
		"an existing lease needs its namespace": {
			args: []string{"--server-image=i", "--leader-election-create-lease=false"}, wantErr: "--leader-election-namespace",
		},
		"bad boolean in the environment": {
			args: []string{"--server-image=i"}, env: map[string]string{"FAUCET_LEADER_ELECT": "maybe"}, wantErr: "FAUCET_LEADER_ELECT",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			clearManagerEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			o, err := parseManagerOptions(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, o)
		})
	}
}

// TestExistingLeaseLock: with --leader-election-create-lease=false the
// manager locks the named Lease and never creates it (the chart does, so
// helm uninstall removes it for good).
func TestExistingLeaseLock(t *testing.T) {
	clearManagerEnv(t)
	o, err := parseManagerOptions([]string{"--server-image=i", "--leader-election-create-lease=false",
		"--leader-election-namespace=ops", "--leader-election-id=faucet.lock"})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := o.existingLeaseLock(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if lock.Describe() != "ops/faucet.lock" || !strings.HasPrefix(lock.Identity(), mustHostname(t)+"_") {
		t.Fatalf("lock %s identity %s", lock.Describe(), lock.Identity())
	}
	err = lock.Create(t.Context(), resourcelock.LeaderElectionRecord{HolderIdentity: lock.Identity()})
	if err == nil || !strings.Contains(err.Error(), "comes with the Helm release") {
		t.Fatalf("Create: %v, want a refusal", err)
	}
}

func mustHostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// clearManagerEnv unsets every FAUCET_ variable of `faucet manager` for the
// test: an empty value would still count as set.
func clearManagerEnv(t *testing.T) {
	t.Helper()
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	var o managerOptions
	o.register(fs)
	fs.VisitAll(func(f *flag.Flag) {
		t.Setenv(envName(f.Name), "") // restores the old value after the test
		os.Unsetenv(envName(f.Name))
	})
}

// TestManagerNeverCachesSecrets checks that the manager's client reads
// Secrets from the API server: a cached read would start an informer that
// holds every Secret in reach, keys and passwords included.
func TestManagerNeverCachesSecrets(t *testing.T) {
	for name, args := range map[string][]string{
		"all namespaces": {"--server-image=i"},
		"watched ones":   {"--server-image=i", "--watch-namespaces=a,b"},
	} {
		t.Run(name, func(t *testing.T) {
			clearManagerEnv(t)
			o, err := parseManagerOptions(args)
			if err != nil {
				t.Fatal(err)
			}
			c := o.ctrlOptions(nil)
			if c.Client.Cache == nil {
				t.Fatal("no client cache options: Secrets would be read through the cache")
			}
			if !slices.ContainsFunc(c.Client.Cache.DisableFor, func(obj client.Object) bool {
				_, ok := obj.(*corev1.Secret)
				return ok
			}) {
				t.Errorf("DisableFor %T lacks Secrets", c.Client.Cache.DisableFor)
			}
			for obj := range c.Cache.ByObject {
				if _, ok := obj.(*corev1.Secret); ok {
					t.Errorf("a cache configuration for Secrets: %+v", c.Cache.ByObject[obj])
				}
			}
		})
	}
}

func TestManagerCommandRegistered(t *testing.T) {
	clearManagerEnv(t)
	err := run(context.Background(), clock.RealClock{}, []string{"manager"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--server-image") {
		t.Fatalf("faucet manager without an image: %v", err)
	}
}
