package bitcoin

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"
)

const (
	// txVersion 2 is what current wallets send (and what BIP-68 relative
	// locks need); version 1 is still standard but dated.
	txVersion = 2
	// rbfSequence signals opt-in replace-by-fee (BIP-125: any input with
	// nSequence < 0xfffffffe) while leaving nLockTime enforced.
	rbfSequence = wire.MaxTxInSequenceNum - 2
	maxSatoshi  = int64(btcutil.MaxSatoshi)
)

// Payout transaction errors. Insufficient funds and failed bumps are typed
// errors (InsufficientFundsError, BumpError) matching ErrInsufficientFunds
// and ErrCannotBump with errors.Is.
var (
	ErrInvalidPayout     = errors.New("invalid payout")
	ErrInvalidCoin       = errors.New("invalid coin")
	ErrInvalidFeeRate    = errors.New("invalid fee rate")
	ErrTxTooLarge        = errors.New("transaction too large")
	ErrInsufficientFunds = errors.New("insufficient funds")
	ErrCannotBump        = errors.New("cannot bump fee")
	ErrInvalidTx         = errors.New("invalid bitcoin transaction")
)

// InsufficientFundsError says how much a payout needed, fee included, and
// how much the coins held.
type InsufficientFundsError struct {
	Needed    int64 // sats: payouts plus the fee at the requested rate
	Available int64 // sats
}

func (e *InsufficientFundsError) Error() string {
	return fmt.Sprintf("insufficient funds: need %d sats (payouts and fee), have %d", e.Needed, e.Available)
}

// Is makes errors.Is(err, ErrInsufficientFunds) true.
func (e *InsufficientFundsError) Is(target error) bool { return target == ErrInsufficientFunds }

// Coin is an unspent P2WPKH output of the faucet's own key.
type Coin struct {
	OutPoint wire.OutPoint
	Value    int64 // sats
	PkScript []byte
}

// Payout is one output to pay.
type Payout struct {
	Address Address
	Amount  int64 // sats
}

// BuildParams is what BuildPayout needs.
type BuildParams struct {
	Key *PrivateKey
	// Coins are all spent, as inputs in this order (see SelectCoins). Each
	// must pay Key's own P2WPKH script.
	Coins []Coin
	// Payouts become the outputs in this order; change, if any, comes last.
	Payouts []Payout
	// ChangeAddress receives the change; the zero Address means Key's own.
	ChangeAddress Address
	// FeeRate in sat/vB, MinFeeRate..MaxFeeRate.
	FeeRate int64
	// LockTime is nLockTime; callers may set the current block height, as
	// Core does against fee sniping. Zero is fine.
	LockTime uint32
}

// Tx is a signed payout transaction together with the coins it spends.
type Tx struct {
	msg         *wire.MsgTx
	coins       []Coin // by input
	fee         int64
	changeIndex int // -1: no change output
}

// BuildPayout builds and signs a version-2, RBF-signalling transaction that
// spends every coin and pays every payout, with a change output when the
// remainder is at least dust (otherwise the remainder is fee). The fee is
// FeeRate × the virtual size estimated with the largest possible
// signatures, so it covers the signed size; every input is checked with
// btcd's script engine before the transaction is returned.
func BuildPayout(p BuildParams) (*Tx, error) {
	if p.Key == nil {
		return nil, errors.New("build payout: no key")
	}
	changeScript, err := changeScriptFor(p.Key, p.ChangeAddress)
	if err != nil {
		return nil, err
	}
	if err := checkFeeRate(p.FeeRate); err != nil {
		return nil, err
	}
	in, err := checkCoins(p.Coins, p.Key)
	if err != nil {
		return nil, err
	}
	out, err := checkPayouts(p.Payouts, p.Key.Network(), changeScript)
	if err != nil {
		return nil, err
	}
	msg := wire.NewMsgTx(txVersion)
	msg.LockTime = p.LockTime
	for _, c := range p.Coins {
		msg.AddTxIn(&wire.TxIn{PreviousOutPoint: c.OutPoint, Sequence: rbfSequence})
	}
	for _, po := range p.Payouts {
		msg.AddTxOut(wire.NewTxOut(po.Amount, po.Address.PkScript()))
	}
	fee, changeIndex, err := settle(msg, in, out, p.FeeRate, changeScript)
	if err != nil {
		return nil, err
	}
	return finish(msg, p.Coins, p.Key, fee, changeIndex, p.FeeRate)
}

func changeScriptFor(key *PrivateKey, change Address) ([]byte, error) {
	if change.IsZero() {
		return key.Address().PkScript(), nil
	}
	if change.Network() != key.Network() {
		return nil, fmt.Errorf("change address is for %s, the key for %s", change.Network(), key.Network())
	}
	return change.PkScript(), nil
}

func checkCoins(coins []Coin, key *PrivateKey) (int64, error) {
	if len(coins) == 0 {
		return 0, fmt.Errorf("%w: no coins to spend", ErrInvalidCoin)
	}
	own := key.Address().PkScript()
	seen := make(map[wire.OutPoint]bool, len(coins))
	var sum int64
	for i, c := range coins {
		switch {
		case c.Value <= 0 || c.Value > maxSatoshi:
			return 0, fmt.Errorf("%w: coin #%d (%v) has value %d", ErrInvalidCoin, i, c.OutPoint, c.Value)
		case !bytes.Equal(c.PkScript, own):
			return 0, fmt.Errorf("%w: coin #%d (%v) does not pay the key's address %s", ErrInvalidCoin, i, c.OutPoint, key.Address())
		case seen[c.OutPoint]:
			return 0, fmt.Errorf("%w: coin #%d (%v) is listed twice", ErrInvalidCoin, i, c.OutPoint)
		}
		seen[c.OutPoint] = true
		sum += c.Value
		if sum > maxSatoshi {
			return 0, fmt.Errorf("%w: coins add up to more than 21 million BTC", ErrInvalidCoin)
		}
	}
	return sum, nil
}

func checkPayouts(payouts []Payout, net Network, changeScript []byte) (int64, error) {
	if len(payouts) == 0 || len(payouts) > MaxPayouts {
		return 0, fmt.Errorf("%w: %d payouts, want 1..%d", ErrInvalidPayout, len(payouts), MaxPayouts)
	}
	var sum int64
	for i, po := range payouts {
		script := po.Address.PkScript()
		switch {
		case po.Address.IsZero():
			return 0, fmt.Errorf("%w: payout #%d has no address", ErrInvalidPayout, i)
		case po.Address.Network() != net:
			return 0, fmt.Errorf("%w: payout #%d to %s is for %s, the key for %s", ErrInvalidPayout, i, po.Address, po.Address.Network(), net)
		case po.Amount <= 0 || po.Amount > maxSatoshi:
			return 0, fmt.Errorf("%w: payout #%d to %s of %d sats", ErrInvalidPayout, i, po.Address, po.Amount)
		case po.Amount < DustThreshold(script):
			return 0, fmt.Errorf("%w: payout #%d to %s of %d sats is dust (a %s output needs at least %d)", ErrInvalidPayout, i, po.Address, po.Amount, po.Address.Type(), DustThreshold(script))
		case bytes.Equal(script, changeScript):
			// Change is found again by its script (BumpFee); a payout to
			// the same script would be mistaken for it.
			return 0, fmt.Errorf("%w: payout #%d pays the change address %s", ErrInvalidPayout, i, po.Address)
		}
		sum += po.Amount
		if sum > maxSatoshi {
			return 0, fmt.Errorf("%w: payouts add up to more than 21 million BTC", ErrInvalidPayout)
		}
	}
	return sum, nil
}

// settle appends a change output to msg when the remainder after the fee
// is at least dust, and returns the fee and the change index (-1: none).
func settle(msg *wire.MsgTx, in, out, rate int64, changeScript []byte) (int64, int, error) {
	w := estimateWeight(msg)
	feeNoChange := rate * vsizeOf(w)
	if in-out < feeNoChange {
		return 0, -1, &InsufficientFundsError{Needed: out + feeNoChange, Available: in}
	}
	msg.AddTxOut(wire.NewTxOut(0, changeScript))
	w = estimateWeight(msg)
	if w > MaxStandardTxWeight {
		return 0, -1, fmt.Errorf("%w: weight %d is above the standard %d", ErrTxTooLarge, w, MaxStandardTxWeight)
	}
	last := len(msg.TxOut) - 1
	if change := in - out - rate*vsizeOf(w); change >= DustThreshold(changeScript) {
		msg.TxOut[last].Value = change
		return rate * vsizeOf(w), last, nil
	}
	msg.TxOut = msg.TxOut[:last]
	return in - out, -1, nil
}

// finish signs every input, checks the result with the script engine and
// that the fee covers rate × the signed virtual size.
func finish(msg *wire.MsgTx, coins []Coin, key *PrivateKey, fee int64, changeIndex int, rate int64) (*Tx, error) {
	fetcher := prevOutFetcher(coins)
	hashes := txscript.NewTxSigHashes(msg, fetcher)
	for i, c := range coins {
		w, err := signP2WPKH(msg, hashes, i, c, key)
		if err != nil {
			return nil, fmt.Errorf("sign input %d: %w", i, err)
		}
		msg.TxIn[i].Witness = w
	}
	tx := &Tx{msg: msg, coins: cloneCoins(coins), fee: fee, changeIndex: changeIndex}
	if err := tx.Verify(); err != nil {
		return nil, fmt.Errorf("signed transaction fails verification: %w", err)
	}
	if fee < rate*tx.VSize() {
		return nil, fmt.Errorf("fee %d sats is below %d sat/vB × %d vB: the size estimate is wrong", fee, rate, tx.VSize())
	}
	return tx, nil
}

// signP2WPKH is the witness spending coin as input i: a SIGHASH_ALL ECDSA
// signature over the BIP-143 digest (txscript derives the P2PKH script code
// from the P2WPKH script) and the compressed public key.
func signP2WPKH(msg *wire.MsgTx, hashes *txscript.TxSigHashes, i int, coin Coin, key *PrivateKey) (wire.TxWitness, error) {
	return txscript.WitnessSignature(msg, hashes, i, coin.Value, coin.PkScript, txscript.SigHashAll, key.key, true)
}

func prevOutFetcher(coins []Coin) *txscript.MultiPrevOutFetcher {
	m := make(map[wire.OutPoint]*wire.TxOut, len(coins))
	for _, c := range coins {
		m[c.OutPoint] = wire.NewTxOut(c.Value, c.PkScript)
	}
	return txscript.NewMultiPrevOutFetcher(m)
}

func cloneCoins(coins []Coin) []Coin {
	out := make([]Coin, len(coins))
	for i, c := range coins {
		out[i] = Coin{OutPoint: c.OutPoint, Value: c.Value, PkScript: bytes.Clone(c.PkScript)}
	}
	return out
}

// Verify runs every input through btcd's script engine with the standard
// verification flags, against the coins it spends.
func (t *Tx) Verify() error {
	fetcher := prevOutFetcher(t.coins)
	hashes := txscript.NewTxSigHashes(t.msg, fetcher)
	for i, c := range t.coins {
		vm, err := txscript.NewEngine(c.PkScript, t.msg, i, txscript.StandardVerifyFlags, nil, hashes, c.Value, fetcher)
		if err != nil {
			return fmt.Errorf("input %d: %w", i, err)
		}
		if err := vm.Execute(); err != nil {
			return fmt.Errorf("input %d: %w", i, err)
		}
	}
	return nil
}

// DecodeTx reads back a signed transaction this package built (its Raw
// bytes, as stored before broadcast) with the coins it spends, in any
// order. The signatures are verified. The change output is not known from
// the bytes alone: ChangeIndex is -1 (BumpFee finds change by its script).
func DecodeTx(raw []byte, coins []Coin) (*Tx, error) {
	msg := new(wire.MsgTx)
	r := bytes.NewReader(raw)
	if err := msg.Deserialize(r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTx, err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the transaction", ErrInvalidTx, r.Len())
	}
	if len(msg.TxIn) == 0 {
		return nil, fmt.Errorf("%w: no inputs", ErrInvalidTx)
	}
	byOutPoint := make(map[wire.OutPoint]Coin, len(coins))
	for _, c := range coins {
		byOutPoint[c.OutPoint] = c
	}
	ordered := make([]Coin, len(msg.TxIn))
	var in, out int64
	for i, txIn := range msg.TxIn {
		c, ok := byOutPoint[txIn.PreviousOutPoint]
		if !ok {
			return nil, fmt.Errorf("%w: input %d spends %v, which is not among the coins (or is spent twice)", ErrInvalidTx, i, txIn.PreviousOutPoint)
		}
		delete(byOutPoint, txIn.PreviousOutPoint)
		if c.Value <= 0 || c.Value > maxSatoshi-in {
			return nil, fmt.Errorf("%w: coin %v has value %d", ErrInvalidCoin, c.OutPoint, c.Value)
		}
		ordered[i] = c
		in += c.Value
	}
	if len(byOutPoint) != 0 {
		return nil, fmt.Errorf("%w: %d of the coins given are not spent by it", ErrInvalidTx, len(byOutPoint))
	}
	for _, o := range msg.TxOut {
		if o.Value < 0 || o.Value > in-out {
			return nil, fmt.Errorf("%w: outputs exceed the inputs' %d sats", ErrInvalidTx, in)
		}
		out += o.Value
	}
	tx := &Tx{msg: msg, coins: cloneCoins(ordered), fee: in - out, changeIndex: -1}
	if err := tx.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTx, err)
	}
	return tx, nil
}

// TxID is the transaction id (hash of the serialisation without witnesses).
func (t *Tx) TxID() chainhash.Hash { return t.msg.TxHash() }

// WTxID is the witness transaction id (BIP-141).
func (t *Tx) WTxID() chainhash.Hash { return t.msg.WitnessHash() }

// Raw is the full serialisation, witnesses included: what sendrawtransaction
// takes and what should be recorded before broadcasting.
func (t *Tx) Raw() []byte {
	var b bytes.Buffer
	b.Grow(t.msg.SerializeSize())
	_ = t.msg.Serialize(&b) // writes to a bytes.Buffer do not fail
	return b.Bytes()
}

// Weight is BIP-141's weight.
func (t *Tx) Weight() int64 { return txWeight(t.msg) }

// VSize is the virtual size in vbytes (weight / 4, rounded up), the size fee
// rates are per.
func (t *Tx) VSize() int64 { return vsizeOf(t.Weight()) }

// FeeVSize is the virtual size fees are reckoned on: VSize with every
// input's signature at its largest. BuildPayout pays FeeRate × FeeVSize
// (so the fee covers whatever length the signatures came out at), and a
// rate cap is compared against it the same way.
func (t *Tx) FeeVSize() int64 { return vsizeOf(estimateWeight(t.msg)) }

// Fee is inputs minus outputs, in sats.
func (t *Tx) Fee() int64 { return t.fee }

// FeeRate is the fee per vbyte of the signed transaction.
func (t *Tx) FeeRate() float64 { return float64(t.fee) / float64(t.VSize()) }

// ChangeIndex is the change output's index, or -1 if there is none (or it
// is unknown, for a decoded transaction).
func (t *Tx) ChangeIndex() int { return t.changeIndex }

// Change is the change output's value, or 0.
func (t *Tx) Change() int64 {
	if t.changeIndex < 0 {
		return 0
	}
	return t.msg.TxOut[t.changeIndex].Value
}

// Coins are the spent coins, in input order.
func (t *Tx) Coins() []Coin { return cloneCoins(t.coins) }

// MsgTx is a deep copy of the btcd transaction.
func (t *Tx) MsgTx() *wire.MsgTx { return t.msg.Copy() }
