package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// secretUse is one Secret a FaucetServer refers to, and how its data is
// checked. A missing Secret, data key or bad value is a state reported in
// the status (and retried when the Secret changes), never an error; the
// messages name the Secret and the data key, never the data, which holds
// keys or passwords.
type secretUse struct {
	what string // how messages name it: "<what> Secret"
	// ref selects the Secret's data key; nil when fs does not use one.
	ref               func(*faucetv1alpha1.FaucetServer) *corev1.SecretKeySelector
	notFound, invalid string // Ready reasons
	// check validates the data and returns the addresses it holds; nil
	// checks only that the data key exists.
	check func(data []byte) (addresses []string, err error)
	// digest: the data feeds the pods' config hash, so that a change rolls
	// them. The API tokens do not: the pods re-read them in place.
	digest bool
}

// secretUses are the Secrets a FaucetServer can refer to, in the order the
// reconciler reads them: keys, store URI, API tokens, treasury key.
var secretUses = [...]secretUse{
	{what: "key", ref: (*faucetv1alpha1.FaucetServer).KeySecretKey,
		notFound: faucetv1alpha1.ReasonKeySecretNotFound, invalid: faucetv1alpha1.ReasonInvalidKeys,
		check: parseAddresses(0), digest: true},
	{what: "store", ref: (*faucetv1alpha1.FaucetServer).StoreURISecretKey,
		notFound: faucetv1alpha1.ReasonStoreSecretNotFound, invalid: faucetv1alpha1.ReasonInvalidStoreSecret,
		check: checkPostgresURI, digest: true},
	{what: "API tokens", ref: (*faucetv1alpha1.FaucetServer).APITokensSecretKey,
		notFound: faucetv1alpha1.ReasonAPITokensSecretNotFound, invalid: faucetv1alpha1.ReasonInvalidAPITokensSecret},
	{what: "treasury", ref: (*faucetv1alpha1.FaucetServer).TreasurySecretKey,
		notFound: faucetv1alpha1.ReasonTreasurySecretNotFound, invalid: faucetv1alpha1.ReasonInvalidTreasuryKey,
		check: parseAddresses(1), digest: true},
}

// secretState is what a Secret yielded: the addresses its keys control and
// a digest of its data, or the reason it is unusable. It never holds the
// data. The zero value (a Secret fs does not use) is usable.
type secretState struct {
	reason    string // "" when usable, else a Ready reason
	message   string
	addresses []string
	digest    string
}

func (s secretState) usable() bool { return s.reason == "" }

// address is the one address of a single-key Secret, "" when none.
func (s secretState) address() string {
	if len(s.addresses) == 0 {
		return ""
	}
	return s.addresses[0]
}

// readSecret reads and checks the Secret use describes for fs.
func (r *FaucetServerReconciler) readSecret(ctx context.Context, fs *faucetv1alpha1.FaucetServer, use secretUse) (secretState, error) {
	ref := use.ref(fs)
	if ref == nil {
		return secretState{}, nil
	}
	var secret corev1.Secret
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: fs.Namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return secretState{
				reason:  use.notFound,
				message: fmt.Sprintf("%s Secret %q not found in namespace %q", use.what, ref.Name, fs.Namespace),
			}, nil
		}
		return secretState{}, fmt.Errorf("failed to read %s Secret %q: %w", use.what, ref.Name, err)
	}
	data, ok := secret.Data[ref.Key]
	if !ok {
		return secretState{
			reason:  use.invalid,
			message: fmt.Sprintf("%s Secret %q has no data key %q", use.what, ref.Name, ref.Key),
		}, nil
	}
	var st secretState
	if use.check != nil {
		addrs, err := use.check(data)
		if err != nil {
			return secretState{
				reason:  use.invalid,
				message: fmt.Sprintf("%s Secret %q, data key %q: %v", use.what, ref.Name, ref.Key, err),
			}, nil
		}
		st.addresses = addrs
	}
	if use.digest {
		sum := sha256.Sum256(data)
		st.digest = hex.EncodeToString(sum[:])
	}
	return st, nil
}

// parseAddresses checks a private keys file (exactly want keys; 0: any
// number) and returns their testnet addresses. Its errors never quote a key.
func parseAddresses(want int) func([]byte) ([]string, error) {
	return func(data []byte) ([]string, error) {
		keys, err := stacks.ParsePrivateKeys(string(data))
		if err != nil {
			return nil, err
		}
		if want > 0 && len(keys) != want {
			return nil, fmt.Errorf("want exactly one private key, found %d", len(keys))
		}
		addrs := make([]string, len(keys))
		for i, k := range keys {
			addrs[i] = k.TestnetAddress().String()
		}
		return addrs, nil
	}
}

// checkPostgresURI checks a store URI without quoting it (it holds a
// password).
func checkPostgresURI(data []byte) ([]string, error) {
	switch uri := string(data); {
	case strings.TrimSpace(uri) != uri:
		// A newline from `kubectl create secret --from-file` would end up
		// in the URI the faucet connects with.
		return nil, errors.New("the URI starts or ends with whitespace, e.g. a trailing newline")
	case !isPostgresURI(uri):
		// Anything else would be taken for an SQLite path, on the pod's
		// read-only root filesystem.
		return nil, errors.New("not a postgres:// or postgresql:// URI")
	}
	return nil, nil
}
