package bitcoin

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/txscript"
)

// FuzzParseAddress: no input panics; every refusal is an *AddressError of a
// known kind; anything accepted re-parses from its String to the same
// Address, has a standard script of its type, and is in canonical case.
func FuzzParseAddress(f *testing.F) {
	for _, v := range validAddresses {
		f.Add(v.addr, uint8(v.net))
	}
	for _, s := range []string{
		"BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4", "1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo",
		"bc1gmk9yu", "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sL5k7",
		"bcrt1sx6p8njlx7h9mc2agz4yg82dzne23050ncq72cneeecez2pst8mahn8xecsf8g6hzx94420",
		"", "1", "bcrt1", "tb1", "2", "m", "\x00", "bcrt1\xff",
	} {
		f.Add(s, uint8(Regtest))
	}
	kinds := []error{ErrNotAddress, ErrBadChecksum, ErrMainnet, ErrWrongNetwork, ErrUnsupportedAddress}
	classes := map[AddressType]txscript.ScriptClass{
		P2PKH: txscript.PubKeyHashTy, P2SH: txscript.ScriptHashTy, P2WPKH: txscript.WitnessV0PubKeyHashTy,
		P2WSH: txscript.WitnessV0ScriptHashTy, P2TR: txscript.WitnessV1TaprootTy,
	}
	f.Fuzz(func(t *testing.T, s string, n uint8) {
		net := Network(n%3 + 1)
		a, err := ParseAddress(s, net)
		if err != nil {
			var ae *AddressError
			if !errors.As(err, &ae) || !slices.ContainsFunc(kinds, func(k error) bool { return errors.Is(ae.Kind, k) }) || !a.IsZero() {
				t.Fatalf("%q: %v (%T)", s, err, err)
			}
			return
		}
		again, err := ParseAddress(a.String(), net)
		if err != nil || again != a {
			t.Fatalf("%q → %q → %v", s, a.String(), err)
		}
		if got := txscript.GetScriptClass(a.PkScript()); got != classes[a.Type()] || a.Network() != net {
			t.Fatalf("%q: %v script %x class %v", s, a.Type(), a.PkScript(), got)
		}
		// A segwit address keeps its spelling, lower-cased; only a tb1…
		// on regtest is re-spelled, to bcrt1… with the same program.
		in := strings.ToLower(strings.TrimSpace(s))
		if a.Type() >= P2WPKH && a.String() != in {
			if net != Regtest || !strings.HasPrefix(in, "tb1") || !strings.HasPrefix(a.String(), "bcrt1") ||
				in[3:len(in)-6] != a.String()[5:len(a.String())-6] {
				t.Fatalf("%q: canonical %q", s, a.String())
			}
		}
	})
}

// FuzzParsePrivateKey: no input panics, errors never quote the input, and
// an accepted key round-trips through WIF.
func FuzzParsePrivateKey(f *testing.F) {
	for _, v := range wifVectors {
		f.Add(v.wif)
		f.Add(v.hex)
	}
	f.Add("L5nJeqKmpHp4P7F8ZYyjwc5a7P4d8EabuGAzfGJk7yC1BJyzNaEd")
	f.Add("91mn1wYKEB1zyof1VFm8tMtocZx1oBrKKRCu9GCpgZvPmBLEJjp")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePrivateKey(s, Regtest)
		if err != nil {
			if in := strings.TrimSpace(s); len(in) >= 8 && strings.Contains(err.Error(), in) {
				t.Fatalf("error quotes the input: %v", err)
			}
			return
		}
		back, err := ParsePrivateKey(k.WIF(), Regtest)
		if err != nil || back.Hex() != k.Hex() {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// FuzzDecodeTx: no input panics, and whatever decodes (against the coins of
// a real payout) re-serialises to exactly the input.
func FuzzDecodeTx(f *testing.F) {
	key := testKey(f)
	coins := coinsFor(key, 100_000, 30_000)
	tx, err := BuildPayout(BuildParams{Key: key, Coins: coins, FeeRate: 3, Payouts: []Payout{{addr(f, regP2TR), 50_000}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tx.Raw())
	f.Add([]byte{})
	f.Add(tx.Raw()[:40])
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := DecodeTx(raw, coins)
		if err != nil {
			return
		}
		if !bytes.Equal(d.Raw(), raw) {
			t.Fatalf("re-serialised differently")
		}
		engineVerify(t, d)
	})
}
