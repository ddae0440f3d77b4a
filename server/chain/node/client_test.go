package node

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/rpcclient"
)

const (
	testPrincipal = "ST2ZRX0K27GW0SP3GJCEMHD95TQGJMKB7G9Y0X1MH"
	successTxID   = "0288d0bde0b0f88fad0827e35b757efec3a0cf7886c1614bfc4f81c40030a14a"
)

// newTestClient starts a server running h and returns a client for it.
func newTestClient(t *testing.T, h http.HandlerFunc, opts ...rpcclient.Option) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// respond serves a fixed status, content type and body.
func respond(status int, contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestNew(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "http://localhost:20443", want: "http://localhost:20443"},
		{in: "https://api.testnet.hiro.so/", want: "https://api.testnet.hiro.so"},
		{in: "http://proxy.local/stacks-node//", want: "http://proxy.local/stacks-node"},
		{in: "  http://127.0.0.1:20443\n", want: "http://127.0.0.1:20443"},
		{in: "HTTP://node:20443", want: "http://node:20443"},
		{in: "http://alice:s3cret@node:20443/", want: "http://node:20443"},
		{in: "http://[::1]:20443", want: "http://[::1]:20443"},
		{in: "", wantErr: true},
		{in: "localhost:20443", wantErr: true},
		{in: "ftp://node", wantErr: true},
		{in: "http://", wantErr: true},
		{in: "http:///v2", wantErr: true},
		{in: "http://:20443", wantErr: true},
		{in: "http://node/?proof=1", wantErr: true},
		{in: "http://node/?", wantErr: true},
		{in: "http://node/#x", wantErr: true},
		{in: "http://alice:s3cret@node:port", wantErr: true},
		{in: "http://alice:s3cret@node/%zz", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			c, err := New(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("New(%q) = %q, want error", tc.in, c.URL())
				}
				if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
					t.Fatalf("error leaks userinfo: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.URL() != tc.want {
				t.Fatalf("URL() = %q, want %q", c.URL(), tc.want)
			}
		})
	}
}

func TestInfoFixtures(t *testing.T) {
	u64 := func(v uint64) *uint64 { return &v }
	boolp := func(v bool) *bool { return &v }
	tests := []struct {
		file          string
		networkID     uint32
		parentID      uint32
		tipHeight     uint64
		tenureHeight  *uint64
		fullySynced   *bool
		hasUnanchored bool
	}{
		{"v2-info-mainnet-nakamoto.json", ChainIDMainnet, 3652501241, 556946, u64(184037), boolp(true), false},
		{"v2-info-testnet.json", ChainIDTestnet, 118034699, 509, nil, nil, true},
		{"v2-info-testnet-stackscore-doc-2025.json", ChainIDTestnet, 3669344250, 15, u64(523), boolp(false), true},
		{"v2-info-stackscore-openapi-example.json", ChainIDMainnet, 3652501241, 1832097, u64(523), boolp(false), true},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			body := fixture(t, tc.file)
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v2/info" || r.URL.RawQuery != "" {
					t.Errorf("unexpected request %s %s", r.Method, r.URL)
				}
				if got := r.Header.Get("Accept"); got != "application/json" {
					t.Errorf("Accept = %q", got)
				}
				respond(200, "application/json", body)(w, r)
			})
			info, err := c.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.NetworkID != tc.networkID || info.ParentNetworkID != tc.parentID || info.StacksTipHeight != tc.tipHeight {
				t.Errorf("ids/height = %d/%d/%d", info.NetworkID, info.ParentNetworkID, info.StacksTipHeight)
			}
			if (info.TenureHeight == nil) != (tc.tenureHeight == nil) ||
				(tc.tenureHeight != nil && *info.TenureHeight != *tc.tenureHeight) {
				t.Errorf("TenureHeight = %v, want %v", info.TenureHeight, tc.tenureHeight)
			}
			if (info.IsFullySynced == nil) != (tc.fullySynced == nil) ||
				(tc.fullySynced != nil && *info.IsFullySynced != *tc.fullySynced) {
				t.Errorf("IsFullySynced = %v, want %v", info.IsFullySynced, tc.fullySynced)
			}
			if (info.UnanchoredTip != nil) != tc.hasUnanchored {
				t.Errorf("UnanchoredTip = %v", info.UnanchoredTip)
			}
			if info.ExitAtBlockHeight != nil {
				t.Errorf("ExitAtBlockHeight = %d, want nil", *info.ExitAtBlockHeight)
			}
			if _, err := info.IndexBlockHash(); err != nil {
				t.Errorf("IndexBlockHash: %v", err)
			}
		})
	}
}

func TestInfoIndexBlockHashViaClient(t *testing.T) {
	c := newTestClient(t, respond(200, "application/json", fixture(t, "v2-info-mainnet-nakamoto.json")))
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got, err := info.IndexBlockHash()
	if err != nil || got != goldenIndexBlockHash {
		t.Fatalf("IndexBlockHash = %s, %v; want %s", got, err, goldenIndexBlockHash)
	}
	if info.UnanchoredTip != nil || info.UnanchoredSeq != nil {
		t.Errorf("Nakamoto info must have null unanchored fields")
	}
	if info.StackerDBs == nil || len(info.StackerDBs) != 0 {
		t.Errorf("StackerDBs = %#v, want empty non-nil", info.StackerDBs)
	}
}

func TestPoXFixtures(t *testing.T) {
	tests := []struct {
		file             string
		contractID       string
		rejectionNull    bool
		epochs           int
		contractVersions int
		currentEpoch     string
		minAmount        uint64
	}{
		{"v2-pox-regtest-pox4.json", "ST000000000000000000002AMW42H.pox-4", true, 9, 4, "", 833390000000000},
		{"v2-pox-mainnet-pox2.json", "SP000000000000000000002Q6VF78.pox-2", false, 0, 2, "", 90000000000},
		{"v2-pox-stackscore-openapi-example.json", "SP000000000000000000002Q6VF78.pox", false, 2, 2, "Epoch30", 70000000000},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			body := fixture(t, tc.file)
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v2/pox" {
					t.Errorf("unexpected request %s %s", r.Method, r.URL)
				}
				respond(200, "application/json", body)(w, r)
			})
			p, err := c.PoX(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if p.ContractID != tc.contractID {
				t.Errorf("ContractID = %q", p.ContractID)
			}
			if (p.RejectionFraction == nil) != tc.rejectionNull || (p.NextCycle.UstxUntilPoxRejection == nil) != tc.rejectionNull ||
				(p.RejectionVotesLeftRequired == nil) != tc.rejectionNull {
				t.Errorf("null rejection fields mismatch: %v %v %v", p.RejectionFraction, p.NextCycle.UstxUntilPoxRejection, p.RejectionVotesLeftRequired)
			}
			if len(p.Epochs) != tc.epochs || len(p.ContractVersions) != tc.contractVersions {
				t.Errorf("epochs/contract_versions = %d/%d", len(p.Epochs), len(p.ContractVersions))
			}
			if p.CurrentEpoch != tc.currentEpoch {
				t.Errorf("CurrentEpoch = %q", p.CurrentEpoch)
			}
			if p.MinAmountUstx != tc.minAmount || p.NextCycle.MinThresholdUstx != tc.minAmount {
				t.Errorf("MinAmountUstx = %d, next_cycle.min_threshold_ustx = %d", p.MinAmountUstx, p.NextCycle.MinThresholdUstx)
			}
			if p.NextCycle.ID != p.CurrentCycle.ID+1 {
				t.Errorf("cycle ids %d -> %d", p.CurrentCycle.ID, p.NextCycle.ID)
			}
		})
	}
}

func TestAccountFixtures(t *testing.T) {
	tests := []struct {
		file string
		want Account
	}{
		{"v2-accounts.json", Account{Balance: 0x1cdd78bdeadfe8, Locked: 0x6a979b1d61c00, UnlockHeight: 435, Nonce: 4}},
		{"v2-accounts-empty.json", Account{}},
		{"v2-accounts-with-proof.json", Account{Balance: 500000, Locked: 500000, UnlockHeight: 126, Nonce: 2867}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			body := fixture(t, tc.file)
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v2/accounts/"+testPrincipal || r.URL.RawQuery != "proof=0" {
					t.Errorf("unexpected request %s %s", r.Method, r.URL)
				}
				respond(200, "application/json", body)(w, r)
			})
			got, err := c.Account(context.Background(), testPrincipal)
			if err != nil {
				t.Fatal(err)
			}
			if *got != tc.want {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestAccountPathEscaping(t *testing.T) {
	tests := []struct {
		principal string
		wantURI   string
	}{
		{testPrincipal, "/v2/accounts/" + testPrincipal + "?proof=0"},
		{"ST000000000000000000002AMW42H.pox-4", "/v2/accounts/ST000000000000000000002AMW42H.pox-4?proof=0"},
		{"ST1/../../v2/info", "/v2/accounts/ST1%2F..%2F..%2Fv2%2Finfo?proof=0"},
		{"a b?proof=1#x", "/v2/accounts/a%20b%3Fproof=1%23x?proof=0"},
	}
	for _, tc := range tests {
		t.Run(tc.principal, func(t *testing.T) {
			body := fixture(t, "v2-accounts-empty.json")
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				if r.RequestURI != tc.wantURI {
					t.Errorf("RequestURI = %q, want %q", r.RequestURI, tc.wantURI)
				}
				respond(200, "application/json", body)(w, r)
			})
			if _, err := c.Account(context.Background(), tc.principal); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("empty principal", func(t *testing.T) {
		c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
			t.Error("no request expected")
		})
		if _, err := c.Account(context.Background(), ""); err == nil {
			t.Fatal("want error")
		}
	})
}

func TestTransferFeeRate(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    uint64
		wantErr bool
	}{
		{name: "fixture", body: string(fixture(t, "v2-fees-transfer.json")), want: 1},
		{name: "whitespace", body: " \n3\r\n ", want: 3},
		{name: "max", body: "18446744073709551615", want: math.MaxUint64},
		{name: "float", body: "1.5", wantErr: true},
		{name: "negative", body: "-1", wantErr: true},
		{name: "string", body: `"3"`, wantErr: true},
		{name: "object", body: `{"fee":3}`, wantErr: true},
		{name: "empty", body: "", wantErr: true},
		{name: "overflow", body: "18446744073709551616", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v2/fees/transfer" {
					t.Errorf("unexpected request %s %s", r.Method, r.URL)
				}
				respond(200, "application/json", []byte(tc.body))(w, r)
			})
			got, err := c.TransferFeeRate(context.Background())
			if tc.wantErr {
				var re *ResponseError
				if !errors.As(err, &re) {
					t.Fatalf("err = %v, want *ResponseError", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestBroadcastRequest(t *testing.T) {
	raw := make([]byte, 300)
	for i := range raw {
		raw[i] = byte(i)
	}
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v2/transactions" || r.URL.RawQuery != "" {
			t.Errorf("unexpected request %s %s", r.Method, r.URL)
		}
		if got := r.Header.Get("Content-Type"); got != "application/octet-stream" {
			t.Errorf("Content-Type = %q, want exactly application/octet-stream", got)
		}
		if got := r.Header.Get("User-Agent"); got != "faucet-test/2" {
			t.Errorf("User-Agent = %q", got)
		}
		if r.ContentLength != int64(len(raw)) {
			t.Errorf("ContentLength = %d", r.ContentLength)
		}
		body, _ := io.ReadAll(r.Body)
		if string(body) != string(raw) {
			t.Errorf("body differs: got %d bytes", len(body))
		}
		respond(200, "application/json", fixture(t, "v2-transactions-success.json"))(w, r)
	}, rpcclient.WithUserAgent("faucet-test/2"))
	txid, err := c.Broadcast(context.Background(), raw)
	if err != nil || txid != successTxID {
		t.Fatalf("Broadcast = %q, %v", txid, err)
	}
}

func TestBroadcastSuccessBodies(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr bool
	}{
		{name: "fixture", body: string(fixture(t, "v2-transactions-success.json"))},
		{name: "0x prefix", body: `"0x` + successTxID + `"`},
		{name: "upper case", body: `"` + strings.ToUpper(successTxID) + `"`},
		{name: "whitespace", body: " \"" + successTxID + "\"\n"},
		{name: "unquoted", body: successTxID},
		{name: "short", body: `"abc"`, wantErr: true},
		{name: "not hex", body: `"` + strings.Repeat("z", 64) + `"`, wantErr: true},
		{name: "object", body: `{"txid":"` + successTxID + `"}`, wantErr: true},
		{name: "empty", body: ``, wantErr: true},
		{name: "bad json string", body: `"` + successTxID, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, respond(200, "application/json", []byte(tc.body)))
			txid, err := c.Broadcast(context.Background(), []byte{0x80})
			if tc.wantErr {
				var re *ResponseError
				if !errors.As(err, &re) || !IsUnavailable(err) {
					t.Fatalf("err = %v, want *ResponseError", err)
				}
				return
			}
			if err != nil || txid != successTxID {
				t.Fatalf("Broadcast = %q, %v", txid, err)
			}
		})
	}
}

func TestBroadcastValidation(t *testing.T) {
	var hits int
	var observed int
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) { hits++ },
		rpcclient.WithObserver(func(string, time.Duration, error) { observed++ }))
	for _, raw := range [][]byte{nil, {}, make([]byte, MaxTxBytes+1)} {
		if _, err := c.Broadcast(context.Background(), raw); err == nil {
			t.Errorf("len %d: want error", len(raw))
		}
	}
	if hits != 0 || observed != 0 {
		t.Fatalf("hits=%d observed=%d, want no requests", hits, observed)
	}
}

func TestBroadcastRejections(t *testing.T) {
	const zeroTxID = "0000000000000000000000000000000000000000000000000000000000000000"
	tests := []struct {
		file     string
		reason   string
		txid     string
		hasData  bool
		check    func(t *testing.T, e *RejectionError)
		errorMsg string
	}{
		{
			file: "v2-transactions-error-badnonce.json", reason: ReasonBadNonce,
			txid: "caf6fd60ae05b0c2d19ef14ab6a7670b1095d117fa7c80224c74e76214d0a791", hasData: true,
			check: func(t *testing.T, e *RejectionError) {
				n, err := e.Nonce()
				if err != nil {
					t.Fatal(err)
				}
				want := NonceRejection{Expected: 0, Actual: 4, Principal: testPrincipal, IsOrigin: true}
				if *n != want {
					t.Errorf("Nonce() = %+v", *n)
				}
			},
			errorMsg: `node rejected transaction caf6fd60ae05b0c2d19ef14ab6a7670b1095d117fa7c80224c74e76214d0a791: BadNonce {"actual":4,"expected":0,"is_origin":true,"principal":"ST2ZRX0K27GW0SP3GJCEMHD95TQGJMKB7G9Y0X1MH"}`,
		},
		{
			file: "v2-transactions-error-badnonce-rpc-endpoints-md.json", reason: ReasonBadNonce,
			txid: "4068179cb9169b969c80518d83890f8b808a70ab998dd227149221be9480a616", hasData: true,
			check: func(t *testing.T, e *RejectionError) {
				n, err := e.Nonce()
				if err != nil || n.Actual != 3 || n.Expected != 0 || n.Principal != "ST2MVNFYF6H9DCMAV3HVNHTJVVE3CFWT1JYMH1EZB" {
					t.Errorf("Nonce() = %+v, %v", n, err)
				}
			},
		},
		{
			file: "v2-transactions-error-toomuchchaining.derived.json", reason: ReasonTooMuchChaining,
			txid: zeroTxID, hasData: true,
			check: func(t *testing.T, e *RejectionError) {
				n, err := e.Nonce()
				if err != nil || n.Expected != 26 || n.Actual != 30 || !n.IsOrigin {
					t.Errorf("Nonce() = %+v, %v", n, err)
				}
				if n.Expected != MaxMempoolTxChaining+1 { // account nonce 0
					t.Errorf("expected max nonce %d", n.Expected)
				}
				if e.DataMessage() != "Nonce would exceed chaining limit in mempool" {
					t.Errorf("DataMessage() = %q", e.DataMessage())
				}
			},
		},
		{
			file: "v2-transactions-error-feetoolow.derived.json", reason: ReasonFeeTooLow,
			txid: zeroTxID, hasData: true,
			check: func(t *testing.T, e *RejectionError) {
				f, err := e.Fee()
				if err != nil || *f != (FeeRejection{Expected: 180, Actual: 1}) {
					t.Errorf("Fee() = %+v, %v", f, err)
				}
				if _, err := e.Nonce(); err == nil {
					t.Error("Nonce() on FeeTooLow must fail")
				}
			},
		},
		{
			file: "v2-transactions-error-notenoughfunds.derived.json", reason: ReasonNotEnoughFunds,
			txid: zeroTxID, hasData: true,
			check: func(t *testing.T, e *RejectionError) {
				f, err := e.Funds()
				if err != nil || *f != (FundsRejection{Expected: 2456, Actual: 990}) {
					t.Errorf("Funds() = %+v, %v", f, err)
				}
			},
		},
		{
			file: "v2-transactions-error-conflictingnonce.derived.json", reason: ReasonConflictingNonceInMempool,
			txid: zeroTxID, hasData: false,
			check: func(t *testing.T, e *RejectionError) {
				if e.DataMessage() != "" {
					t.Errorf("DataMessage() = %q", e.DataMessage())
				}
			},
			errorMsg: "node rejected transaction " + zeroTxID + ": ConflictingNonceInMempool",
		},
		{
			file: "v2-transactions-error-recipient-is-sender.derived.json", reason: ReasonTransferRecipientCannotEqualSender,
			txid: zeroTxID, hasData: true,
			check: func(t *testing.T, e *RejectionError) {
				var d struct{ Recipient string }
				if err := json.Unmarshal(e.ReasonData, &d); err != nil || d.Recipient != testPrincipal {
					t.Errorf("recipient = %q, %v", d.Recipient, err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			c := newTestClient(t, respond(400, "application/json", fixture(t, tc.file)))
			_, err := c.Broadcast(context.Background(), []byte{0x80, 0x00})
			var rej *RejectionError
			if !errors.As(err, &rej) {
				t.Fatalf("err = %v (%T), want *RejectionError", err, err)
			}
			if rej.Reason != tc.reason || rej.TxID != tc.txid || rej.Message != "transaction rejected" {
				t.Errorf("got reason=%q txid=%q message=%q", rej.Reason, rej.TxID, rej.Message)
			}
			if (rej.ReasonData != nil) != tc.hasData {
				t.Errorf("ReasonData = %s", rej.ReasonData)
			}
			if IsUnavailable(err) || rej.IsServerFailure() {
				t.Error("a rejection is not unavailability")
			}
			if tc.errorMsg != "" && err.Error() != tc.errorMsg {
				t.Errorf("Error() = %s\nwant      %s", err.Error(), tc.errorMsg)
			}
			tc.check(t, rej)
		})
	}
}

func TestBroadcastRejectionEdgeCases(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		check func(t *testing.T, e *RejectionError)
	}{
		{
			name: "null reason_data and no txid",
			body: `{"error":"transaction rejected","reason":"TemporarilyBlacklisted","reason_data":null}`,
			check: func(t *testing.T, e *RejectionError) {
				if e.ReasonData != nil || e.TxID != "" || e.Error() != "node rejected transaction: TemporarilyBlacklisted" {
					t.Errorf("got %#v / %s", e, e)
				}
			},
		},
		{
			name: "server failure with long message",
			body: `{"error":"transaction rejected","reason":"ServerFailureOther","reason_data":{"message":"` + strings.Repeat("m", 5000) + `"},"txid":"0x` + strings.Repeat("AB", 32) + `"}`,
			check: func(t *testing.T, e *RejectionError) {
				if !e.IsServerFailure() || e.TxID != strings.Repeat("ab", 32) {
					t.Errorf("got %+v", e)
				}
				if n := len(e.Error()); n > 400 {
					t.Errorf("Error() is %d bytes, want a bounded excerpt", n)
				}
			},
		},
		{
			name: "funds overflow u64",
			body: `{"error":"transaction rejected","reason":"NotEnoughFunds","reason_data":{"actual":"0x000000000000000000000000000003de","expected":"0x00000000000000020000000000000000"},"txid":""}`,
			check: func(t *testing.T, e *RejectionError) {
				if _, err := e.Funds(); !errors.Is(err, ErrU128Overflow) {
					t.Errorf("Funds() err = %v", err)
				}
			},
		},
		{
			name: "missing reason_data for BadNonce",
			body: `{"error":"transaction rejected","reason":"BadNonce","txid":""}`,
			check: func(t *testing.T, e *RejectionError) {
				if _, err := e.Nonce(); err == nil {
					t.Error("want error")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// text/plain on purpose: classification must not depend on it.
			c := newTestClient(t, respond(400, "text/plain", []byte(tc.body)))
			_, err := c.Broadcast(context.Background(), []byte{1})
			var rej *RejectionError
			if !errors.As(err, &rej) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			tc.check(t, rej)
		})
	}
}

func TestDecodeError(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
	}{
		{"text/plain", "text/plain", "Failed to decode: Failed to parse tx"},
		{"with charset", "text/plain; charset=utf-8", "Failed to decode: Failed to deserialize posted transaction: x"},
		{"no content type", "", "Failed to decode: Failed to parse body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, respond(400, tc.contentType, []byte(tc.body)))
			_, err := c.Broadcast(context.Background(), []byte{0xff})
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v (%T), want *DecodeError", err, err)
			}
			if de.Message != tc.body || de.Call != CallBroadcast || IsUnavailable(err) {
				t.Errorf("got %+v", de)
			}
		})
	}
}

func TestHTTPErrors(t *testing.T) {
	long := strings.Repeat("<html>", 2000)
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		header      map[string]string
		call        func(*Client) error
		unavailable bool
		check       func(t *testing.T, he *HTTPError)
	}{
		{name: "500", status: 500, body: "internal", unavailable: true},
		{name: "502 long html", status: 502, contentType: "text/html", body: long, unavailable: true,
			check: func(t *testing.T, he *HTTPError) {
				if len(he.Body) > maxErrorExcerpt+len("…") || len(he.Error()) > 300 {
					t.Errorf("body not truncated: %d bytes", len(he.Body))
				}
			}},
		{name: "503 retry-after", status: 503, header: map[string]string{"Retry-After": "7"}, unavailable: true,
			check: func(t *testing.T, he *HTTPError) {
				if he.RetryAfter != 7*time.Second {
					t.Errorf("RetryAfter = %v", he.RetryAfter)
				}
			}},
		{name: "429", status: 429, body: "slow down", unavailable: true},
		{name: "404", status: 404, body: "not found", unavailable: false},
		{name: "401", status: 401, unavailable: false},
		{name: "400 json string on broadcast", status: 400, contentType: "application/json",
			body: `"Fee estimation not supported on this node"`, unavailable: false,
			call: func(c *Client) error { _, err := c.Broadcast(context.Background(), []byte{1}); return err }},
		{name: "400 rejection shape on GET is not a rejection", status: 400, contentType: "application/json",
			body: `{"error":"x","reason":"BadNonce"}`, unavailable: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				respond(tc.status, tc.contentType, []byte(tc.body))(w, r)
			})
			call := tc.call
			if call == nil {
				call = func(c *Client) error { _, err := c.Info(context.Background()); return err }
			}
			err := call(c)
			var he *HTTPError
			if !errors.As(err, &he) {
				t.Fatalf("err = %v (%T), want *HTTPError", err, err)
			}
			if he.StatusCode != tc.status || IsUnavailable(err) != tc.unavailable {
				t.Errorf("status=%d unavailable=%v", he.StatusCode, IsUnavailable(err))
			}
			if !strings.Contains(err.Error(), http.StatusText(tc.status)) {
				t.Errorf("Error() = %q", err)
			}
			if tc.check != nil {
				tc.check(t, he)
			}
		})
	}

	t.Run("400 text on account is a decode error", func(t *testing.T) {
		c := newTestClient(t, respond(400, "text/plain", []byte("Failed to decode: bad principal")))
		_, err := c.Account(context.Background(), "nope")
		var de *DecodeError
		if !errors.As(err, &de) || de.Call != CallAccount {
			t.Fatalf("err = %v (%T)", err, err)
		}
	})
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{
			name: "no response headers",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
		},
		{
			name: "body stalls",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				_, _ = w.Write([]byte(`{"peer_version":`))
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClient(t, tc.handler, rpcclient.WithTimeout(100*time.Millisecond))
			start := time.Now()
			_, err := c.Info(context.Background())
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Fatalf("took %v, timeout not applied", elapsed)
			}
			var te *TransportError
			if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v (%T), want TransportError wrapping DeadlineExceeded", err, err)
			}
			if !IsUnavailable(err) {
				t.Error("timeout must be unavailable")
			}
			if !strings.HasPrefix(err.Error(), "node info: ") {
				t.Errorf("Error() = %q", err)
			}
		})
	}
}

func TestConnectionRefusedDoesNotLeakUserinfo(t *testing.T) {
	addr := closedAddr(t)
	c, err := New("http://alice:s3cret@" + addr)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(c.URL(), "alice") {
		t.Fatalf("URL() leaks userinfo: %s", c.URL())
	}
	calls := map[string]func() error{
		CallInfo:        func() error { _, err := c.Info(context.Background()); return err },
		CallPoX:         func() error { _, err := c.PoX(context.Background()); return err },
		CallAccount:     func() error { _, err := c.Account(context.Background(), testPrincipal); return err },
		CallBroadcast:   func() error { _, err := c.Broadcast(context.Background(), []byte{1}); return err },
		CallFeeTransfer: func() error { _, err := c.TransferFeeRate(context.Background()); return err },
		CallTransaction: func() error { _, err := c.Transaction(context.Background(), successTxID); return err },
		CallMempoolTx:   func() error { _, err := c.MempoolTx(context.Background(), successTxID); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			var te *TransportError
			if !errors.As(err, &te) || te.Call != name || !IsUnavailable(err) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "alice") || strings.Contains(msg, "s3cret") {
				t.Fatalf("error leaks userinfo: %s", msg)
			}
			if !strings.Contains(msg, addr) {
				t.Errorf("error lacks the address for context: %s", msg)
			}
		})
	}
}

func TestUserinfoIsBasicAuth(t *testing.T) {
	srv := httptest.NewServer(func() http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "s3cret" {
				t.Errorf("basic auth = %q %q %v", u, p, ok)
			}
			respond(401, "text/plain", []byte("denied"))(w, r)
		}
	}())
	defer srv.Close()
	c, err := New(strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Info(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != 401 {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
		t.Fatalf("error leaks userinfo: %v", err)
	}
}

func TestRedirectUserinfoScrubbed(t *testing.T) {
	target := "http://bob:hunter2@" + closedAddr(t) + "/v2/info"
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	})
	_, err := c.Info(context.Background())
	if err == nil || !IsUnavailable(err) {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "bob") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error leaks redirect userinfo: %v", err)
	}
}

func TestCanceledIsNotUnavailable(t *testing.T) {
	c := newTestClient(t, respond(200, "application/json", []byte("1")))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.TransferFeeRate(ctx)
	if !errors.Is(err, context.Canceled) || IsUnavailable(err) {
		t.Fatalf("err = %v, unavailable = %v", err, IsUnavailable(err))
	}
}

func TestUnknownFieldsTolerated(t *testing.T) {
	info := `{"peer_version":1,"network_id":2147483648,"stacks_tip_height":7,"affirmations":{"heaviest":"pppp"},"burn_consensus":"x","future":[1,{"a":null}]}`
	pox := `{"contract_id":"ST000000000000000000002AMW42H.pox-5","current_cycle":{"id":3,"new":true},"next_cycle":{"id":4,"blocks_until_prepare_phase":-5},"pox_6_thing":{}}`
	acct := `{"balance":"0x00000000000000000000000000000010","locked":"0x00000000000000000000000000000000","unlock_height":0,"nonce":9,"balance_proof":"0xab","nonce_proof":"","extra":1}`
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/info":
			respond(200, "application/json", []byte(info))(w, r)
		case r.URL.Path == "/v2/pox":
			respond(200, "application/json", []byte(pox))(w, r)
		default:
			respond(200, "application/json", []byte(acct))(w, r)
		}
	})
	ctx := context.Background()
	i, err := c.Info(ctx)
	if err != nil || i.NetworkID != ChainIDTestnet || i.StacksTipHeight != 7 {
		t.Fatalf("Info = %+v, %v", i, err)
	}
	p, err := c.PoX(ctx)
	if err != nil || p.NextCycle.BlocksUntilPreparePhase != -5 || p.CurrentCycle.ID != 3 {
		t.Fatalf("PoX = %+v, %v", p, err)
	}
	a, err := c.Account(ctx, testPrincipal)
	if err != nil || a.Balance != 16 || a.Nonce != 9 {
		t.Fatalf("Account = %+v, %v", a, err)
	}
}

func TestResponseBodyLimit(t *testing.T) {
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_, _ = w.Write([]byte(strings.Repeat(" ", MaxResponseBytes) + "1"))
	})
	_, err := c.TransferFeeRate(context.Background())
	var re *ResponseError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err = %v", err)
	}
}

func TestObserver(t *testing.T) {
	type obs struct {
		call string
		err  error
	}
	var (
		mu  sync.Mutex
		got []obs
	)
	c := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/info":
			respond(200, "application/json", fixture(t, "v2-info-testnet.json"))(w, r)
		case r.URL.Path == "/v2/pox":
			respond(200, "application/json", fixture(t, "v2-pox-regtest-pox4.json"))(w, r)
		case strings.HasPrefix(r.URL.Path, "/v2/accounts/"):
			respond(200, "application/json", fixture(t, "v2-accounts.json"))(w, r)
		case r.URL.Path == "/v2/transactions":
			respond(400, "application/json", fixture(t, "v2-transactions-error-badnonce.json"))(w, r)
		default:
			respond(500, "text/plain", []byte("boom"))(w, r)
		}
	}, rpcclient.WithObserver(func(call string, d time.Duration, err error) {
		if d < 0 {
			t.Errorf("negative duration for %s", call)
		}
		mu.Lock()
		got = append(got, obs{call, err})
		mu.Unlock()
	}))

	ctx := context.Background()
	_, errInfo := c.Info(ctx)
	_, errPoX := c.PoX(ctx)
	_, errAcct := c.Account(ctx, testPrincipal)
	_, _ = c.Account(ctx, "") // invalid input: no RPC, no observation
	_, errTx := c.Broadcast(ctx, []byte{1})
	_, errFee := c.TransferFeeRate(ctx)

	want := []obs{
		{"info", errInfo}, {"pox", errPoX}, {"account", errAcct},
		{"broadcast", errTx}, {"fee_transfer", errFee},
	}
	if len(got) != len(want) {
		t.Fatalf("observed %d calls, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].call != want[i].call || got[i].err != want[i].err { //nolint:errorlint // the observer must get the very error value
			t.Errorf("observation %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if errInfo != nil || errPoX != nil || errAcct != nil || errTx == nil || errFee == nil {
		t.Errorf("unexpected results: %v %v %v %v %v", errInfo, errPoX, errAcct, errTx, errFee)
	}
}

func TestIsUnavailable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("x"), false},
		{"500", &HTTPError{StatusCode: 500}, true},
		{"wrapped 503", wrap(&HTTPError{StatusCode: 503}), true},
		{"429", &HTTPError{StatusCode: 429}, true},
		{"404", &HTTPError{StatusCode: 404}, false},
		{"400", &HTTPError{StatusCode: 400}, false},
		{"rejection", &RejectionError{Reason: ReasonServerFailureNoSuchChainTip}, false},
		{"decode", &DecodeError{}, false},
		{"transport", &TransportError{Err: errors.New("connection reset")}, true},
		{"transport deadline", &TransportError{Err: context.DeadlineExceeded}, true},
		{"transport canceled", &TransportError{Err: context.Canceled}, false},
		{"bare deadline", wrap(context.DeadlineExceeded), true},
		{"response", &ResponseError{Err: errors.New("bad json")}, true},
		{"tx not found", sentinel(ErrTxNotFound, &HTTPError{StatusCode: 404}), false},
		{"txindex disabled", wrap(sentinel(ErrTxIndexDisabled, &HTTPError{StatusCode: 501})), false},
		{"other 501", &HTTPError{StatusCode: 501}, true},
	}
	for _, tc := range tests {
		if got := IsUnavailable(tc.err); got != tc.want {
			t.Errorf("%s: IsUnavailable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func wrap(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "outer: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }
