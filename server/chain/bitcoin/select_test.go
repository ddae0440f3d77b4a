package bitcoin

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestSelectCoinsLargestFirst(t *testing.T) {
	key := testKey(t)
	coins := coinsFor(key, 5_000, 80_000, 300_000, 20_000, 300_000)
	got, err := SelectCoins(coins, 350_000, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Value != 300_000 || got[1].Value != 300_000 {
		t.Fatalf("selected %v", values(got))
	}
	// Ties are broken by outpoint, so the order does not depend on input order.
	again, _ := SelectCoins([]Coin{coins[4], coins[3], coins[2], coins[1], coins[0]}, 350_000, 2, 1)
	if again[0].OutPoint != got[0].OutPoint || again[1].OutPoint != got[1].OutPoint {
		t.Fatal("selection depends on the order of the coins")
	}
	one, err := SelectCoins(coins, 100_000, 2, 1)
	if err != nil || len(one) != 1 || one[0].Value != 300_000 {
		t.Fatalf("one coin suffices: %v %v", values(one), err)
	}
}

func TestSelectCoinsSkipsUneconomicCoins(t *testing.T) {
	key := testKey(t)
	// At 10 sat/vB an input costs ~680 sats: the 600-sat coins cost more
	// than they bring.
	coins := coinsFor(key, 600, 600, 600, 50_000)
	_, err := SelectCoins(coins, 49_500, 10, 1)
	var ife *InsufficientFundsError
	if !errors.As(err, &ife) || ife.Available != 50_000 {
		t.Fatalf("%v", err)
	}
	got, err := SelectCoins(coins, 40_000, 10, 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("%v %v", values(got), err)
	}
}

func TestSelectCoinsRefusals(t *testing.T) {
	key := testKey(t)
	coins := coinsFor(key, 100_000)
	for name, err := range map[string]error{
		"zero target":    errOnly(SelectCoins(coins, 0, 1, 1)),
		"zero outputs":   errOnly(SelectCoins(coins, 1000, 1, 0)),
		"too many":       errOnly(SelectCoins(coins, 1000, 1, MaxPayouts+1)),
		"zero rate":      errOnly(SelectCoins(coins, 1000, 0, 1)),
		"no coins":       errOnly(SelectCoins(nil, 1000, 1, 1)),
		"not enough":     errOnly(SelectCoins(coins, 100_000, 1, 1)),
		"too many coins": errOnly(SelectCoins(coinsFor(key, repeat(10_000, 2000)...), 19_000_000, 1, 1)),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if !errors.Is(errOnly(SelectCoins(coinsFor(key, repeat(10_000, 2000)...), 19_000_000, 1, 1)), ErrTxTooLarge) {
		t.Error("too many coins should be ErrTxTooLarge")
	}
	if !errors.Is(errOnly(SelectCoins(coins, 100_000, 1, 1)), ErrInsufficientFunds) {
		t.Error("not enough should be ErrInsufficientFunds")
	}
}

// Whatever SelectCoins returns funds BuildPayout for those payouts, the
// result verifies, and change is either absent or not dust. With P2TR
// payouts (the size SelectCoins assumes) the selection is also minimal:
// one coin fewer is not enough.
func TestSelectCoinsFundsBuildPayout(t *testing.T) {
	key := testKey(t)
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{regP2PKH, regP2SH, regP2WPKH, regP2WSH, regP2TR}
	built := 0
	for round := range 300 {
		coinValues := make([]int64, 1+rng.IntN(12))
		for i := range coinValues {
			coinValues[i] = 500 + rng.Int64N(200_000)
		}
		coins := coinsFor(key, coinValues...)
		allP2TR := round%2 == 0
		payouts := make([]Payout, 1+rng.IntN(6))
		var target int64
		for i := range payouts {
			kind := kinds[rng.IntN(len(kinds))]
			if allP2TR {
				kind = regP2TR
			}
			payouts[i] = Payout{addr(t, kind), 546 + rng.Int64N(60_000)}
			target += payouts[i].Amount
		}
		rate := 1 + rng.Int64N(40)
		sel, err := SelectCoins(coins, target, rate, len(payouts))
		if errors.Is(err, ErrInsufficientFunds) {
			// Then not even all coins can pay it.
			if _, err := BuildPayout(BuildParams{Key: key, Coins: coins, Payouts: payouts, FeeRate: rate}); err == nil && allP2TR {
				t.Fatalf("round %d: SelectCoins says insufficient but all coins pay", round)
			}
			continue
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		tx, err := BuildPayout(BuildParams{Key: key, Coins: sel, Payouts: payouts, FeeRate: rate})
		if err != nil {
			t.Fatalf("round %d: selected %v for %d at %d sat/vB: %v", round, values(sel), target, rate, err)
		}
		engineVerify(t, tx)
		built++
		if tx.ChangeIndex() >= 0 && tx.Change() < DustThreshold(key.Address().PkScript()) {
			t.Fatalf("round %d: dust change %d", round, tx.Change())
		}
		if allP2TR && len(sel) > 1 {
			if _, err := BuildPayout(BuildParams{Key: key, Coins: sel[:len(sel)-1], Payouts: payouts, FeeRate: rate}); !errors.Is(err, ErrInsufficientFunds) {
				t.Fatalf("round %d: selection of %d coins is not minimal: %v", round, len(sel), err)
			}
		}
	}
	if built < 100 {
		t.Fatalf("only %d of 300 rounds built a transaction", built)
	}
}

func values(coins []Coin) []int64 {
	v := make([]int64, len(coins))
	for i, c := range coins {
		v[i] = c.Value
	}
	return v
}

func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func errOnly(_ []Coin, err error) error { return err }
