package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	faucetv1alpha1 "github.com/stxfaucet/faucet-operator/api/v1alpha1"
	"github.com/stxfaucet/faucet-operator/server/chain/bitcoin"
	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
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
	check func(fs *faucetv1alpha1.FaucetServer, data []byte) (addresses []string, err error)
	// digest: the data feeds the pods' config hash, so that a change rolls
	// them. The API tokens do not: the pods re-read them in place.
	digest bool
	// credentials: the data is RPC credentials the FundingMonitor calls
	// the node with, so the checked pair is kept (in memory only).
	credentials bool
	// headers: the data is header lines the FundingMonitor sends to the
	// Stacks nodes, so the checked lines are kept (in memory only).
	headers bool
}

// secretUses are the Secrets a FaucetServer can refer to, in the order the
// reconciler reads them: keys, store URI, API tokens, treasury key, BTC key,
// BTC RPC credentials, OpenID Connect client secret, sign-in session key,
// Stacks node headers.
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
	{what: "BTC key", ref: (*faucetv1alpha1.FaucetServer).BTCKeySecretKey,
		notFound: faucetv1alpha1.ReasonBTCKeySecretNotFound, invalid: faucetv1alpha1.ReasonInvalidBTCKey,
		check: btcAddress, digest: true},
	{what: "BTC RPC credentials", ref: (*faucetv1alpha1.FaucetServer).BTCCredentialsSecretKey,
		notFound: faucetv1alpha1.ReasonBTCCredentialsSecretNotFound, invalid: faucetv1alpha1.ReasonInvalidBTCCredentials,
		check: checkRPCCredentials, digest: true, credentials: true},
	// The faucet reads both at start only: a change must roll the pods.
	{what: "OIDC client secret", ref: (*faucetv1alpha1.FaucetServer).OIDCClientSecretKey,
		notFound: faucetv1alpha1.ReasonOIDCClientSecretNotFound, invalid: faucetv1alpha1.ReasonInvalidOIDCClientSecret,
		check: checkClientSecret, digest: true},
	{what: "session key", ref: (*faucetv1alpha1.FaucetServer).SessionKeySecretKey,
		notFound: faucetv1alpha1.ReasonSessionKeySecretNotFound, invalid: faucetv1alpha1.ReasonInvalidSessionKey,
		check: checkSessionKey, digest: true},
	// The faucet reads the headers at start only, like the two above.
	{what: "node headers", ref: (*faucetv1alpha1.FaucetServer).NodeHeadersSecretKey,
		notFound: faucetv1alpha1.ReasonNodeHeadersSecretNotFound, invalid: faucetv1alpha1.ReasonInvalidNodeHeaders,
		check: checkNodeHeaders, digest: true, headers: true},
}

// secretState is what a Secret yielded: the addresses its keys control and
// a digest of its data, or the reason it is unusable. It never holds the
// data, except RPC credentials and node headers, which the FundingMonitor
// needs to call the nodes. The zero value (a Secret fs does not use) is
// usable.
type secretState struct {
	reason      string // "" when usable, else a Ready reason
	message     string
	addresses   []string
	digest      string
	credentials rpcCredentials // of a credentials use; zero otherwise
	headers     nodeHeaders    // of a headers use; zero otherwise
}

// rpcCredentials are a node's RPC user and password, interned with
// unique.Make: two equal pairs compare equal (a FundingMonitor target with
// the same credentials is the same target), while fmt, which prints a
// struct's unexported fields without calling their methods, finds only a
// pointer in it. Its own printed forms redact it too, so a state or target
// that reaches a log line by accident does not leak the password.
type rpcCredentials struct{ h unique.Handle[userPassword] }

type userPassword struct{ user, pass string }

func newRPCCredentials(user, pass string) rpcCredentials {
	return rpcCredentials{h: unique.Make(userPassword{user, pass})}
}

// isZero reports the absence of credentials.
func (c rpcCredentials) isZero() bool { return c == rpcCredentials{} }

// get returns the pair; empty strings for none.
func (c rpcCredentials) get() (user, pass string) {
	if c.isZero() {
		return "", ""
	}
	v := c.h.Value()
	return v.user, v.pass
}

const redactedCredentials = "[redacted RPC credentials]"

func (c rpcCredentials) String() string             { return redactedCredentials }
func (c rpcCredentials) GoString() string           { return redactedCredentials }
func (c rpcCredentials) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redactedCredentials)) }

// nodeHeaders are the checked header lines of a node headers Secret,
// interned and redacted as rpcCredentials are: equal lines compare equal,
// and no printed form shows them.
type nodeHeaders struct{ h unique.Handle[string] }

// isZero reports the absence of headers.
func (n nodeHeaders) isZero() bool { return n == nodeHeaders{} }

// header parses the lines (checked when the Secret was read); nil for
// none.
func (n nodeHeaders) header() (http.Header, error) {
	if n.isZero() {
		return nil, nil
	}
	return rpcclient.ParseHeaders(n.h.Value())
}

const redactedHeaders = "[redacted node headers]"

func (n nodeHeaders) String() string             { return redactedHeaders }
func (n nodeHeaders) GoString() string           { return redactedHeaders }
func (n nodeHeaders) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redactedHeaders)) }

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
		addrs, err := use.check(fs, data)
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
	if use.credentials {
		st.credentials = parseRPCCredentials(data)
	}
	if use.headers {
		st.headers = nodeHeaders{h: unique.Make(string(data))}
	}
	return st, nil
}

// parseAddresses checks a private keys file (exactly want keys; 0: any
// number) and returns their testnet addresses. Its errors never quote a key.
func parseAddresses(want int) func(*faucetv1alpha1.FaucetServer, []byte) ([]string, error) {
	return func(_ *faucetv1alpha1.FaucetServer, data []byte) ([]string, error) {
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

// btcAddress checks a Bitcoin key file as `faucet serve --btc-key-file`
// reads it, its first non-empty line "<WIF or 64 hex> [address]", and
// returns the key's P2WPKH address on fs's network. Its errors never quote
// the key; an address on the line that is not the key's is quoted, as
// addresses are public.
func btcAddress(fs *faucetv1alpha1.FaucetServer, data []byte) ([]string, error) {
	net, err := bitcoin.ParseNetwork(fs.BTCNetwork())
	if err != nil {
		return nil, err
	}
	var line string
	for l := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(l); line != "" {
			break
		}
	}
	fields := strings.Fields(line)
	switch len(fields) {
	case 0:
		return nil, errors.New("no private key: the file is empty")
	case 1, 2:
	default:
		return nil, fmt.Errorf(`want "<private key> [address]" on the first line, found %d fields`, len(fields))
	}
	key, err := bitcoin.ParsePrivateKey(fields[0], net)
	if err != nil {
		return nil, err
	}
	addr := key.Address().String()
	if len(fields) == 2 && fields[1] != addr {
		return nil, fmt.Errorf("the address after the key, %q, is not the key's %s address %s", truncate(fields[1], 100), net, addr)
	}
	return []string{addr}, nil
}

// checkRPCCredentials checks "user:password" on the first line, as the
// faucet's node client reads it, without quoting either.
func checkRPCCredentials(_ *faucetv1alpha1.FaucetServer, data []byte) ([]string, error) {
	if parseRPCCredentials(data).isZero() {
		return nil, errors.New(`want "user:password" on the first line (the format of Bitcoin Core's .cookie)`)
	}
	return nil, nil
}

// parseRPCCredentials reads "user:password" from the first line; the zero
// value when there is none.
func parseRPCCredentials(data []byte) rpcCredentials {
	line, _, _ := strings.Cut(string(data), "\n")
	u, p, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
	if !ok || u == "" {
		return rpcCredentials{}
	}
	return newRPCCredentials(u, p)
}

// checkNodeHeaders checks header lines as `faucet serve
// --node-headers-file` reads them; the errors name a line and a header,
// never a value.
func checkNodeHeaders(fs *faucetv1alpha1.FaucetServer, data []byte) ([]string, error) {
	if len(data) > rpcclient.MaxHeadersFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", rpcclient.MaxHeadersFileBytes)
	}
	h, err := rpcclient.ParseHeaders(string(data))
	if err != nil {
		return nil, err
	}
	// The node clients refuse two ways of signing in at once; say so here
	// rather than in a crash-looping pod.
	if h.Get("Authorization") != "" {
		for _, u := range fs.Spec.Node.NodeURLs() {
			if parsed, err := url.Parse(u); err == nil && parsed.User != nil {
				return nil, errors.New("an Authorization header, and a user in spec.node's URL: use one")
			}
		}
	}
	return nil, nil
}

// checkPostgresURI checks a store URI without quoting it (it holds a
// password).
func checkPostgresURI(_ *faucetv1alpha1.FaucetServer, data []byte) ([]string, error) {
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

// minSessionKey is the shortest session key the faucet accepts, and the
// shortest client secret it derives one from (server/options.SignIn).
const minSessionKey = 16

// checkClientSecret checks an OpenID Connect client secret as the faucet
// reads it (whitespace around it trimmed), without quoting it or telling
// its length. An empty one would fail the pod's start. Without a session
// key Secret the faucet derives the cookies' key from it, which takes 16
// bytes; a shorter one would have each pod make up a key of its own, so
// that sessions end at every restart and do not carry across replicas.
func checkClientSecret(fs *faucetv1alpha1.FaucetServer, data []byte) ([]string, error) {
	secret := strings.TrimSpace(string(data))
	switch {
	case secret == "":
		return nil, errors.New("the client secret is empty")
	case len(secret) < minSessionKey && fs.SessionKeySecretKey() == nil:
		return nil, fmt.Errorf("the client secret is shorter than %d bytes, too short to derive the sign-in session key from: "+
			"set spec.identity.sessionKeySecretRef to a Secret holding a key of %d bytes or more", minSessionKey, minSessionKey)
	}
	return nil, nil
}

// checkSessionKey checks the sign-in session key as the faucet reads it
// (whitespace around it trimmed), without quoting it.
func checkSessionKey(_ *faucetv1alpha1.FaucetServer, data []byte) ([]string, error) {
	if len(strings.TrimSpace(string(data))) < minSessionKey {
		return nil, fmt.Errorf("the session key is shorter than %d bytes (whitespace around it not counted); make one with: openssl rand -base64 32", minSessionKey)
	}
	return nil, nil
}
