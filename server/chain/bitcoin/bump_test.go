package bitcoin

import (
	"bytes"
	"errors"
	"testing"
)

func buildForBump(t *testing.T, key *PrivateKey, coinValue int64, rate int64) *Tx {
	t.Helper()
	tx, err := BuildPayout(BuildParams{
		Key: key, Coins: coinsFor(key, coinValue, 50_000), FeeRate: rate, LockTime: 321,
		Payouts: []Payout{{addr(t, regP2WPKH), 40_000}, {addr(t, regP2TR), 25_000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// samePayouts checks what a replacement must keep: inputs (order and
// sequence), version, lock time and every payout output.
func samePayouts(t *testing.T, old, repl *Tx, payouts int) {
	t.Helper()
	o, r := old.MsgTx(), repl.MsgTx()
	if r.Version != o.Version || r.LockTime != o.LockTime || len(r.TxIn) != len(o.TxIn) {
		t.Fatal("version, lock time or inputs changed")
	}
	for i := range o.TxIn {
		if r.TxIn[i].PreviousOutPoint != o.TxIn[i].PreviousOutPoint || r.TxIn[i].Sequence != o.TxIn[i].Sequence {
			t.Fatalf("input %d changed", i)
		}
	}
	for i := range payouts {
		if r.TxOut[i].Value != o.TxOut[i].Value || !bytes.Equal(r.TxOut[i].PkScript, o.TxOut[i].PkScript) {
			t.Fatalf("payout %d changed", i)
		}
	}
}

func TestBumpFee(t *testing.T) {
	key := testKey(t)
	old := buildForBump(t, key, 100_000, 2)
	repl, err := BumpFee(BumpParams{Key: key, Tx: old, FeeRate: 20})
	if err != nil {
		t.Fatal(err)
	}
	engineVerify(t, repl)
	samePayouts(t, old, repl, 2)
	if repl.TxID() == old.TxID() || repl.ChangeIndex() != 2 {
		t.Fatal("not a new transaction with change")
	}
	// The change paid for the whole increase.
	if repl.Change() != old.Change()-(repl.Fee()-old.Fee()) {
		t.Fatalf("change %d → %d, fee %d → %d", old.Change(), repl.Change(), old.Fee(), repl.Fee())
	}
	// BIP-125 rules 3, 4 and 6, and the requested rate.
	if repl.Fee() < old.Fee()+IncrementalRelayFeeRate*repl.VSize() || repl.Fee() < 20*repl.VSize() || repl.FeeRate() <= old.FeeRate() {
		t.Fatalf("fee %d (%.1f sat/vB) replacing %d", repl.Fee(), repl.FeeRate(), old.Fee())
	}
}

// Asking for the same (or a lower) rate still yields a valid replacement:
// the old fee plus the incremental relay fee for the new size.
func TestBumpFeeMinimum(t *testing.T) {
	key := testKey(t)
	old := buildForBump(t, key, 100_000, 10)
	repl, err := BumpFee(BumpParams{Key: key, Tx: old, FeeRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	engineVerify(t, repl)
	// Exactly the minimum, at the size the fee was computed for.
	if repl.Fee() != old.Fee()+IncrementalRelayFeeRate*vsizeOf(estimateWeight(repl.msg)) {
		t.Fatalf("fee %d replacing %d", repl.Fee(), old.Fee())
	}
	if repl.Fee()-old.Fee() < repl.VSize() {
		t.Fatalf("increase %d below %d vB × 1 sat/vB", repl.Fee()-old.Fee(), repl.VSize())
	}
	// Bumping the replacement again works the same way.
	again, err := BumpFee(BumpParams{Key: key, Tx: repl, FeeRate: 1})
	if err != nil || again.Fee() < repl.Fee()+again.VSize() {
		t.Fatalf("second bump: %v", err)
	}
	engineVerify(t, again)
}

func TestBumpFeeDropsDustChange(t *testing.T) {
	key := testKey(t)
	old := buildForBump(t, key, 100_000, 2)
	// Raise the rate until the change left would be dust: up to there the
	// change shrinks, then it is dropped and all of it is fee.
	dust := DustThreshold(key.Address().PkScript())
	var repl *Tx
	var rate int64
	for rate = 3; rate < 2000; rate++ {
		r, err := BumpFee(BumpParams{Key: key, Tx: old, FeeRate: rate})
		if err != nil {
			t.Fatalf("rate %d: %v", rate, err)
		}
		if r.ChangeIndex() == -1 {
			repl = r
			break
		}
		if r.Change() < dust {
			t.Fatalf("rate %d: dust change %d", rate, r.Change())
		}
	}
	if repl == nil {
		t.Fatal("the change was never dropped")
	}
	engineVerify(t, repl)
	samePayouts(t, old, repl, 2)
	if repl.ChangeIndex() != -1 || len(repl.MsgTx().TxOut) != 2 || repl.Fee() != old.Fee()+old.Change() {
		t.Fatalf("change #%d, fee %d", repl.ChangeIndex(), repl.Fee())
	}
	if repl.Fee() < rate*repl.VSize() {
		t.Fatalf("fee %d below %d × %d", repl.Fee(), rate, repl.VSize())
	}
}

func TestBumpFeeCannotAbsorb(t *testing.T) {
	key := testKey(t)
	old := buildForBump(t, key, 100_000, 2)
	_, err := BumpFee(BumpParams{Key: key, Tx: old, FeeRate: 2000})
	var be *BumpError
	if !errors.As(err, &be) || !errors.Is(err, ErrCannotBump) || be.ChangeAvailable != old.Change() || be.Needed <= old.Change() {
		t.Fatalf("%v", err)
	}
	// Without a change output there is nothing to take from.
	noChange, err := BuildPayout(BuildParams{Key: key, Coins: coinsFor(key, 65_300), FeeRate: 1,
		Payouts: []Payout{{addr(t, regP2WPKH), 40_000}, {addr(t, regP2TR), 25_000}}})
	if err != nil || noChange.ChangeIndex() != -1 {
		t.Fatalf("%v", err)
	}
	_, err = BumpFee(BumpParams{Key: key, Tx: noChange, FeeRate: 2})
	if !errors.As(err, &be) || be.ChangeAvailable != 0 || be.Needed <= 0 {
		t.Fatalf("no change: %v", err)
	}
}

// After a restart the engine has only the recorded bytes and the coins:
// bumping the decoded transaction gives exactly the same replacement
// (RFC 6979 signatures are deterministic).
func TestBumpFeeDecoded(t *testing.T) {
	key := testKey(t)
	old := buildForBump(t, key, 100_000, 2)
	decoded, err := DecodeTx(old.Raw(), old.Coins())
	if err != nil {
		t.Fatal(err)
	}
	a, err := BumpFee(BumpParams{Key: key, Tx: old, FeeRate: 9})
	if err != nil {
		t.Fatal(err)
	}
	b, err := BumpFee(BumpParams{Key: key, Tx: decoded, FeeRate: 9})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Raw(), b.Raw()) || b.ChangeIndex() != 2 {
		t.Fatal("bumping the decoded transaction differs")
	}
}

func TestBumpFeeRefusals(t *testing.T) {
	key := testKey(t)
	old := buildForBump(t, key, 100_000, 2)
	other, _ := GeneratePrivateKey(Regtest)
	for name, p := range map[string]BumpParams{
		"no key":         {Tx: old, FeeRate: 5},
		"no tx":          {Key: key, FeeRate: 5},
		"zero rate":      {Key: key, Tx: old},
		"huge rate":      {Key: key, Tx: old, FeeRate: MaxFeeRate + 1},
		"another key":    {Key: other, Tx: old, FeeRate: 5},
		"another change": {Key: key, Tx: old, FeeRate: 5, ChangeAddress: other.Address()},
	} {
		if tx, err := BumpFee(p); err == nil || tx != nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
