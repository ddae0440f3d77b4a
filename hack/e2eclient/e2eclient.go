// Package e2eclient is what the end-to-end tests (hack/e2e on envtest,
// hack/e2ecluster on a real cluster) share: a Kubernetes client that knows
// FaucetServers, and drips through the official JavaScript client.
package e2eclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
)

// NewClient is a client for the built-in kinds and FaucetServers.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := faucetv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}

// Result is the summary line of hack/e2e-client/e2e.mjs.
type Result struct {
	OK     bool            `json:"ok"`
	Error  string          `json:"error"`
	TxID   string          `json:"txId"`
	Sender string          `json:"sender"`
	Nonce  string          `json:"nonce"`
	Amount string          `json:"amount"`
	Status json.RawMessage `json:"status"`
}

// Drip asks faucetURL for a drip of amount µSTX to address, and for its
// status, with @stacks/blockchain-api-client (hack/e2e-client/e2e.mjs under
// repo), which checks both answers against the published schemas and
// verifies the signed transaction. Any failure is an error with the
// script's output.
func Drip(ctx context.Context, repo, faucetURL, address string, amount int64) (Result, error) {
	return run(ctx, repo, amount, "--faucet", faucetURL, "--address", address, "--amount", strconv.FormatInt(amount, 10))
}

// DripSBTC asks faucetURL for an sBTC drip of amount satoshis to address
// through the official client's sBTC operation, and checks that the signed
// transaction is the SIP-010 transfer of the token asset (ADDR.contract::
// token) with its Deny-mode post-condition.
func DripSBTC(ctx context.Context, repo, faucetURL, address string, amount int64, asset string) (Result, error) {
	return run(ctx, repo, amount, "--faucet", faucetURL, "--address", address, "--amount", strconv.FormatInt(amount, 10), "--sbtc", asset)
}

func run(ctx context.Context, repo string, amount int64, args ...string) (Result, error) {
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(repo, "hack", "e2e-client", "e2e.mjs")}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var res Result
	if jerr := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); jerr != nil || err != nil || !res.OK {
		return res, fmt.Errorf("official client: %w / %w: %s\nstderr: %s", err, jerr, stdout.String(), stderr.String())
	}
	if res.Amount != strconv.FormatInt(amount, 10) {
		return res, fmt.Errorf("official client saw amount %s, want %d", res.Amount, amount)
	}
	return res, nil
}
