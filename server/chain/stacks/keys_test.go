package stacks

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParsePrivateKey(t *testing.T) {
	k, err := ParsePrivateKey(goldenKey)
	if err != nil || !k.Compressed() || k.Hex() != goldenKey || len(k.PublicKey()) != 33 {
		t.Fatalf("compressed key: %v", err)
	}
	u, err := ParsePrivateKey(goldenKey[:64])
	if err != nil || u.Compressed() || u.Hex() != goldenKey[:64] || len(u.PublicKey()) != 65 {
		t.Fatalf("uncompressed key: %v", err)
	}
	if k.TestnetAddress() == u.TestnetAddress() {
		t.Error("compressed and uncompressed forms must give different addresses")
	}
	upper, err := ParsePrivateKey(strings.ToUpper(goldenKey))
	if err != nil || upper.TestnetAddress() != k.TestnetAddress() {
		t.Errorf("upper-case hex: %v", err)
	}
}

func TestParsePrivateKeyErrors(t *testing.T) {
	n := "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
	for _, in := range []string{
		"", "abc", goldenKey[:63], goldenKey[:64] + "02", goldenKey + "00",
		"zz" + goldenKey[2:], strings.Repeat("0", 64), n, "0x" + goldenKey[:64],
	} {
		_, err := ParsePrivateKey(in)
		if !errors.Is(err, ErrBadPrivateKey) {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if len(in) >= 16 && strings.Contains(err.Error(), in[2:18]) {
			t.Errorf("error leaks key material: %v", err)
		}
	}
}

func TestGeneratedKeysAreCompressed(t *testing.T) {
	k, err := GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if !k.Compressed() || len(k.Hex()) != 66 || !strings.HasSuffix(k.Hex(), "01") {
		t.Fatalf("generated key form: %d chars", len(k.Hex()))
	}
	back, err := ParsePrivateKey(k.Hex())
	if err != nil || back.TestnetAddress() != k.TestnetAddress() {
		t.Fatalf("round trip: %v", err)
	}
}

func TestKeyNeverPrinted(t *testing.T) {
	k, _ := ParsePrivateKey(goldenKey)
	secret := goldenKey[:64]
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "key", k)
	for _, s := range []string{
		fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s %x %q", k, k, k, k, k, k),
		fmt.Sprintf("%v", struct{ K *PrivateKey }{k}), buf.String(),
	} {
		if strings.Contains(strings.ToLower(s), secret) {
			t.Fatalf("secret printed: %s", s)
		}
	}
	if !strings.Contains(buf.String(), goldenSender) {
		t.Errorf("slog should show the address: %s", buf.String())
	}
}

func TestParsePrivateKeys(t *testing.T) {
	a, _ := GeneratePrivateKey()
	b, _ := GeneratePrivateKey()
	c, _ := GeneratePrivateKey()
	text := "# faucet keys\n" + a.Hex() + ",\r\n\n " + b.Hex() + " , " + c.Hex() + "\n"
	keys, err := ParsePrivateKeys(text)
	if err != nil || len(keys) != 3 || keys[2].Hex() != c.Hex() {
		t.Fatalf("got %d keys, %v", len(keys), err)
	}
	if _, err := ParsePrivateKeys(" \n# only a comment\n"); !errors.Is(err, ErrBadPrivateKey) {
		t.Errorf("empty: %v", err)
	}
	_, err = ParsePrivateKeys(a.Hex() + "\nnot-a-key-" + b.Hex())
	if err == nil || !strings.Contains(err.Error(), "key #2") || strings.Contains(err.Error(), b.Hex()[:20]) {
		t.Errorf("bad second key: %v", err)
	}
	if _, err := ParsePrivateKeys(a.Hex() + "," + a.Hex()); err == nil || !strings.Contains(err.Error(), "same address as key #1") {
		t.Errorf("duplicate: %v", err)
	}
}
