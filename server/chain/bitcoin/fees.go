package bitcoin

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/btcsuite/btcd/txscript"
	"github.com/btcsuite/btcd/wire"
)

// Policy numbers, each Bitcoin Core's default unless said otherwise.
const (
	// MinFeeRate is the lowest fee rate accepted, in sat/vB: Core's default
	// -minrelaytxfee was 1 sat/vB for a decade; a lower rate risks a
	// transaction some nodes will not relay.
	MinFeeRate = 1
	// MaxFeeRate is the highest, in sat/vB: sendrawtransaction's default
	// maxfeerate (0.1 BTC/kvB). Above it the node would refuse the
	// transaction anyway, and a rate that high is more likely a unit
	// mistake (sat/kvB passed as sat/vB) than a wish.
	MaxFeeRate = 10_000
	// IncrementalRelayFeeRate is what a replacement must add per vbyte of
	// its own size on top of the fee it replaces (BIP-125 rule 4), in
	// sat/vB. Core 30 lowered its default to 0.1; 1 satisfies both.
	IncrementalRelayFeeRate = 1
	// MaxStandardTxWeight is the largest transaction weight nodes relay.
	MaxStandardTxWeight = 400_000
	// MaxPayouts bounds the outputs of one payout transaction: 1000 of the
	// largest kind (P2TR, 43 bytes) are ~43,000 vB, leaving room within
	// MaxStandardTxWeight for the inputs.
	MaxPayouts = 1000
	// dustRelayFeeRate is -dustrelayfee, in sat/kvB.
	dustRelayFeeRate = 3000
)

// DustThreshold is the smallest value an output with pkScript may carry
// under Bitcoin Core's default policy (GetDustThreshold at -dustrelayfee=3
// sat/vB): the output's own size plus the size of a typical input spending
// it, witness discounted for witness programs. That gives 546 sats for
// P2PKH, 540 for P2SH, 294 for P2WPKH and 330 for P2WSH and P2TR.
func DustThreshold(pkScript []byte) int64 {
	size := int64(wire.NewTxOut(0, pkScript).SerializeSize())
	if txscript.IsWitnessProgram(pkScript) {
		// outpoint, script length, a 107-byte witness at 1/4 weight, sequence
		size += 32 + 4 + 1 + 107/4 + 4
	} else {
		size += 32 + 4 + 1 + 107 + 4
	}
	return (size*dustRelayFeeRate + 999) / 1000
}

// txWeight is BIP-141's weight: base size × 3 + total size.
func txWeight(msg *wire.MsgTx) int64 {
	return int64(msg.SerializeSizeStripped()*3 + msg.SerializeSize())
}

// vsizeOf is BIP-141's virtual size: weight / 4, rounded up.
func vsizeOf(weight int64) int64 { return (weight + 3) / 4 }

// Placeholders for the largest P2WPKH witness: a DER signature with low S
// (btcec always signs low-S) is at most 71 bytes, plus the sighash byte; and
// a compressed public key.
var (
	maxSigPlaceholder    = make([]byte, 72)
	pubKeyPlaceholder    = make([]byte, 33)
	maxP2WPKHWitness     = wire.TxWitness{maxSigPlaceholder, pubKeyPlaceholder}
	largestOutputPayload = make([]byte, 34) // P2WSH and P2TR scripts
)

// estimateWeight is msg's weight once every input carries the largest
// P2WPKH witness; a signed msg weighs at most this, so a fee of rate ×
// vsizeOf(estimateWeight) always covers the signed transaction.
func estimateWeight(msg *wire.MsgTx) int64 {
	est := *msg
	est.TxIn = make([]*wire.TxIn, len(msg.TxIn))
	for i, in := range msg.TxIn {
		est.TxIn[i] = &wire.TxIn{PreviousOutPoint: in.PreviousOutPoint, Sequence: in.Sequence, Witness: maxP2WPKHWitness}
	}
	return txWeight(&est)
}

func checkFeeRate(rate int64) error {
	if rate < MinFeeRate || rate > MaxFeeRate {
		return fmt.Errorf("%w: %d sat/vB is outside %d..%d", ErrInvalidFeeRate, rate, MinFeeRate, MaxFeeRate)
	}
	return nil
}

// inputVSize is the virtual size one P2WPKH input adds at most.
func inputVSize() int64 {
	one := &wire.MsgTx{Version: txVersion, TxIn: []*wire.TxIn{{Witness: maxP2WPKHWitness}}}
	two := &wire.MsgTx{Version: txVersion, TxIn: []*wire.TxIn{{Witness: maxP2WPKHWitness}, {Witness: maxP2WPKHWitness}}}
	return vsizeOf(txWeight(two) - txWeight(one))
}

// SelectCoins picks which of coins fund payouts totalling target into
// nOutputs outputs at feeRate (sat/vB), for BuildPayout.
//
// Strategy: largest value first (ties broken by outpoint, so the choice is
// deterministic), skipping coins worth no more than the fee of spending
// them, until the selection pays target plus the fee of a transaction
// without change, each output estimated at the largest standard size
// (43 bytes). Largest-first keeps transactions small and fees low, and a
// faucet's coins are mostly its large funding outputs and change. What is
// left over becomes change in BuildPayout if it is at least dust after the
// change output's own fee; otherwise it goes to the fee, so no dust change
// is ever created. Given the returned coins, BuildPayout with nOutputs
// payouts totalling target at feeRate does not fail for lack of funds.
//
// The returned coins are in selection order. Not enough funds is an
// *InsufficientFundsError counting only the coins worth spending.
func SelectCoins(coins []Coin, target, feeRate int64, nOutputs int) ([]Coin, error) {
	if err := checkFeeRate(feeRate); err != nil {
		return nil, err
	}
	if target <= 0 || target > maxSatoshi {
		return nil, fmt.Errorf("%w: target of %d sats", ErrInvalidPayout, target)
	}
	if nOutputs < 1 || nOutputs > MaxPayouts {
		return nil, fmt.Errorf("%w: %d outputs, want 1..%d", ErrInvalidPayout, nOutputs, MaxPayouts)
	}
	inputFee := feeRate * inputVSize()
	candidates := make([]Coin, 0, len(coins))
	for _, c := range coins {
		if c.Value > inputFee && c.Value <= maxSatoshi {
			candidates = append(candidates, c)
		}
	}
	slices.SortFunc(candidates, func(a, b Coin) int {
		if c := cmp.Compare(b.Value, a.Value); c != 0 {
			return c
		}
		if c := bytes.Compare(a.OutPoint.Hash[:], b.OutPoint.Hash[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.OutPoint.Index, b.OutPoint.Index)
	})

	msg := &wire.MsgTx{Version: txVersion}
	for range nOutputs {
		msg.AddTxOut(wire.NewTxOut(0, largestOutputPayload))
	}
	var sum int64
	for i, c := range candidates {
		msg.AddTxIn(&wire.TxIn{Sequence: rbfSequence})
		sum += c.Value
		w := estimateWeight(msg)
		if w > MaxStandardTxWeight {
			return nil, fmt.Errorf("%w: funding %d sats takes more than the %d coins that fit in one standard transaction", ErrTxTooLarge, target, i)
		}
		if sum >= target+feeRate*vsizeOf(w) {
			return slices.Clone(candidates[:i+1]), nil
		}
	}
	return nil, &InsufficientFundsError{Needed: target + feeRate*vsizeOf(estimateWeight(msg)), Available: sum}
}
