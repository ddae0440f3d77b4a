package stacks

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestKnownAddresses(t *testing.T) {
	tests := []struct {
		addr    string
		version byte
		hash    string
	}{
		{"ST000000000000000000002AMW42H", 26, "0000000000000000000000000000000000000000"},
		{"SP000000000000000000002Q6VF78", 22, "0000000000000000000000000000000000000000"},
		{"SP2J6ZY48GV1EZ5V2V5RB9MP66SW86PYKKNRV9EJ7", 22, "a46ff88886c2ef9762d970b4d2c63678835bd39d"},
		{goldenRecipient, 26, "b52c45b1a7977204f17ac0b6f48306aea2dbb8e9"},
		{goldenSender, 26, "164247d6f2b425ac5771423ae6c80c754f7172b0"},
	}
	for _, tt := range tests {
		a, err := ParseAddress(tt.addr)
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		if a.Version != tt.version || hex.EncodeToString(a.Hash160[:]) != tt.hash {
			t.Errorf("%s decoded to %d/%x", tt.addr, a.Version, a.Hash160)
		}
		if a.String() != tt.addr {
			t.Errorf("re-encoded %s as %s", tt.addr, a.String())
		}
	}
}

func TestC32RoundTrip(t *testing.T) {
	inputs := [][]byte{{}, {0}, {0, 0}, {1}, {0, 1}, {0xff}, {0x10, 0, 0}, bytes.Repeat([]byte{0xab}, 25)}
	for _, in := range inputs {
		s := C32Encode(in)
		back, err := C32Decode(s)
		if err != nil || !bytes.Equal(back, in) {
			t.Errorf("%x → %q → %x (%v)", in, s, back, err)
		}
	}
}

func TestNormalisation(t *testing.T) {
	// The c32check package maps lower case to upper, O to 0 and I/L to 1 after the leading S.
	lower := "S" + strings.ToLower(goldenRecipient[1:])
	a, err := ParseAddress(lower)
	if err != nil || a.String() != goldenRecipient {
		t.Fatalf("lower-case address: %v %v", a, err)
	}
	o := strings.ReplaceAll("ST000000000000000000002AMW42H", "0", "O")
	o = "S" + o[1:]
	if a, err := ParseAddress(o); err != nil || a.String() != "ST000000000000000000002AMW42H" {
		t.Fatalf("O for 0: %v %v", a, err)
	}
	if _, err := ParseAddress("s" + goldenRecipient[1:]); err == nil {
		t.Error("lower-case leading s must be refused, as c32check does")
	}
}

func TestParsePrincipalErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantErr error
		wantMsg string
	}{
		{"", ErrBadLength, "too short"},
		{"ST1", ErrBadLength, "too short"},
		{"XT2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495G1V", nil, `must start with "S"`},
		{"ST2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495GUV", ErrBadCharacter, `bad character 'U' at position 39`},
		{"ST2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495G1W", ErrBadChecksum, "bad checksum"},
		{"ST2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495G", ErrBadChecksum, "bad checksum"},
		{"SP2J6ZY48GV1EZ5V2V5RB9MP66SW86PYKKNRV9EJ7", ErrMainnetAddress, "use a testnet address"},
		{"SM80000000000000000000000000000004WBEWKC", ErrMainnetAddress, "mainnet"},
		{goldenRecipient + ".", ErrBadContractName, "length 0"},
		{goldenRecipient + ".9lives", ErrBadContractName, "must start with a letter"},
		{goldenRecipient + ".a.b", ErrBadContractName, `character '.'`},
		{goldenRecipient + "." + strings.Repeat("a", 41), ErrBadContractName, "length 41"},
		{"S" + strings.Repeat("0", 300), ErrBadLength, "at most 256"},
	}
	for _, tt := range tests {
		_, err := ParseTestnetPrincipal(tt.in)
		if err == nil {
			t.Errorf("%q: no error", tt.in)
			continue
		}
		if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
			t.Errorf("%q: %v, want %v", tt.in, err, tt.wantErr)
		}
		if !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("%q: %q does not mention %q", tt.in, err, tt.wantMsg)
		}
	}
}

func TestHashLength(t *testing.T) {
	s, err := C32CheckEncode(26, make([]byte, 19))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseAddress("S" + s); !errors.Is(err, ErrBadLength) {
		t.Errorf("19-byte hash: %v", err)
	}
	s, _ = C32CheckEncode(7, make([]byte, 20))
	if _, err := ParseAddress("S" + s); !errors.Is(err, ErrBadVersion) {
		t.Errorf("version 7: %v", err)
	}
}

func TestTestnetMultisigAccepted(t *testing.T) {
	a := Address{Version: AddressVersionTestnetMultiSig, Hash160: [20]byte{1, 2, 3}}
	p, err := ParseTestnetPrincipal(a.String())
	if err != nil || !strings.HasPrefix(a.String(), "SN") || p.Address != a {
		t.Fatalf("%s: %v", a, err)
	}
}
