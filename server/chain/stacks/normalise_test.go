package stacks

import (
	"errors"
	"testing"
)

// JavaScript's toUpperCase, which the c32check package applies, turns ten
// non-ASCII characters into c32 letters; c32addressDecode accepts them.
// Expectations checked against c32check 2.x.
func TestNormalisationMatchesJavaScriptUpperCase(t *testing.T) {
	tests := []struct{ in, want string }{
		{"STı0000000000000000000000000000000QNYJBC", "ST10000000000000000000000000000000QNYJBC"},
		{"ST50000000000000000000000000000002J3DKſS", "ST50000000000000000000000000000002J3DKSS"},
		{"ST50000000000000000000000000000002J3DKß", "ST50000000000000000000000000000002J3DKSS"},
		{"STH0000000000000000000000000000001NCﬅAF", "STH0000000000000000000000000000001NCSTAF"},
		{"ST230000000000000000000000000000003C0ﬀGM", "ST230000000000000000000000000000003C0FFGM"},
	}
	for _, tt := range tests {
		a, err := ParseAddress(tt.in)
		if err != nil || a.String() != tt.want {
			t.Errorf("%s: %v %v, want %s", tt.in, a, err, tt.want)
		}
	}
	// The leading S is compared as typed, as c32check does.
	if _, err := ParseAddress("ſT10000000000000000000000000000000QNYJBC"); err == nil {
		t.Error("ſ accepted as the leading S")
	}
}

// A character that is not c32 after normalisation is reported as typed, at
// its character position, even after characters that normalisation expands
// or shrinks.
func TestBadCharacterPositionAfterNonASCII(t *testing.T) {
	_, err := ParseAddress("ST50000000000000000000000000000002J3DKßé")
	var ce *CharError
	if !errors.As(err, &ce) || ce.Char != 'é' || ce.Pos != 39 {
		t.Fatalf("err %v (%+v), want 'é' at position 39", err, ce)
	}
	_, err = ParseAddress("STı000000000000000000000000000000\xffQNYJBC")
	if !errors.As(err, &ce) || ce.Pos != 33 {
		t.Fatalf("err %v (%+v), want position 33", err, ce)
	}
}

// A comment may follow a key on its line.
func TestParsePrivateKeysTrailingComment(t *testing.T) {
	a, _ := GeneratePrivateKey()
	b, _ := GeneratePrivateKey()
	keys, err := ParsePrivateKeys(a.Hex() + "  # hot key 1\n" + b.Hex() + "# hot key 2\n")
	if err != nil || len(keys) != 2 || keys[1].Hex() != b.Hex() {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
}
