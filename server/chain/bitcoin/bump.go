package bitcoin

import (
	"bytes"
	"errors"
	"fmt"
)

// BumpError says why a replacement could not be paid for from the change.
type BumpError struct {
	Needed          int64 // sats the replacement must add to the fee
	ChangeAvailable int64 // sats of change there were to take it from
}

func (e *BumpError) Error() string {
	if e.ChangeAvailable == 0 {
		return fmt.Sprintf("cannot bump fee: the replacement needs %d more sats and there is no change output to take them from", e.Needed)
	}
	return fmt.Sprintf("cannot bump fee: the replacement needs %d more sats, the change has only %d", e.Needed, e.ChangeAvailable)
}

// Is makes errors.Is(err, ErrCannotBump) true.
func (e *BumpError) Is(target error) bool { return target == ErrCannotBump }

// BumpParams is what BumpFee needs.
type BumpParams struct {
	Key *PrivateKey
	// Tx is the transaction to replace, from BuildPayout or DecodeTx.
	Tx *Tx
	// ChangeAddress is the change output's address; the zero Address means
	// Key's own. Change is the last output, if it pays this address.
	ChangeAddress Address
	// FeeRate is the new rate in sat/vB. The replacement pays at least
	// this, and at least what BIP-125 requires of a replacement.
	FeeRate int64
}

// BumpFee builds a replacement for p.Tx (BIP-125): the same inputs, the
// same payouts, the same version and lock time, re-signed, with the fee
// raised to max(FeeRate × vsize, old fee + IncrementalRelayFeeRate ×
// vsize), the difference taken from the change. If the change left would
// be dust the change output is dropped and all of it goes to the fee. When
// the change cannot cover the increase (or there is none) the error is a
// *BumpError; adding inputs is the caller's decision, not this function's.
func BumpFee(p BumpParams) (*Tx, error) {
	if p.Key == nil || p.Tx == nil {
		return nil, errors.New("bump fee: no key or no transaction")
	}
	changeScript, err := changeScriptFor(p.Key, p.ChangeAddress)
	if err != nil {
		return nil, err
	}
	if err := checkFeeRate(p.FeeRate); err != nil {
		return nil, err
	}
	if _, err := checkCoins(p.Tx.coins, p.Key); err != nil {
		return nil, err
	}
	msg := p.Tx.msg.Copy()
	for _, in := range msg.TxIn {
		in.Witness = nil
		in.SignatureScript = nil
	}
	last := len(msg.TxOut) - 1
	if last < 0 || !bytes.Equal(msg.TxOut[last].PkScript, changeScript) {
		vsize := vsizeOf(estimateWeight(msg))
		return nil, &BumpError{Needed: bumpedFee(p.Tx.fee, p.FeeRate, vsize) - p.Tx.fee}
	}
	change := msg.TxOut[last].Value
	// The replacement has the same shape, so the same size estimate.
	vsize := vsizeOf(estimateWeight(msg))
	extra := bumpedFee(p.Tx.fee, p.FeeRate, vsize) - p.Tx.fee
	changeIndex := last
	switch left := change - extra; {
	case left >= DustThreshold(changeScript):
		msg.TxOut[last].Value = left
	case left >= 0:
		// Dropping the output shrinks the transaction, so the higher fee
		// still meets both requirements at the smaller size.
		msg.TxOut = msg.TxOut[:last]
		extra = change
		changeIndex = -1
	default:
		return nil, &BumpError{Needed: extra, ChangeAvailable: change}
	}
	return finish(msg, p.Tx.coins, p.Key, p.Tx.fee+extra, changeIndex, p.FeeRate)
}

// bumpedFee is the least fee a replacement of vsize vbytes must pay: the
// requested rate, and the replaced fee plus the incremental relay fee for
// the replacement's own size (BIP-125 rules 3 and 4).
func bumpedFee(oldFee, rate, vsize int64) int64 {
	return max(rate*vsize, oldFee+IncrementalRelayFeeRate*vsize)
}
