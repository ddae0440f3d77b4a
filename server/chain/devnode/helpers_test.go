package devnode

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// harness is a node served over real HTTP plus the project's node client.
type harness struct {
	t   *testing.T
	n   *Node
	srv *httptest.Server
	c   *node.Client
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = 1 // deterministic fault draws unless a test says otherwise
	}
	n := New(cfg)
	srv := httptest.NewServer(n.Handler())
	t.Cleanup(srv.Close)
	c, err := node.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, n: n, srv: srv, c: c}
}

// wallet is a key with its testnet address.
type wallet struct {
	key  *stacks.PrivateKey
	addr stacks.Address
}

func newWallet(t testing.TB) wallet {
	t.Helper()
	k, err := stacks.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return wallet{key: k, addr: k.TestnetAddress()}
}

func (w wallet) principal() stacks.Principal { return stacks.Principal{Address: w.addr} }

// send builds a signed testnet transfer with stacks.NewTokenTransfer.
func (w wallet) send(t testing.TB, to stacks.Principal, amount, nonce, fee uint64, memo string) *stacks.Transaction {
	t.Helper()
	m, err := stacks.NewMemo(memo)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := stacks.NewTokenTransfer(stacks.TransferParams{Recipient: to, Amount: amount, Nonce: nonce, Fee: fee, Memo: m}, w.key)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// signed builds and signs an arbitrary transfer (for mainnet versions and
// odd chain ids that NewTokenTransfer does not produce).
func signed(t testing.TB, key *stacks.PrivateKey, version byte, chainID uint32, to stacks.Principal, amount, nonce, fee uint64) *stacks.Transaction {
	t.Helper()
	tx := &stacks.Transaction{
		Version:           version,
		ChainID:           chainID,
		Auth:              stacks.SpendingCondition{HashMode: stacks.HashModeP2PKH, Nonce: nonce, Fee: fee},
		AnchorMode:        stacks.AnchorModeAny,
		PostConditionMode: stacks.PostConditionModeDeny,
		Payload:           stacks.TokenTransfer{Recipient: to, Amount: amount},
	}
	if err := tx.Sign(key); err != nil {
		t.Fatal(err)
	}
	return tx
}

// highS returns tx with S replaced by n-S and the recovery id flipped: still
// a valid ECDSA signature for the same key, but malleable.
func highS(tx *stacks.Transaction) *stacks.Transaction {
	c := *tx
	var s secp256k1.ModNScalar
	s.SetByteSlice(c.Auth.Signature[33:65])
	s.Negate()
	b := s.Bytes()
	copy(c.Auth.Signature[33:], b[:])
	c.Auth.Signature[0] ^= 1
	return &c
}

type response struct {
	status      int
	contentType string
	body        string
}

func (h *harness) do(method, path, contentType string, body []byte) response {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: string(b)}
}

func (h *harness) get(path string) response { return h.do(http.MethodGet, path, "", nil) }

// post broadcasts tx as raw bytes, the node's octet-stream form.
func (h *harness) post(tx *stacks.Transaction) response {
	return h.do(http.MethodPost, "/v2/transactions", "application/octet-stream", tx.Serialize())
}

// mustAccept posts tx and fails unless the node answers 200 with its txid.
func (h *harness) mustAccept(tx *stacks.Transaction) stacks.TxID {
	h.t.Helper()
	r := h.post(tx)
	if want := `"` + tx.TxID().String() + `"`; r.status != http.StatusOK || r.body != want {
		h.t.Fatalf("post: got %d %s, want 200 %s", r.status, r.body, want)
	}
	return tx.TxID()
}

// fixture reads testdata/name.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compactFixture returns the fixture compacted, with each old→new
// replacement applied (txids and principals are placeholders there).
func compactFixture(t testing.TB, name string, replace ...string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, fixture(t, name)); err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(replace...).Replace(buf.String())
}

// keysOf returns the top-level keys of a JSON object in document order.
func keysOf(t testing.TB, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", b)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

const zeroTxID = "0000000000000000000000000000000000000000000000000000000000000000"

// checkNewPanics fails unless New(cfg) panics with a message holding want.
func checkNewPanics(t *testing.T, cfg Config, want string) {
	t.Helper()
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, want) {
			t.Errorf("panic %v, want one mentioning %q", r, want)
		}
	}()
	New(cfg)
}
