//go:build e2ecluster

package e2ecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stxfaucet/faucet-operator/hack/oidcprovider"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// The tests' OpenID provider in a pod (bin/oidc-provider in the tools
// image), its users and clients from a ConfigMap. The cluster has no DNS
// for Services, so the issuer is the provider Service's ClusterIP: the
// faucet pod reaches it there, and so does this test, from the cluster's
// network.
const (
	oidcPort         = 9998
	oidcClientID     = "faucet"
	oidcClientSecret = "faucet-e2e-client-secret-0123456789"
	oidcPassword     = "alice-e2e-password"
)

// checkSignInOnTheCluster points the running FaucetServer at a provider
// in a pod (spec.identity.oidc, its client secret a Secret) with a tier
// that doubles the drip, and checks a signed-in drip, its eligibility, a
// token for another client, the page's sign-in redirect, the budget in
// the info document and the runway on `kubectl get fsrv`.
func checkSignInOnTheCluster(t *testing.T, ctx context.Context, e env, c client.Client, faucetURL, nodeURL string) {
	e.apply(t, ctx, oidcServiceManifest())
	issuer := "http://" + serviceAddr(t, ctx, c, ns, "oidc")
	callback := faucetURL + "/faucet/v1/auth/callback"
	e.apply(t, ctx, oidcProviderManifest(e.toolsImage, issuer, callback))
	waitAvailable(t, ctx, c, ns, "oidc", 2*time.Minute)
	poll(t, ctx, "the provider's discovery through its Service", time.Minute, func() error {
		code, body := get(ctx, issuer+"/.well-known/openid-configuration")
		if code != http.StatusOK || !strings.Contains(body, `"issuer":"`+issuer+`"`) {
			return fmt.Errorf("discovery: %d %s", code, body)
		}
		return nil
	})

	old := onlyPod(t, ctx, c, ns, "app.kubernetes.io/instance="+fsName)
	e.kubectlOut(t, ctx, "-n", ns, "patch", "faucetserver", fsName, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"identity":{
  "oidc":{"issuerURL":%q,"clientID":%q,"clientSecretRef":{"name":"oidc-client"}},
  "tiers":[{"name":"verified","match":{"emailVerified":true},"amountPercent":200,"limit":{"requests":5,"window":"1h"},"skipProofOfWork":true}]}}}`,
		issuer, oidcClientID))
	waitNewPod(t, ctx, c, old.UID, 3*time.Minute)
	waitReady(t, ctx, c, 2*time.Minute)
	waitServed(t, ctx, faucetURL)

	hc := &http.Client{Timeout: 30 * time.Second}
	alice, err := oidcprovider.LoginAt(ctx, hc, issuer, oidcClientID, oidcClientSecret, callback, "alice", oidcPassword, nil)
	if err != nil {
		t.Fatalf("sign in at the provider in the pod: %v", err)
	}
	to := newKey(t).TestnetAddress()
	el := bearerGet(t, ctx, faucetURL+"/faucet/v1/eligibility?asset=stx&address="+to.String(), alice.IDToken)
	if el["eligible"] != true || el["tier"] != "verified" || el["amount"] != strconv.Itoa(2*dripUSTX) {
		t.Fatalf("alice's eligibility: %v", el)
	}
	code, body := bearerDrip(ctx, faucetURL, to, alice.IDToken)
	if code != http.StatusOK || !strings.Contains(body, `"stx":"`+strconv.Itoa(2*dripUSTX)+`"`) {
		t.Fatalf("alice's drip: %d %s", code, body)
	}
	waitBalances(t, ctx, nodeURL, map[stacks.Address]uint64{to: 2 * dripUSTX}, nil, time.Minute)

	other, err := oidcprovider.LoginAt(ctx, hc, issuer, "other", oidcClientSecret, callback, "alice", oidcPassword, nil)
	if err != nil {
		t.Fatalf("sign in for the other client: %v", err)
	}
	if code, body := bearerDrip(ctx, faucetURL, newKey(t).TestnetAddress(), other.IDToken); code != http.StatusUnauthorized || !strings.Contains(body, "not for this faucet") {
		t.Fatalf("a token for another client: %d %s", code, body)
	}

	// The page's sign-in starts at the provider the pod discovered.
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(faucetURL + "/faucet/v1/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, issuer+"/") || !strings.Contains(loc, "code_challenge_method=S256") {
		t.Fatalf("sign-in: %d to %q", resp.StatusCode, loc)
	}

	info := bearerGet(t, ctx, faucetURL+"/faucet/v1/info", "")
	assets, _ := info["assets"].([]any)
	stx, _ := assets[0].(map[string]any)
	if b, _ := stx["budget"].(map[string]any); b == nil || b["left"] == nil || b["period_seconds"] != float64(86400) {
		t.Fatalf("the STX budget in info: %v", stx["budget"])
	}
	if si, _ := info["sign_in"].(map[string]any); si["enabled"] != true || si["issuer"] != issuer {
		t.Fatalf("sign_in in info: %v", info["sign_in"])
	}
	// The operator's runway estimate, from the balances it reads every 5 s.
	poll(t, ctx, "the runway on kubectl get fsrv", 2*time.Minute, func() error {
		table := e.kubectlOut(t, ctx, "get", "fsrv", "-n", ns)
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) < 2 || !strings.Contains(lines[0], "RUNWAY") {
			return fmt.Errorf("no RUNWAY column:\n%s", table)
		}
		col := strings.Index(lines[0], "RUNWAY")
		if len(lines[1]) <= col || strings.TrimSpace(lines[1][col:col+min(8, len(lines[1])-col)]) == "" {
			return fmt.Errorf("no runway yet:\n%s", table)
		}
		t.Logf("kubectl get fsrv:\n%s", table)
		return nil
	})
}

func bearerDrip(ctx context.Context, faucetURL string, to stacks.Address, token string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, faucetURL+"/extended/v3/faucets/stx", strings.NewReader(`{"address":"`+to.String()+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	return doRequest(req)
}

func bearerGet(t *testing.T, ctx context.Context, url, token string) map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	code, body := doRequest(req)
	var m map[string]any
	if code != http.StatusOK || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	return m
}

func doRequest(req *http.Request) (int, string) {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func oidcServiceManifest() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: oidc
  namespace: %[1]s
spec:
  selector: {app: oidc}
  ports:
  - {name: http, port: %[2]d, targetPort: http}
`, ns, oidcPort)
}

// oidcProviderManifest runs the provider with one verified user, the
// faucet's client and a second client, and the faucet's client secret.
func oidcProviderManifest(image, issuer, callback string) string {
	users := fmt.Sprintf(`[{"id":"u-alice","username":"alice","password":%q,"email":"alice@example.com","emailVerified":true,"name":"Alice"}]`, oidcPassword)
	clients := fmt.Sprintf(`[{"id":%q,"secret":%q,"redirectURIs":[%q],"accessTokenJWT":true},{"id":"other","secret":%q,"redirectURIs":[%q]}]`,
		oidcClientID, oidcClientSecret, callback, oidcClientSecret, callback)
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: oidc-client
  namespace: %[1]s
stringData:
  client-secret: %[2]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: oidc-config
  namespace: %[1]s
data:
  users.json: '%[3]s'
  clients.json: '%[4]s'
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: oidc
  namespace: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: oidc}
  template:
    metadata:
      labels: {app: oidc}
    spec:
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: oidc
        image: %[5]s
        command: [/oidc-provider, --addr=:%[6]d, --issuer=%[7]s, --users-file=/config/users.json, --clients-file=/config/clients.json]
        ports:
        - {name: http, containerPort: %[6]d}
        readinessProbe:
          httpGet: {path: /ready, port: http}
          periodSeconds: 1
        volumeMounts:
        - {name: config, mountPath: /config, readOnly: true}
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
      volumes:
      - name: config
        configMap: {name: oidc-config}
`, ns, oidcClientSecret, users, clients, image, oidcPort, issuer)
}
