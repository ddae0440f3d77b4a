package bitcoin

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/txscript"
)

func TestDustThreshold(t *testing.T) {
	// Bitcoin Core's well-known thresholds at the default 3 sat/vB.
	for s, want := range map[string]int64{regP2PKH: 546, regP2SH: 540, regP2WPKH: 294, regP2WSH: 330, regP2TR: 330} {
		if got := DustThreshold(addr(t, s).PkScript()); got != want {
			t.Errorf("%s: %d, want %d", addr(t, s).Type(), got, want)
		}
	}
}

func TestBuildPayout(t *testing.T) {
	key := testKey(t)
	coins := coinsFor(key, 150_000, 2_000_000)
	payouts := []Payout{
		{addr(t, regP2PKH), 10_000},
		{addr(t, regP2SH), 1_000_000},
		{addr(t, regP2WPKH), 50_000_000 / 100},
		{addr(t, regP2WSH), 330},
		{addr(t, regP2TR), 546},
	}
	const rate = 7
	tx, err := BuildPayout(BuildParams{Key: key, Coins: coins, Payouts: payouts, FeeRate: rate, LockTime: 4242})
	if err != nil {
		t.Fatal(err)
	}
	engineVerify(t, tx)
	msg := tx.MsgTx()

	if msg.Version != 2 || msg.LockTime != 4242 || len(msg.TxIn) != 2 || len(msg.TxOut) != 6 {
		t.Fatalf("shape: v%d lock %d %d in %d out", msg.Version, msg.LockTime, len(msg.TxIn), len(msg.TxOut))
	}
	for i, in := range msg.TxIn {
		if in.PreviousOutPoint != coins[i].OutPoint || in.Sequence >= 0xfffffffe || len(in.SignatureScript) != 0 || len(in.Witness) != 2 {
			t.Errorf("input %d: %v seq %x", i, in.PreviousOutPoint, in.Sequence)
		}
	}
	var out int64
	for i, po := range payouts {
		o := msg.TxOut[i]
		if o.Value != po.Amount || !bytes.Equal(o.PkScript, po.Address.PkScript()) {
			t.Errorf("output %d: %d %x", i, o.Value, o.PkScript)
		}
		out += o.Value
	}
	change := msg.TxOut[5]
	if tx.ChangeIndex() != 5 || tx.Change() != change.Value || !bytes.Equal(change.PkScript, key.Address().PkScript()) {
		t.Errorf("change: index %d value %d", tx.ChangeIndex(), change.Value)
	}
	out += change.Value

	// The fee is what the outputs leave, and covers the rate at the signed
	// size, which is computed here from the raw bytes (BIP-141).
	raw := tx.Raw()
	var stripped bytes.Buffer
	if err := msg.SerializeNoWitness(&stripped); err != nil {
		t.Fatal(err)
	}
	weight := int64(stripped.Len()*3 + len(raw))
	vsize := (weight + 3) / 4
	if tx.Weight() != weight || tx.VSize() != vsize {
		t.Errorf("weight %d vsize %d, want %d %d", tx.Weight(), tx.VSize(), weight, vsize)
	}
	if tx.Fee() != 2_150_000-out {
		t.Errorf("fee %d, inputs minus outputs %d", tx.Fee(), 2_150_000-out)
	}
	// At most one vbyte per input above the signed size: the estimate
	// assumes 72-byte signatures.
	if tx.Fee() < rate*vsize || tx.Fee() > rate*(vsize+int64(len(coins))) {
		t.Errorf("fee %d for %d vB at %d sat/vB", tx.Fee(), vsize, rate)
	}
	if tx.FeeRate() < rate {
		t.Errorf("fee rate %.2f", tx.FeeRate())
	}
	if fv := tx.FeeVSize(); fv < vsize || fv > vsize+int64(len(coins)) || tx.Fee() != rate*fv {
		t.Errorf("fee vsize %d (signed %d): fee %d, want %d × it", fv, vsize, tx.Fee(), rate)
	}

	// IDs: txid is the double SHA-256 of the stripped form, wtxid of all of it.
	if tx.TxID() != chainhash.DoubleHashH(stripped.Bytes()) || tx.WTxID() != chainhash.DoubleHashH(raw) || tx.TxID() == tx.WTxID() {
		t.Errorf("ids: %v %v", tx.TxID(), tx.WTxID())
	}

	// Every output is of a standard type.
	for i, o := range msg.TxOut {
		if c := txscript.GetScriptClass(o.PkScript); c == txscript.NonStandardTy {
			t.Errorf("output %d is non-standard", i)
		}
	}

	// The engine really checks: a changed output invalidates the signatures.
	bad := tx.MsgTx()
	bad.TxOut[0].Value++
	if err := engineCheck(bad, coins); err == nil {
		t.Fatal("engine accepted a transaction changed after signing")
	}
	// So does a wrong amount for a spent coin (BIP-143 commits to it).
	wrong := tx.Coins()
	wrong[1].Value--
	if err := engineCheck(tx.MsgTx(), wrong); err == nil {
		t.Fatal("engine accepted a signature over another amount")
	}
}

func TestBuildPayoutDefaultsAndChangeAddress(t *testing.T) {
	key := testKey(t)
	other, _ := GeneratePrivateKey(Regtest)
	tx, err := BuildPayout(BuildParams{
		Key: key, Coins: coinsFor(key, 100_000), FeeRate: 1,
		Payouts:       []Payout{{addr(t, regP2TR), 10_000}},
		ChangeAddress: other.Address(),
	})
	if err != nil {
		t.Fatal(err)
	}
	engineVerify(t, tx)
	m := tx.MsgTx()
	if !bytes.Equal(m.TxOut[1].PkScript, other.Address().PkScript()) || m.LockTime != 0 {
		t.Fatalf("change goes to %x", m.TxOut[1].PkScript)
	}
}

// The change output appears exactly when what is left after its own fee is
// at least dust; below that the remainder is fee.
func TestBuildPayoutChangeAtDust(t *testing.T) {
	key := testKey(t)
	payouts := []Payout{{addr(t, regP2WPKH), 20_000}}
	const rate = 3
	probe, err := BuildPayout(BuildParams{Key: key, Coins: coinsFor(key, 1_000_000), Payouts: payouts, FeeRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	feeWithChange := probe.Fee() // value-independent: sizes do not depend on amounts
	dust := DustThreshold(key.Address().PkScript())

	at, err := BuildPayout(BuildParams{Key: key, Coins: coinsFor(key, 20_000+feeWithChange+dust), Payouts: payouts, FeeRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	engineVerify(t, at)
	if at.ChangeIndex() != 1 || at.Change() != dust || at.Fee() != feeWithChange {
		t.Fatalf("at dust: change #%d %d fee %d", at.ChangeIndex(), at.Change(), at.Fee())
	}

	below, err := BuildPayout(BuildParams{Key: key, Coins: coinsFor(key, 20_000+feeWithChange+dust-1), Payouts: payouts, FeeRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	engineVerify(t, below)
	if below.ChangeIndex() != -1 || below.Change() != 0 || len(below.MsgTx().TxOut) != 1 || below.Fee() != feeWithChange+dust-1 {
		t.Fatalf("below dust: change #%d fee %d", below.ChangeIndex(), below.Fee())
	}
	if below.Fee() < rate*below.VSize() {
		t.Fatalf("fee %d below rate × %d vB", below.Fee(), below.VSize())
	}
}

func TestBuildPayoutInsufficientFunds(t *testing.T) {
	key := testKey(t)
	payouts := []Payout{{addr(t, regP2WPKH), 20_000}}
	build := func(values ...int64) (*Tx, error) {
		return BuildPayout(BuildParams{Key: key, Coins: coinsFor(key, values...), Payouts: payouts, FeeRate: 2})
	}
	// The least coin that pays: every smaller one is refused.
	lo, hi := int64(20_000), int64(21_000)
	for lo < hi {
		mid := (lo + hi) / 2
		if _, err := build(mid); err != nil {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	least, err := build(lo)
	if err != nil {
		t.Fatal(err)
	}
	engineVerify(t, least)
	if least.Fee() != lo-20_000 || least.Fee() < 2*least.VSize() || least.Fee() > 2*(least.VSize()+1) {
		t.Fatalf("least fee %d for %d vB", least.Fee(), least.VSize())
	}
	_, err = build(lo - 1)
	var ife *InsufficientFundsError
	if !errors.As(err, &ife) || !errors.Is(err, ErrInsufficientFunds) || ife.Available != lo-1 || ife.Needed != lo {
		t.Fatalf("one sat short: %v", err)
	}
	if !strings.Contains(err.Error(), "need") {
		t.Errorf("message: %v", err)
	}
	// Split over two coins the same total is short: a second input costs fee.
	_, err = build(10_000, lo-10_000)
	if !errors.As(err, &ife) || ife.Available != lo || ife.Needed <= lo {
		t.Fatalf("two inputs: %v", err)
	}
}

func TestBuildPayoutRefusals(t *testing.T) {
	key := testKey(t)
	coins := coinsFor(key, 1_000_000)
	ok := []Payout{{addr(t, regP2WPKH), 10_000}}
	signetAddr, _ := ParseAddress("tb1q3vya2h5435jkugq2few7dmktlrwq4ejmfaw7kr", Signet)
	foreign, _ := GeneratePrivateKey(Regtest)
	foreignCoin := coinsFor(foreign, 50_000)
	tooMany := make([]Payout, MaxPayouts+1)
	for i := range tooMany {
		tooMany[i] = Payout{addr(t, regP2WPKH), 1000}
	}
	for name, c := range map[string]struct {
		p    BuildParams
		kind error
	}{
		"zero amount":       {BuildParams{Payouts: []Payout{{addr(t, regP2WPKH), 0}}}, ErrInvalidPayout},
		"negative amount":   {BuildParams{Payouts: []Payout{{addr(t, regP2WPKH), -5}}}, ErrInvalidPayout},
		"p2pkh dust":        {BuildParams{Payouts: []Payout{{addr(t, regP2PKH), 545}}}, ErrInvalidPayout},
		"p2sh dust":         {BuildParams{Payouts: []Payout{{addr(t, regP2SH), 539}}}, ErrInvalidPayout},
		"p2wpkh dust":       {BuildParams{Payouts: []Payout{{addr(t, regP2WPKH), 293}}}, ErrInvalidPayout},
		"p2wsh dust":        {BuildParams{Payouts: []Payout{{addr(t, regP2WSH), 329}}}, ErrInvalidPayout},
		"p2tr dust":         {BuildParams{Payouts: []Payout{{addr(t, regP2TR), 329}}}, ErrInvalidPayout},
		"above 21M BTC":     {BuildParams{Payouts: []Payout{{addr(t, regP2TR), 21e14 + 1}}}, ErrInvalidPayout},
		"no payouts":        {BuildParams{Payouts: nil}, ErrInvalidPayout},
		"too many payouts":  {BuildParams{Payouts: tooMany}, ErrInvalidPayout},
		"zero address":      {BuildParams{Payouts: []Payout{{Address{}, 10_000}}}, ErrInvalidPayout},
		"other network":     {BuildParams{Payouts: []Payout{{signetAddr, 10_000}}}, ErrInvalidPayout},
		"to change address": {BuildParams{Payouts: []Payout{{key.Address(), 10_000}}}, ErrInvalidPayout},
		"zero fee rate":     {BuildParams{FeeRate: -1}, ErrInvalidFeeRate},
		"huge fee rate":     {BuildParams{FeeRate: MaxFeeRate + 1}, ErrInvalidFeeRate},
		"no coins":          {BuildParams{Coins: []Coin{}}, ErrInvalidCoin},
		"foreign coin":      {BuildParams{Coins: foreignCoin}, ErrInvalidCoin},
		"duplicate coin":    {BuildParams{Coins: []Coin{coins[0], coins[0]}}, ErrInvalidCoin},
		"zero-value coin":   {BuildParams{Coins: coinsFor(key, 0)}, ErrInvalidCoin},
		"change on signet":  {BuildParams{ChangeAddress: signetAddr}, nil},
		"no key":            {BuildParams{Key: &PrivateKey{}}, nil},
	} {
		p := c.p
		if p.Key == nil {
			p.Key = key
		} else {
			p.Key = nil
		}
		if p.Coins == nil {
			p.Coins = coins
		}
		if p.Payouts == nil && name != "no payouts" {
			p.Payouts = ok
		}
		switch p.FeeRate {
		case 0:
			p.FeeRate = 2
		case -1:
			p.FeeRate = 0
		}
		tx, err := BuildPayout(p)
		if err == nil || tx != nil || (c.kind != nil && !errors.Is(err, c.kind)) {
			t.Errorf("%s: %v, want %v", name, err, c.kind)
		}
	}
	// Dust thresholds are inclusive.
	for _, s := range []struct {
		a   string
		min int64
	}{{regP2PKH, 546}, {regP2SH, 540}, {regP2WPKH, 294}, {regP2WSH, 330}, {regP2TR, 330}} {
		tx, err := BuildPayout(BuildParams{Key: key, Coins: coins, FeeRate: 1, Payouts: []Payout{{addr(t, s.a), s.min}}})
		if err != nil {
			t.Errorf("%s at %d: %v", s.a, s.min, err)
			continue
		}
		engineVerify(t, tx)
	}
}

func TestBuildPayoutManyOutputsAndInputs(t *testing.T) {
	key := testKey(t)
	payouts := make([]Payout, MaxPayouts)
	kinds := []string{regP2PKH, regP2SH, regP2WPKH, regP2WSH, regP2TR}
	var total int64
	for i := range payouts {
		payouts[i] = Payout{addr(t, kinds[i%len(kinds)]), int64(1000 + i)}
		total += int64(1000 + i)
	}
	values := make([]int64, 40)
	for i := range values {
		values[i] = total/30 + int64(i)
	}
	tx, err := BuildPayout(BuildParams{Key: key, Coins: coinsFor(key, values...), Payouts: payouts, FeeRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	engineVerify(t, tx)
	if tx.Weight() > MaxStandardTxWeight || len(tx.MsgTx().TxOut) != MaxPayouts+1 {
		t.Fatalf("weight %d, %d outputs", tx.Weight(), len(tx.MsgTx().TxOut))
	}
}

func TestBuildPayoutTooLarge(t *testing.T) {
	key := testKey(t)
	values := make([]int64, 1500) // ~1500 × 68 vB is past 100,000 vB
	for i := range values {
		values[i] = 10_000
	}
	_, err := BuildPayout(BuildParams{Key: key, Coins: coinsFor(key, values...), Payouts: []Payout{{addr(t, regP2TR), 1_000_000}}, FeeRate: 1})
	if !errors.Is(err, ErrTxTooLarge) {
		t.Fatalf("%v", err)
	}
}

func TestDecodeTx(t *testing.T) {
	key := testKey(t)
	coins := coinsFor(key, 300_000, 40_000, 7_000)
	tx, err := BuildPayout(BuildParams{Key: key, Coins: coins, Payouts: []Payout{{addr(t, regP2WSH), 250_000}, {addr(t, regP2PKH), 60_000}}, FeeRate: 5})
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(coins)
	slices.Reverse(reversed)
	back, err := DecodeTx(tx.Raw(), reversed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Raw(), tx.Raw()) || back.Fee() != tx.Fee() || back.TxID() != tx.TxID() || back.ChangeIndex() != -1 {
		t.Fatalf("decoded: fee %d id %v", back.Fee(), back.TxID())
	}
	for i, c := range back.Coins() {
		if c.OutPoint != coins[i].OutPoint {
			t.Fatalf("coins not in input order")
		}
	}
	raw := tx.Raw()
	for name, c := range map[string]struct {
		raw   []byte
		coins []Coin
	}{
		"trailing byte": {append(slices.Clone(raw), 0), coins},
		"truncated":     {raw[:len(raw)-1], coins},
		"missing coin":  {raw, coins[:2]},
		"extra coin":    {raw, append(slices.Clone(coins), coinsFor(key, 1, 2, 3, 9)[3])},
		"wrong amount":  {raw, []Coin{coins[0], coins[1], {coins[2].OutPoint, 7_001, coins[2].PkScript}}},
		"low amount":    {raw, []Coin{coins[0], coins[1], {coins[2].OutPoint, 1, coins[2].PkScript}}},
		"empty":         {nil, nil},
	} {
		if _, err := DecodeTx(c.raw, c.coins); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A signature changed in storage is caught.
	bad := slices.Clone(raw)
	i := bytes.Index(bad, tx.MsgTx().TxIn[0].Witness[0][10:20])
	bad[i] ^= 1
	if _, err := DecodeTx(bad, coins); !errors.Is(err, ErrInvalidTx) {
		t.Errorf("corrupted signature: %v", err)
	}
}
