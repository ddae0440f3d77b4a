package bitcoin

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil/base58"
)

// WIF vectors from Bitcoin Core's src/test/data/key_io_valid.json.
var wifVectors = []struct {
	wif, hex string
}{
	{"cPisAUdLvqqAr6MYtXnrWvgvyUAwuNyuTvZkDGw6miPhZdaiSDNH", "3fdfec1371cedcdb8c190ca6ff8ad603f817edc0d93c2a687c7b36dd66e70f2a"}, // regtest
	{"cRez45VGSp5EXNqm89K3NJJPSKKapJg5Kbw3atxr2337x2gtgYed", "798d87586cffbe8c545ab374454e403b1eb831501ebe89f3c3b02f3137bd7b46"}, // regtest
	{"cND53Dhp8eCZqG2ghe8YhSCGesXZ8fE5PGD1khrqNvEi4RBoXhEK", "12b5a10f3a11e708dc5412833c47ab7c368a21b9efe19293793ec879ce683018"}, // signet
	{"cV83kKisF3RQSvXbUCm9ox3kaz5JjEUBWcx8tNydfGJcyeUxuH47", "e0fcd4ce4e3d0e3de091f21415bb7cd011fac288c42020a879f28c2a4387df9b"}, // testnet
}

// The BIP-143 native P2WPKH example's key, public key and witness program.
const (
	bip143Key    = "619c335025c7f4012e556c2a58b2506e30b8511b53ade95ea316fd8c3286feb9"
	bip143PubKey = "025476c2e83188368da1ff3e292e7acafcdb3566bb0ad253f62fc70f07aeee6357"
	bip143Script = "00141d0f172a0ecb48aee1be1f2687d2963ae33f71a1"
)

func TestParsePrivateKeyWIF(t *testing.T) {
	for _, v := range wifVectors {
		// Regtest, signet and testnet share the WIF version byte.
		for _, net := range []Network{Regtest, Signet, Testnet} {
			k, err := ParsePrivateKey(v.wif, net)
			if err != nil {
				t.Fatalf("%s on %s: %v", v.wif[:4], net, err)
			}
			if k.Hex() != v.hex || k.WIF() != v.wif || k.Network() != net {
				t.Errorf("%s on %s: hex or WIF do not round-trip", v.wif[:4], net)
			}
			h, err := ParsePrivateKey(v.hex, net)
			if err != nil || h.WIF() != v.wif || h.Address() != k.Address() {
				t.Errorf("hex form of %s: %v", v.wif[:4], err)
			}
		}
	}
}

func TestPrivateKeyAddress(t *testing.T) {
	k, err := ParsePrivateKey(bip143Key, Regtest)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(k.PublicKey()); got != bip143PubKey {
		t.Fatalf("public key %s", got)
	}
	a := k.Address()
	if hex.EncodeToString(a.PkScript()) != bip143Script || a.Type() != P2WPKH || !strings.HasPrefix(a.String(), "bcrt1q") {
		t.Fatalf("address %s script %x", a, a.PkScript())
	}
	// The key's address is an address like any other.
	back, err := ParseAddress(a.String(), Regtest)
	if err != nil || back != a {
		t.Fatalf("reparse: %v", err)
	}
	s, _ := ParsePrivateKey(bip143Key, Signet)
	if !strings.HasPrefix(s.Address().String(), "tb1q") || !bytes.Equal(s.Address().PkScript(), a.PkScript()) {
		t.Fatalf("signet address %s", s.Address())
	}
}

func TestParsePrivateKeyErrors(t *testing.T) {
	n := "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
	nRaw, _ := hex.DecodeString(n)
	wifOfN := base58.CheckEncode(append(nRaw, 0x01), 0xef)
	wifOfZero := base58.CheckEncode(append(make([]byte, 32), 0x01), 0xef)
	regtestWIF := wifVectors[0].wif
	for _, v := range []struct {
		in      string
		mainnet bool
		want    string
	}{
		{"L5nJeqKmpHp4P7F8ZYyjwc5a7P4d8EabuGAzfGJk7yC1BJyzNaEd", true, "mainnet"},      // key_io mainnet, compressed
		{"KwuVvu6hsuEMHrfFWJQV64tRrWX3QzqHH18JuAHYqYV6dqBvNKxd", true, "mainnet"},      // key_io mainnet, compressed
		{"5JuW2AMDYu4xVwRG9DZW18VbzQrGcd5RCgb99sS6ehJsNQXu5b9", true, "mainnet"},       // key_io mainnet, uncompressed
		{"91mn1wYKEB1zyof1VFm8tMtocZx1oBrKKRCu9GCpgZvPmBLEJjp", false, "uncompressed"}, // key_io regtest, uncompressed
		{regtestWIF[:len(regtestWIF)-1] + "J", false, "checksum"},
		{wifOfN, false, "range"},
		{wifOfZero, false, "range"},
		{n, false, "range"},
		{strings.Repeat("0", 64), false, "range"},
		{"zz" + wifVectors[0].hex[2:], false, "not hexadecimal"},
		{"", false, "neither"},
		{"0x" + wifVectors[0].hex, false, "neither"},
		{wifVectors[0].hex + "01", false, "neither"}, // the Stacks form: not accepted here
	} {
		_, err := ParsePrivateKey(v.in, Regtest)
		if !errors.Is(err, ErrBadPrivateKey) || errors.Is(err, ErrMainnet) != v.mainnet || !strings.Contains(err.Error(), v.want) {
			t.Errorf("%.6s…: %v", v.in, err)
			continue
		}
		if len(v.in) >= 16 && strings.Contains(err.Error(), v.in[4:16]) {
			t.Errorf("error leaks key material: %v", err)
		}
	}
	if _, err := ParsePrivateKey(regtestWIF, 0); !errors.Is(err, ErrUnknownNetwork) {
		t.Errorf("zero network: %v", err)
	}
}

func TestGeneratePrivateKey(t *testing.T) {
	for _, net := range []Network{Regtest, Signet, Testnet} {
		k, err := GeneratePrivateKey(net)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(k.WIF(), "c") || len(k.Hex()) != 64 || len(k.PublicKey()) != 33 || k.Network() != net {
			t.Fatalf("%s: generated key form", net)
		}
		for _, form := range []string{k.WIF(), k.Hex()} {
			back, err := ParsePrivateKey(form, net)
			if err != nil || back.Address() != k.Address() {
				t.Fatalf("%s: round trip: %v", net, err)
			}
		}
		prefix := map[Network]string{Regtest: "bcrt1q", Signet: "tb1q", Testnet: "tb1q"}[net]
		if !strings.HasPrefix(k.Address().String(), prefix) {
			t.Errorf("%s address %s", net, k.Address())
		}
	}
	a, _ := GeneratePrivateKey(Regtest)
	b, _ := GeneratePrivateKey(Regtest)
	if a.Hex() == b.Hex() {
		t.Fatal("two generated keys are equal")
	}
	if _, err := GeneratePrivateKey(0); !errors.Is(err, ErrUnknownNetwork) {
		t.Fatalf("zero network: %v", err)
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	k, _ := ParsePrivateKey(wifVectors[0].wif, Regtest)
	secrets := []string{wifVectors[0].hex, wifVectors[0].wif, wifVectors[0].hex[:16]}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "key", k, "value", *k)
	j, err := json.Marshal(struct {
		K *PrivateKey
		V PrivateKey
	}{k, *k})
	if err != nil {
		t.Fatal(err)
	}
	outputs := []string{
		fmt.Sprint(k), fmt.Sprint(*k), k.String(), k.GoString(),
		fmt.Sprintf("%v %+v %#v %s %x %X %q %d", k, k, k, k, k, k, k, k),
		fmt.Sprintf("%v %+v %#v %s %x", *k, *k, *k, *k, *k),
		fmt.Sprintf("%v %+v %#v", struct{ K *PrivateKey }{k}, struct{ K PrivateKey }{*k}, []*PrivateKey{k}),
		logged.String(), string(j),
		fmt.Errorf("wrapped: %v", k).Error(),
	}
	for _, s := range outputs {
		for _, secret := range secrets {
			if strings.Contains(strings.ToLower(s), strings.ToLower(secret)) {
				t.Fatalf("secret printed: %s", s)
			}
		}
	}
	if !strings.Contains(logged.String(), k.Address().String()) {
		t.Errorf("slog should show the address: %s", logged.String())
	}
	if !strings.Contains(string(j), "redacted") {
		t.Errorf("json: %s", j)
	}
}
