package bitcoin

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"
)

// BIP-143's "Native P2WPKH" example: an unsigned transaction whose second
// input spends a P2WPKH output of bip143Key, its sighash, signature and the
// signed transaction.
const (
	bip143Unsigned   = "0100000002fff7f7881a8099afa6940d42d1e7f6362bec38171ea3edf433541db4e4ad969f0000000000eeffffffef51e1b804cc89d182d279655c3aa89e815b1b309fe287d9b2b55d57b90ec68a0100000000ffffffff02202cb206000000001976a9148280b37df378db99f66f85c95a783a76ac7a6d5988ac9093510d000000001976a9143bde42dbee7e4dbe6a21b2d50ce2f0167faa815988ac11000000"
	bip143P2PKScript = "2103c9f4836b9a4f77fc0d81f7bcb01b7f1b35916864b9476c241ce9fc198bd25432ac"
	bip143P2PKValue  = 625_000_000
	bip143Value      = 600_000_000
	bip143SigHash    = "c37af31116d1b27caf68aae9e3ac82f1477929014d5b917657d0eb49478cb670"
	bip143Signature  = "304402203609e17b84f6a7d30c80bfa610b5b4542f32a8a0d5447a12fb1366d7f01cc44a0220573a954c4518331561406f90300e8f3358f51928d43c212a8caed02de67eebee01"
	bip143P2PKSigScr = "4830450221008b9d1dc26ba6a9cb62127b02742fa9d754cd3bebf337f7a55d114c8e5cdd30be022040529b194ba3f9281a99f2b1c0a19c0489bc22ede944ccf4ecbab4cc618ef3ed01"
	bip143Signed     = "01000000000102fff7f7881a8099afa6940d42d1e7f6362bec38171ea3edf433541db4e4ad969f00000000494830450221008b9d1dc26ba6a9cb62127b02742fa9d754cd3bebf337f7a55d114c8e5cdd30be022040529b194ba3f9281a99f2b1c0a19c0489bc22ede944ccf4ecbab4cc618ef3ed01eeffffffef51e1b804cc89d182d279655c3aa89e815b1b309fe287d9b2b55d57b90ec68a0100000000ffffffff02202cb206000000001976a9148280b37df378db99f66f85c95a783a76ac7a6d5988ac9093510d000000001976a9143bde42dbee7e4dbe6a21b2d50ce2f0167faa815988ac000247304402203609e17b84f6a7d30c80bfa610b5b4542f32a8a0d5447a12fb1366d7f01cc44a0220573a954c4518331561406f90300e8f3358f51928d43c212a8caed02de67eebee0121025476c2e83188368da1ff3e292e7acafcdb3566bb0ad253f62fc70f07aeee635711000000"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBIP143NativeP2WPKH signs the BIP's example input with this package's
// key and signing path and gets the BIP's signature and transaction byte
// for byte (ECDSA nonces are RFC 6979, as in Bitcoin Core then).
func TestBIP143NativeP2WPKH(t *testing.T) {
	msg := new(wire.MsgTx)
	if err := msg.Deserialize(bytes.NewReader(mustHex(t, bip143Unsigned))); err != nil {
		t.Fatal(err)
	}
	key, err := ParsePrivateKey(bip143Key, Regtest)
	if err != nil {
		t.Fatal(err)
	}
	p2pk := Coin{OutPoint: msg.TxIn[0].PreviousOutPoint, Value: bip143P2PKValue, PkScript: mustHex(t, bip143P2PKScript)}
	coin := Coin{OutPoint: msg.TxIn[1].PreviousOutPoint, Value: bip143Value, PkScript: key.Address().PkScript()}
	if hex.EncodeToString(coin.PkScript) != bip143Script {
		t.Fatalf("key's script %x", coin.PkScript)
	}
	fetcher := prevOutFetcher([]Coin{p2pk, coin})
	hashes := txscript.NewTxSigHashes(msg, fetcher)

	sighash, err := txscript.CalcWitnessSigHash(coin.PkScript, hashes, txscript.SigHashAll, msg, 1, coin.Value)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(sighash) != bip143SigHash {
		t.Fatalf("sighash %x", sighash)
	}

	witness, err := signP2WPKH(msg, hashes, 1, coin, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(witness) != 2 || hex.EncodeToString(witness[0]) != bip143Signature || hex.EncodeToString(witness[1]) != bip143PubKey {
		t.Fatalf("witness %x", witness)
	}
	msg.TxIn[1].Witness = witness
	msg.TxIn[0].SignatureScript = mustHex(t, bip143P2PKSigScr)
	var signed bytes.Buffer
	if err := msg.Serialize(&signed); err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(signed.Bytes()) != bip143Signed {
		t.Fatalf("signed transaction differs:\n%x", signed.Bytes())
	}
	// And the script engine accepts both inputs, the BIP's P2PK one too.
	if err := engineCheck(msg, []Coin{p2pk, coin}); err != nil {
		t.Fatal(err)
	}
}
