package btcnode_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"
)

// testKey is a P2WPKH key on regtest, built and signed with btcd's own
// libraries: an oracle independent of the faucet's code.
type testKey struct {
	priv     *btcec.PrivateKey
	addr     string
	pkScript []byte
}

func newTestKey(t *testing.T) *testKey {
	t.Helper()
	priv, err := btcec.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	a, err := btcutil.NewAddressWitnessPubKeyHash(btcutil.Hash160(priv.PubKey().SerializeCompressed()), &chaincfg.RegressionNetParams)
	if err != nil {
		t.Fatal(err)
	}
	script, err := txscript.PayToAddrScript(a)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{priv: priv, addr: a.EncodeAddress(), pkScript: script}
}

func (k *testKey) scriptHex() string { return hex.EncodeToString(k.pkScript) }

// coin is an output the key can spend.
type coin struct {
	txid  string
	vout  uint32
	value int64
}

// payment is an output of a spend.
type payment struct {
	script []byte
	value  int64
}

// spend signs a transaction spending c to the outputs. sequence
// 0xffffffff opts out of BIP 125 replacement, as a conflict test needs.
func (k *testKey) spend(t *testing.T, c coin, outs ...payment) (raw []byte, txid string) {
	t.Helper()
	h, err := chainhash.NewHashFromStr(c.txid)
	if err != nil {
		t.Fatal(err)
	}
	tx := wire.NewMsgTx(2)
	in := wire.NewTxIn(wire.NewOutPoint(h, c.vout), nil, nil)
	in.Sequence = wire.MaxTxInSequenceNum
	tx.AddTxIn(in)
	for _, o := range outs {
		tx.AddTxOut(wire.NewTxOut(o.value, o.script))
	}
	fetcher := txscript.NewCannedPrevOutputFetcher(k.pkScript, c.value)
	wit, err := txscript.WitnessSignature(tx, txscript.NewTxSigHashes(tx, fetcher), 0, c.value, k.pkScript, txscript.SigHashAll, k.priv, true)
	if err != nil {
		t.Fatal(err)
	}
	tx.TxIn[0].Witness = wit
	var buf bytes.Buffer
	if err := tx.Serialize(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), tx.TxHash().String()
}

// blockHash decodes a serialized block's header and returns its hash.
func blockHash(t *testing.T, raw []byte) (hash string, txs int) {
	t.Helper()
	var b wire.MsgBlock
	if err := b.Deserialize(bytes.NewReader(raw)); err != nil {
		t.Fatalf("decoding the raw block: %v", err)
	}
	return b.BlockHash().String(), len(b.Transactions)
}
