// Command oidc-provider runs the test OpenID Connect provider of package
// oidcprovider as a server, for end-to-end tests in Kubernetes:
//
//	oidc-provider --issuer http://oidc.faucet-e2e.svc:9998 \
//	    --users-file /etc/oidc/users.json --clients-file /etc/oidc/clients.json
//
// users.json is a JSON array of users:
//
//	[{"id": "u-alice", "username": "alice", "password": "…", "email": "alice@example.com",
//	  "emailVerified": true, "name": "Alice", "groups": ["faucet-admins"]}]
//
// clients.json is a JSON array of clients (secret "" = public client, PKCE only;
// lifetimes are Go durations, "" = 1h):
//
//	[{"id": "faucet", "secret": "…", "redirectURIs": ["http://faucet.faucet-e2e.svc/auth/callback"],
//	  "postLogoutRedirectURIs": [], "accessTokenJWT": true,
//	  "idTokenLifetime": "10m", "accessTokenLifetime": "5m"}]
//
// It logs JSON to stderr, serves /healthz and /ready for probes, and stops
// gracefully on SIGTERM or SIGINT.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/stxfaucet/faucet-operator/hack/oidcprovider"
)

// shutdownGrace bounds the wait for requests in flight; the pod's default
// termination grace period is 30s.
const shutdownGrace = 10 * time.Second

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// zitadel's op logs only through the default logger; this is a process of its own.
	slog.SetDefault(logger)
	if err := run(os.Args[1:], logger); err != nil {
		logger.Error("oidc-provider failed", "error", err)
		os.Exit(1)
	}
}

func run(args []string, logger *slog.Logger) error {
	fs := flag.NewFlagSet("oidc-provider", flag.ContinueOnError)
	addr := fs.String("addr", ":9998", "address to listen on")
	issuer := fs.String("issuer", "", "issuer URL exactly as relying parties use it, e.g. http://oidc.faucet-e2e.svc:9998 (required)")
	usersFile := fs.String("users-file", "", "JSON array of users (id, username, password, email, emailVerified, name, groups)")
	clientsFile := fs.String("clients-file", "", "JSON array of clients (id, secret, redirectURIs, postLogoutRedirectURIs, accessTokenJWT, idTokenLifetime, accessTokenLifetime)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("parse flags: %w", err)
	}
	if *issuer == "" {
		return errors.New("--issuer is required")
	}
	var users []oidcprovider.User
	if err := readJSON(*usersFile, &users); err != nil {
		return fmt.Errorf("users file: %w", err)
	}
	clients, err := readClients(*clientsFile)
	if err != nil {
		return fmt.Errorf("clients file: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p, err := oidcprovider.Start(oidcprovider.Config{
		Addr: *addr, Issuer: *issuer, Users: users, Clients: clients, Logger: logger, Clock: clock.RealClock{},
	})
	if err != nil {
		return fmt.Errorf("start provider: %w", err)
	}
	<-ctx.Done()
	logger.Info("signal received, shutting down", "grace", shutdownGrace.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := p.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// fileClient is the JSON form of oidcprovider.Client: lifetimes as Go durations.
type fileClient struct {
	ID                     string   `json:"id"`
	Secret                 string   `json:"secret"`
	RedirectURIs           []string `json:"redirectURIs"`
	PostLogoutRedirectURIs []string `json:"postLogoutRedirectURIs"`
	AccessTokenJWT         bool     `json:"accessTokenJWT"`
	IDTokenLifetime        string   `json:"idTokenLifetime"`
	AccessTokenLifetime    string   `json:"accessTokenLifetime"`
}

func readClients(path string) ([]oidcprovider.Client, error) {
	var fcs []fileClient
	if err := readJSON(path, &fcs); err != nil {
		return nil, err
	}
	clients := make([]oidcprovider.Client, 0, len(fcs))
	for _, fc := range fcs {
		idLife, err := duration(fc.IDTokenLifetime)
		if err != nil {
			return nil, fmt.Errorf("client %q: idTokenLifetime: %w", fc.ID, err)
		}
		atLife, err := duration(fc.AccessTokenLifetime)
		if err != nil {
			return nil, fmt.Errorf("client %q: accessTokenLifetime: %w", fc.ID, err)
		}
		clients = append(clients, oidcprovider.Client{
			ID: fc.ID, Secret: fc.Secret, RedirectURIs: fc.RedirectURIs,
			PostLogoutRedirectURIs: fc.PostLogoutRedirectURIs, AccessTokenJWT: fc.AccessTokenJWT,
			IDTokenLifetime: idLife, AccessTokenLifetime: atLife,
		})
	}
	return clients, nil
}

func duration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("parse duration: %w", err)
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration %s", s)
	}
	return d, nil
}

// readJSON decodes path into v strictly, so a misspelled field fails at startup
// instead of silently dropping a setting; no path means no entries.
func readJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode %s: data after the JSON array", path)
	}
	return nil
}
