package stacks

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
)

// The faucet example published in the Hiro API documentation.
const (
	goldenKey       = "cb3df38053d132895220b9ce471f6b676db5b9bf0b4adefb55f2118ece2478df01"
	goldenRecipient = "ST2TJRHDHMYBQ417HFB0BDX430TQA5PXRX6495G1V"
	goldenSender    = "STB44HYPYAT2BB2QE513NSP81HTMYWBJP02HPGK6"
	goldenTxRaw     = "80800000000400164247d6f2b425ac5771423ae6c80c754f7172b0000000000000003200000000000000b400008537046ff1008368baaa3ff2235122c556b89dad4f9df0639b924cf32a44b866497e49846b24191e711b21faaae96ca0542e4a140168484740b94211cececb3303020000000000051ab52c45b1a7977204f17ac0b6f48306aea2dbb8e9000000000007a12046617563657400000000000000000000000000000000000000000000000000000000"
	goldenTxID      = "0xf2f0402f9f4c4d43b382690c4f7b97e24d5ff5dd5c619e3615daa64dca7ef4bc"
)

func goldenTx(t testing.TB) (*Transaction, *PrivateKey) {
	t.Helper()
	key, err := ParsePrivateKey(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	rcpt, err := ParseTestnetPrincipal(goldenRecipient)
	if err != nil {
		t.Fatal(err)
	}
	memo, err := NewMemo("Faucet")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := NewTokenTransfer(TransferParams{Recipient: rcpt, Amount: 500000, Nonce: 50, Fee: 180, Memo: memo}, key)
	if err != nil {
		t.Fatal(err)
	}
	return tx, key
}

func TestGoldenVector(t *testing.T) {
	tx, key := goldenTx(t)
	if got := key.TestnetAddress().String(); got != goldenSender {
		t.Errorf("sender = %s, want %s", got, goldenSender)
	}
	if got := hex.EncodeToString(tx.Serialize()); got != goldenTxRaw {
		t.Errorf("txRaw mismatch\n got %s\nwant %s", got, goldenTxRaw)
	}
	if got := tx.TxID().Hex0x(); got != goldenTxID {
		t.Errorf("txid = %s, want %s", got, goldenTxID)
	}
	if tx.EncodedLen() != len(tx.Serialize()) || tx.EncodedLen() != 180 {
		t.Errorf("EncodedLen = %d, serialised %d, want 180", tx.EncodedLen(), len(tx.Serialize()))
	}
	if err := tx.Verify(); err != nil {
		t.Errorf("verify: %v", err)
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	raw, _ := hex.DecodeString(goldenTxRaw)
	tx, err := DecodeTransaction(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tx.Serialize(), raw) {
		t.Fatal("re-encoding differs")
	}
	if tx.Payload.Memo.String() != "Faucet" || tx.Payload.Amount != 500000 || tx.Auth.Nonce != 50 || tx.Auth.Fee != 180 {
		t.Errorf("decoded fields wrong: %+v", tx)
	}
	if tx.Payload.Recipient.String() != goldenRecipient || tx.SenderAddress().String() != goldenSender {
		t.Errorf("principals wrong: %s / %s", tx.Payload.Recipient, tx.SenderAddress())
	}
	if err := tx.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRejects(t *testing.T) {
	raw, _ := hex.DecodeString(goldenTxRaw)
	mut := func(off int, b byte) []byte {
		c := bytes.Clone(raw)
		c[off] = b
		return c
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "truncated version"},
		{"truncated", raw[:100], "truncated"},
		{"trailing", append(bytes.Clone(raw), 0), "1 trailing bytes"},
		{"version", mut(0, 0x01), "unknown transaction version"},
		{"sponsored", mut(5, AuthTypeSponsored), "sponsored"},
		{"auth type", mut(5, 0x09), "unknown auth type"},
		{"multisig", mut(6, 0x01), "hash mode 0x01"},
		{"key encoding", mut(43, 0x02), "unknown key encoding"},
		{"anchor", mut(109, 0x00), "unknown anchor mode"},
		{"pc mode", mut(110, 0x03), "unknown post-condition mode"},
		{"post-condition count", mut(114, 0x01), "unknown post-condition principal type 0x05"},
		{"nft post-condition", func() []byte { c := mut(114, 0x01); c[115] = 0x02; return c }(), "post-condition type 0x02 is not supported"},
		{"payload", mut(115, 0x01), "payload type 0x01 is not supported"},
		{"contract call", mut(115, 0x02), "contract name length 233"},
		{"principal type", mut(116, 0x07), "unknown principal type"},
		{"address version", mut(117, 0xff), "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeTransaction(tt.in)
			if err == nil || !errors.Is(err, ErrMalformedTx) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrMalformedTx containing %q", err, tt.want)
			}
		})
	}
}

func TestContractRecipientRoundTrip(t *testing.T) {
	key, _ := ParsePrivateKey(strings.TrimSuffix(goldenKey, "01")) // uncompressed form
	p, err := ParseTestnetPrincipal(goldenRecipient + ".my-contract_v2")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := NewTokenTransfer(TransferParams{Recipient: p, Amount: 1, Nonce: 0, Fee: 200, ChainID: 0x87654321}, key)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Auth.KeyEncoding != KeyEncodingUncompressed {
		t.Error("64-char key must sign with an uncompressed public key")
	}
	raw := tx.Serialize()
	if len(raw) != tx.EncodedLen() {
		t.Errorf("EncodedLen %d != %d", tx.EncodedLen(), len(raw))
	}
	back, err := DecodeTransaction(raw)
	if err != nil {
		t.Fatal(err)
	}
	if back.Payload.Recipient != p || back.ChainID != 0x87654321 {
		t.Errorf("got %v chain %x", back.Payload.Recipient, back.ChainID)
	}
	if err := back.Verify(); err != nil {
		t.Fatal(err)
	}
	// Bad contract name on the wire: first character a digit.
	bad := bytes.Clone(raw)
	bad[len(raw)-MemoLen-8-len("my-contract_v2")] = '9'
	if _, err := DecodeTransaction(bad); err == nil || !strings.Contains(err.Error(), "bad contract name") {
		t.Errorf("want bad contract name, got %v", err)
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	tx, _ := goldenTx(t)
	tampered := *tx
	tampered.Payload.Amount++
	if err := tampered.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("tampered amount: %v", err)
	}
	wrongChain := *tx
	wrongChain.ChainID = ChainIDMainnet
	if err := wrongChain.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("other chain id: %v", err)
	}
	badRec := *tx
	badRec.Auth.Signature[0] = 4
	if err := badRec.Verify(); !errors.Is(err, ErrBadSignature) {
		t.Errorf("recovery id 4: %v", err)
	}
	// Flip S to n - S: still a valid ECDSA signature, but malleable.
	highS := *tx
	s := highS.Auth.Signature[33:]
	negateModN(s)
	highS.Auth.Signature[0] ^= 1
	if err := highS.Verify(); !errors.Is(err, ErrHighS) {
		t.Errorf("high S: %v", err)
	}
}

func TestSignIsDeterministic(t *testing.T) {
	a, _ := goldenTx(t)
	b, _ := goldenTx(t)
	if a.TxID() != b.TxID() {
		t.Fatal("RFC 6979 signing must be deterministic")
	}
}

func TestMemo(t *testing.T) {
	if _, err := NewMemo(strings.Repeat("a", 35)); err == nil {
		t.Error("35-byte memo accepted")
	}
	m, err := NewMemo(strings.Repeat("€", 11)) // 33 bytes
	if err != nil || m.String() != strings.Repeat("€", 11) {
		t.Errorf("memo %q %v", m.String(), err)
	}
}

// negateModN replaces the 32-byte scalar b with n - b.
func negateModN(b []byte) {
	var s secp256k1.ModNScalar
	s.SetByteSlice(b)
	s.Negate()
	out := s.Bytes()
	copy(b, out[:])
}

func TestParseTxID(t *testing.T) {
	var want TxID
	for i := range want {
		want[i] = byte(i * 7)
	}
	for _, s := range []string{want.String(), want.Hex0x(), strings.ToUpper(want.String())} {
		got, err := ParseTxID(s)
		if err != nil || got != want {
			t.Errorf("ParseTxID(%q) = %x, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "0x", want.String()[:63], want.String() + "00", "zz" + want.String()[2:]} {
		if _, err := ParseTxID(bad); err == nil {
			t.Errorf("ParseTxID(%q): no error", bad)
		}
	}
}
