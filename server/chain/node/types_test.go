package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const goldenIndexBlockHash = "a246be7256de49aa6923074a53507a839b2ba356f8809f8e7448c87b5c1891e9"

func TestIndexBlockHash(t *testing.T) {
	var info Info
	if err := json.Unmarshal(fixture(t, "v2-info-mainnet-nakamoto.json"), &info); err != nil {
		t.Fatal(err)
	}
	got, err := info.IndexBlockHash()
	if err != nil {
		t.Fatal(err)
	}
	if got != goldenIndexBlockHash {
		t.Fatalf("IndexBlockHash = %s, want %s", got, goldenIndexBlockHash)
	}

	bh := info.StacksTip
	ch := info.StacksTipConsensusHash
	bad := []struct {
		name      string
		blockHash string
		consensus string
	}{
		{"empty", "", ""},
		{"short block hash", bh[:62], ch},
		{"long block hash", bh + "00", ch},
		{"non-hex block hash", "zz" + bh[2:], ch},
		{"0x prefix", "0x" + bh, ch},
		{"short consensus hash", bh, ch[:38]},
		{"odd-length consensus hash", bh, ch + "0"},
		{"swapped", ch, bh},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := ComputeIndexBlockHash(tc.blockHash, tc.consensus); err == nil {
				t.Fatalf("want error, got %s", got)
			}
		})
	}
}

func TestParseU128(t *testing.T) {
	tests := []struct {
		in       string
		want     uint64
		wantErr  bool
		overflow bool
	}{
		{in: "0x00000000000000000000000000000000", want: 0},
		{in: "0x0000000000000000001cdd78bdeadfe8", want: 0x1cdd78bdeadfe8},
		{in: "0x0000000000000000ffffffffffffffff", want: math.MaxUint64},
		{in: "0x0000000000000000FFFFFFFFFFFFFFFF", want: math.MaxUint64},
		{in: "0x3de", want: 990},
		{in: "0x00000000000000010000000000000000", wantErr: true, overflow: true},
		{in: "0xffffffffffffffffffffffffffffffff", wantErr: true, overflow: true},
		{in: "0x000000000000000000000000000000000", wantErr: true}, // 33 digits
		{in: "0x0000000000000000000000000000000g", wantErr: true},
		{in: "0x-1", wantErr: true},
		{in: "0x", wantErr: true},
		{in: "", wantErr: true},
		{in: "00000000000000000000000000000001", wantErr: true}, // missing 0x
		{in: "0X00000000000000000000000000000001", wantErr: true},
		{in: " 0x01", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseU128(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseU128(%q) = %d, %v; wantErr %v", tc.in, got, err, tc.wantErr)
			}
			if errors.Is(err, ErrU128Overflow) != tc.overflow {
				t.Fatalf("overflow mismatch: %v", err)
			}
			if got != tc.want {
				t.Fatalf("ParseU128(%q) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}

func TestFormatU128(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{0, "0x00000000000000000000000000000000"},
		{990, "0x000000000000000000000000000003de"},
		{math.MaxUint64, "0x0000000000000000ffffffffffffffff"},
	}
	for _, tc := range tests {
		got := FormatU128(tc.in)
		if got != tc.want {
			t.Errorf("FormatU128(%d) = %s, want %s", tc.in, got, tc.want)
		}
		if back, err := ParseU128(got); err != nil || back != tc.in {
			t.Errorf("round trip %d -> %s -> %d, %v", tc.in, got, back, err)
		}
	}
}

func TestAccountJSON(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    Account
		wantErr string
	}{
		{
			name: "fixture",
			body: string(fixture(t, "v2-accounts.json")),
			want: Account{Balance: 0x1cdd78bdeadfe8, Locked: 0x6a979b1d61c00, UnlockHeight: 435, Nonce: 4},
		},
		{
			name: "proof fields ignored",
			body: string(fixture(t, "v2-accounts-with-proof.json")),
			want: Account{Balance: 500000, Locked: 500000, UnlockHeight: 126, Nonce: 2867},
		},
		{
			name: "max u64",
			body: `{"balance":"0x0000000000000000ffffffffffffffff","locked":"0x00000000000000000000000000000000","unlock_height":0,"nonce":0}`,
			want: Account{Balance: math.MaxUint64},
		},
		{
			name:    "balance above u64",
			body:    `{"balance":"0x00000000000000010000000000000000","locked":"0x00000000000000000000000000000000","unlock_height":0,"nonce":0}`,
			wantErr: "account balance: u128 value exceeds uint64 range",
		},
		{
			name:    "locked bad hex",
			body:    `{"balance":"0x00","locked":"0xzz","unlock_height":0,"nonce":0}`,
			wantErr: "account locked",
		},
		{
			name:    "missing locked",
			body:    `{"balance":"0x00","unlock_height":0,"nonce":0}`,
			wantErr: "required",
		},
		{
			name:    "number instead of string",
			body:    `{"balance":5,"locked":"0x00","unlock_height":0,"nonce":0}`,
			wantErr: "cannot unmarshal",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got Account
			err := json.Unmarshal([]byte(tc.body), &got)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The simulated node must serve byte-identical account bodies.
func TestAccountMarshalNodeFormat(t *testing.T) {
	want := bytes.TrimSpace(fixture(t, "v2-accounts.json"))
	acct := Account{Balance: 0x1cdd78bdeadfe8, Locked: 0x6a979b1d61c00, UnlockHeight: 435, Nonce: 4}
	for _, v := range []any{acct, &acct} {
		got, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("marshal %T:\n got %s\nwant %s", v, got, want)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	tests := []struct {
		file string
		new  func() any
		// nodeExact: marshalling reproduces the fixture's JSON exactly (as a
		// value). False where the fixture omits fields a real node always sends.
		nodeExact bool
	}{
		{"v2-info-testnet.json", func() any { return new(Info) }, true},
		{"v2-info-mainnet-nakamoto.json", func() any { return new(Info) }, false},
		{"v2-info-testnet-stackscore-doc-2025.json", func() any { return new(Info) }, false},
		{"v2-info-stackscore-openapi-example.json", func() any { return new(Info) }, false},
		{"v2-pox-mainnet-pox2.json", func() any { return new(PoXInfo) }, true},
		{"v2-pox-regtest-pox4.json", func() any { return new(PoXInfo) }, true},
		{"v2-pox-stackscore-openapi-example.json", func() any { return new(PoXInfo) }, true},
		{"v2-pox-pox5.json", func() any { return new(PoXInfo) }, true},
		{"v2-pox-pox5-mainnet.json", func() any { return new(PoXInfo) }, true},
		{"v2-accounts.json", func() any { return new(Account) }, true},
		{"v2-accounts-empty.json", func() any { return new(Account) }, true},
		{"v2-accounts-with-proof.json", func() any { return new(Account) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			raw := fixture(t, tc.file)
			first := tc.new()
			if err := json.Unmarshal(raw, first); err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(first)
			if err != nil {
				t.Fatal(err)
			}
			second := tc.new()
			if err := json.Unmarshal(out, second); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(first, second) {
				t.Fatalf("round trip differs:\n first %+v\nsecond %+v", first, second)
			}
			if tc.nodeExact && !jsonEqual(t, raw, out) {
				t.Fatalf("marshal is not node-compatible:\n got %s\nwant %s", out, raw)
			}
		})
	}
}

func TestInfoMarshalNulls(t *testing.T) {
	out, err := json.Marshal(Info{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"unanchored_tip", "unanchored_seq", "exit_at_block_height"} {
		if string(m[k]) != "null" {
			t.Errorf("%s = %s, want null", k, m[k])
		}
	}
	for _, k := range []string{"tenure_height", "is_fully_synced", "node_public_key", "last_pox_anchor", "stackerdbs"} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %s, want omitted", k, v)
		}
	}

	synced := false
	out, err = json.Marshal(Info{IsFullySynced: &synced, StackerDBs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"is_fully_synced":false`)) || !bytes.Contains(out, []byte(`"stackerdbs":[]`)) {
		t.Fatalf("false/empty values lost: %s", out)
	}
}

func TestPoXEpochs(t *testing.T) {
	var p PoXInfo
	if err := json.Unmarshal(fixture(t, "v2-pox-regtest-pox4.json"), &p); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		epoch     string
		wantStart uint64
		wantOK    bool
	}{
		{"Epoch10", 0, true},
		{"Epoch2_05", 102, true},
		{"Epoch25", 132, true},
		{"Epoch30", 152, true},
		{"Epoch31", 0, false},
		{"epoch30", 0, false},
	}
	for _, tc := range tests {
		got, ok := p.EpochStart(tc.epoch)
		if got != tc.wantStart || ok != tc.wantOK {
			t.Errorf("EpochStart(%q) = %d, %v; want %d, %v", tc.epoch, got, ok, tc.wantStart, tc.wantOK)
		}
	}
	if e, ok := p.EpochAt(p.CurrentBurnchainBlockHeight); !ok || e.EpochID != "Epoch30" {
		t.Errorf("EpochAt(%d) = %q, %v; want Epoch30", p.CurrentBurnchainBlockHeight, e.EpochID, ok)
	}
	if e, ok := p.EpochAt(104); !ok || e.EpochID != "Epoch21" {
		t.Errorf("EpochAt(104) = %q, %v; want Epoch21", e.EpochID, ok)
	}
	if _, ok := (&PoXInfo{}).EpochStart("Epoch30"); ok {
		t.Error("EpochStart on a pre-2.1 body (no epochs) must report false")
	}
}

// TestPoXPox5Fixtures reads 4.x bodies through the client: pox-5 active in
// Epoch40, and the sBTC contracts the node names, which a 3.x body lacks.
func TestPoXPox5Fixtures(t *testing.T) {
	for _, tc := range []struct {
		file, contract, sbtc, registry string
	}{
		{"v2-pox-pox5.json", "ST000000000000000000002AMW42H.pox-5",
			"SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-token", "SN3VMHXEN64ZZF71JQ5VESXDWTR301XTTXGF4J8F1.sbtc-registry"},
		{"v2-pox-pox5-mainnet.json", "SP000000000000000000002Q6VF78.pox-5",
			"SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-token", "SM3VDXK3WZZSA84XXFKAFAF15NNZX32CTSG82JFQ4.sbtc-registry"},
		{"v2-pox-regtest-pox4.json", "ST000000000000000000002AMW42H.pox-4", "", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c := newTestClient(t, respond(200, "application/json", fixture(t, tc.file)))
			p, err := c.PoX(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if p.ContractID != tc.contract || p.Pox5SBTCContract != tc.sbtc || p.Pox5SBTCRegistryContract != tc.registry {
				t.Errorf("contract %q sbtc %q registry %q", p.ContractID, p.Pox5SBTCContract, p.Pox5SBTCRegistryContract)
			}
			if tc.sbtc == "" {
				return
			}
			if p.CurrentEpoch != "Epoch40" || len(p.ContractVersions) != 5 || p.ContractVersions[4].ContractID != tc.contract {
				t.Errorf("epoch %q, versions %+v", p.CurrentEpoch, p.ContractVersions)
			}
			start, ok := p.EpochStart("Epoch40")
			if !ok || p.ContractVersions[4].ActivationBurnchainBlockHeight != start {
				t.Errorf("pox-5 activation %d, Epoch40 start %d %v", p.ContractVersions[4].ActivationBurnchainBlockHeight, start, ok)
			}
		})
	}
}

func TestNormalizeTxID(t *testing.T) {
	const id = "0288d0bde0b0f88fad0827e35b757efec3a0cf7886c1614bfc4f81c40030a14a"
	tests := []struct {
		in      string
		wantErr bool
	}{
		{id, false},
		{"0x" + id, false},
		{"0X" + strings.ToUpper(id), false},
		{" " + id + "\n", false},
		{id[:63], true},
		{id + "0", true},
		{"0x", true},
		{"", true},
		{strings.Repeat("g", 64), true},
	}
	for _, tc := range tests {
		got, err := NormalizeTxID(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("NormalizeTxID(%q) = %q, %v", tc.in, got, err)
			continue
		}
		if !tc.wantErr && got != id {
			t.Errorf("NormalizeTxID(%q) = %q, want %q", tc.in, got, id)
		}
	}
}

func TestExcerpt(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"plain", "Failed to decode: x", "Failed to decode: x"},
		{"controls", "a\nb\r\tc\x00", "a b  c"},
		{"invalid utf8", "ok\xffok", "ok\uFFFDok"},
		{"long", strings.Repeat("x", 500), strings.Repeat("x", maxErrorExcerpt) + "…"},
		{"rune boundary", strings.Repeat("x", maxErrorExcerpt-1) + "é", strings.Repeat("x", maxErrorExcerpt-1) + "…"},
	}
	for _, tc := range tests {
		if got := excerpt([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: excerpt = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// jsonEqual compares two documents as values, ignoring key order and spacing.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(b []byte) any {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}
