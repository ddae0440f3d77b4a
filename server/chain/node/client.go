package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

// Call names passed to the observer. They are stable and low-cardinality so
// they can be used directly as metric labels.
const (
	CallInfo        = "info"
	CallPoX         = "pox"
	CallAccount     = "account"
	CallBroadcast   = "broadcast"
	CallFeeTransfer = "fee_transfer"
	CallTransaction = "transaction"
	CallMempoolTx   = "mempool_tx"
)

const (
	// DefaultTimeout bounds each call unless rpcclient.WithTimeout says
	// otherwise.
	DefaultTimeout = 10 * time.Second
	// DefaultUserAgent is sent unless rpcclient.WithUserAgent overrides it.
	DefaultUserAgent = "faucet-operator-node-client/1"
	// MaxResponseBytes caps how much of a response body is read unless
	// rpcclient.WithMaxResponseBytes says otherwise. The largest body we
	// expect (/v2/pox) is a few KiB, so this only stops runaway peers.
	MaxResponseBytes = 4 << 20
	// MaxTxBytes is the node's MAX_PAYLOAD_LEN (1 + 16 MiB); larger posts are
	// refused by the node, so we refuse them before sending.
	MaxTxBytes = 1 + 16<<20
)

// Client talks to one Stacks node. It is safe for concurrent use.
type Client struct {
	rc *rpcclient.Client
}

// name is the first word of the client's errors.
const name = "node"

// New returns a client for the node at baseURL, e.g. "http://localhost:20443".
// The URL must be http or https with a host; a path prefix is kept (for
// reverse proxies) and a trailing slash is dropped. Userinfo, if present, is
// sent as HTTP basic auth and never appears in URL() or in errors. The
// options are rpcclient's; without them a call times out after
// DefaultTimeout and reads at most MaxResponseBytes.
func New(baseURL string, opts ...rpcclient.Option) (*Client, error) {
	rc, err := rpcclient.New(name, baseURL, rpcclient.Settings{
		HTTPClient:       &http.Client{Transport: sharedTransport},
		Timeout:          DefaultTimeout,
		UserAgent:        DefaultUserAgent,
		MaxResponseBytes: MaxResponseBytes,
	}, opts)
	if err != nil {
		return nil, err
	}
	return &Client{rc: rc}, nil
}

// sharedTransport keeps connections to the node open for a faucet under
// load: net/http's default keeps 2 idle per host, so with dozens of drips
// in flight every call past the second opened (and closed) a connection
// of its own, paying a handshake and leaving sockets in TIME_WAIT.
var sharedTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 128
	return t
}()

// URL returns the base URL without userinfo, safe to log.
func (c *Client) URL() string { return c.rc.URL() }

// Info fetches GET /v2/info.
func (c *Client) Info(ctx context.Context) (*Info, error) {
	return get[Info](ctx, c, CallInfo, "/v2/info")
}

// PoX fetches GET /v2/pox.
func (c *Client) PoX(ctx context.Context) (*PoXInfo, error) {
	return get[PoXInfo](ctx, c, CallPoX, "/v2/pox")
}

// Account fetches GET /v2/accounts/{principal}?proof=0. The node's default
// is to include Merkle proofs, which we never use, hence proof=0. An unknown
// account is not an error: the node answers with zero balance and nonce 0.
func (c *Client) Account(ctx context.Context, principal string) (*Account, error) {
	if principal == "" {
		return nil, errors.New("node account: empty principal")
	}
	return get[Account](ctx, c, CallAccount, "/v2/accounts/"+url.PathEscape(principal)+"?proof=0")
}

// Broadcast posts a consensus-serialised transaction to POST /v2/transactions
// and returns its txid as 64 lowercase hex characters without 0x.
//
// A nil error does not prove mempool admission: the node also answers 200
// for transactions it already has and for ones it drops as "problematic".
func (c *Client) Broadcast(ctx context.Context, rawTx []byte) (txid string, err error) {
	if len(rawTx) == 0 {
		return "", errors.New("node broadcast: empty transaction")
	}
	if len(rawTx) > MaxTxBytes {
		return "", fmt.Errorf("node broadcast: transaction is %d bytes, node limit is %d", len(rawTx), MaxTxBytes)
	}
	defer c.rc.Observe(CallBroadcast)(&err)
	resp, err := c.rc.Do(ctx, CallBroadcast, http.MethodPost, "/v2/transactions", rawTx, "application/octet-stream")
	if err != nil {
		return "", err
	}
	if resp.Status/100 != 2 {
		return "", statusError(CallBroadcast, resp)
	}
	txid, err = parseTxIDBody(resp.Body)
	if err != nil {
		return "", responseError(CallBroadcast, err)
	}
	return txid, nil
}

// TransferFeeRate fetches GET /v2/fees/transfer: a fee rate in µSTX per byte
// (not a total fee). The node's mempool also requires fee >= tx length.
func (c *Client) TransferFeeRate(ctx context.Context) (uint64, error) {
	rate, err := get[uint64](ctx, c, CallFeeTransfer, "/v2/fees/transfer")
	if err != nil {
		return 0, err
	}
	return *rate, nil
}

// get fetches path, which must answer 2xx, and decodes its JSON into a new
// T; the observer sees it as call.
func get[T any](ctx context.Context, c *Client, call, path string) (_ *T, err error) {
	defer c.rc.Observe(call)(&err)
	resp, err := c.rc.Do(ctx, call, http.MethodGet, path, nil, "")
	if err != nil {
		return nil, err
	}
	if resp.Status/100 != 2 {
		return nil, statusError(call, resp)
	}
	v := new(T)
	if err := json.Unmarshal(resp.Body, v); err != nil {
		return nil, responseError(call, err)
	}
	return v, nil
}

// parseTxIDBody accepts the node's bare JSON string and, leniently, an
// unquoted or 0x-prefixed txid.
func parseTxIDBody(body []byte) (string, error) {
	s := strings.TrimSpace(string(body))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal([]byte(s), &s); err != nil {
			return "", fmt.Errorf("decoding txid: %w", err)
		}
	}
	id, err := NormalizeTxID(s)
	if err != nil {
		return "", fmt.Errorf("unexpected success body %q: %w", excerpt([]byte(s)), err)
	}
	return id, nil
}

// NormalizeTxID trims spaces and an optional 0x prefix, lower-cases, and
// checks that s is exactly 32 bytes of hex.
func NormalizeTxID(s string) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		s = s[2:]
	}
	if len(s) != 64 {
		return "", fmt.Errorf("txid must be 64 hex characters, got %d", len(s))
	}
	if !isHex(s) {
		return "", errors.New("txid is not hex")
	}
	return strings.ToLower(s), nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
