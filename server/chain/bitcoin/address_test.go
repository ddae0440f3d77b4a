package bitcoin

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil"
	"github.com/btcsuite/btcd/btcutil/bech32"
	"github.com/btcsuite/btcd/txscript"
)

// Valid addresses with their output scripts: regtest, signet and testnet
// entries of Bitcoin Core's src/test/data/key_io_valid.json (its "testnet4"
// entries are tb1/m/n/2 like testnet3's), and BIP-173/BIP-350 test vectors.
var validAddresses = []struct {
	net    Network
	addr   string
	script string
	typ    AddressType
}{
	{Regtest, "bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9", "00146f58bac9506f9bfb821d62e69330410bb56f0085", P2WPKH},
	{Regtest, "bcrt1qan8gntac7z7me2ejt4hpru42ad2f759fmy0m3ejvs98656znv7eqga4uhv", "0020ecce89afb8f0bdbcab325d6e11f2aaeb549f50a9d91fb8e64c814faa685367b2", P2WSH},
	{Regtest, "bcrt1pfwxjqvtt4tcxrtdluukfmy2dv7xd2qzdfy6kajv5nwn4yam3wxkq3553uh", "51204b8d20316baaf061adbfe72c9d914d678cd5004d49356ec9949ba752777171ac", P2TR},
	{Regtest, "bcrt1q65nhlm4hf2ptg3t264al57p7wjxj2c3s6kyt83", "0014d5277feeb74a82b4456ad57bfa783e748d256230", P2WPKH},
	{Regtest, "n4fajahJrAuKbN7uNsKjLjQkz9Qn5ewJXQ", "76a914fdeca3b08e38af53d7c4c60e3ad208ce5066441088ac", P2PKH},
	{Regtest, "2MxFajLApXpYk4VodBSZSt7rw8y4ryABkfA", "a91436e9f191e0b75036a77f65e2eaa4752443233fbe87", P2SH},
	{Regtest, "mfhE6jAUwjUDNZhaX1PAsDTKfneQF2Nshc", "76a91401f15a4cc063dae4f4d56b89bfbc8bcc9ae5387c88ac", P2PKH},
	{Signet, "tb1q3vya2h5435jkugq2few7dmktlrwq4ejmfaw7kr", "00148b09d55e958d256e200a4e5de6eecbf8dc0ae65b", P2WPKH},
	{Signet, "tb1qxkhrl2s6ttrclckldruea0e8anhrehffl8xv7t0pdyrzm08v2hyqy408nf", "002035ae3faa1a5ac78fe2df68f99ebf27ecee3cdd29f9cccf2de169062dbcec55c8", P2WSH},
	{Signet, "tb1pae5um27ahn8n73pgexe3kcwlp8dhswpn684h2k2w6t9a7w3eq65qephd5y", "5120ee69cdabddbccf3f4428c9b31b61df09db783833d1eb75594ed2cbdf3a3906a8", P2TR},
	{Signet, "mww4LvqtTMKvmeQvizPz2EQv26xTneWrbg", "76a914b4110ba93ac54afc14da3bdd19614774a2d55d2988ac", P2PKH},
	{Signet, "2N1r7aC69VHeE7yQJPDLi9T1PYq4wnwvjuT", "a9145e5a35ab44b3efaea5129ba22b88ba3e2976614587", P2SH},
	{Testnet, "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7", "00201863143c14c5166804bd19203356da136c985678cd4d27a1b8c6329604903262", P2WSH},
	{Testnet, "tb1qqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesrxh6hy", "0020000000c4a5cad46221b2a187905e5266362b99d5e91c6ce24d165dab93e86433", P2WSH},
	{Testnet, "tb1pqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesf3hn0c", "5120000000c4a5cad46221b2a187905e5266362b99d5e91c6ce24d165dab93e86433", P2TR},
	{Testnet, "tb1qcrh3yqn4nlleplcez2yndq2ry8h9ncg3qh7n54", "0014c0ef1202759fff90ff19128936814321ee59e111", P2WPKH},
	{Testnet, "mzK2FFDEhxqHcmrJw1ysqFkVyhUULo45hZ", "76a914ce28b26c57472737f5c3561a1761185bd8589a4388ac", P2PKH},
	{Testnet, "2NC2hEhe28ULKAJkW5MjZ3jtTMJdvXmByvK", "a914ce0bba75891ff9ec60148d4bd4a09ee2dc5c933187", P2SH},
}

func TestParseAddressValid(t *testing.T) {
	for _, v := range validAddresses {
		a, err := ParseAddress(v.addr, v.net)
		if err != nil {
			t.Errorf("%s on %s: %v", v.addr, v.net, err)
			continue
		}
		if got := hex.EncodeToString(a.PkScript()); got != v.script {
			t.Errorf("%s: script %s, want %s", v.addr, got, v.script)
		}
		if a.Type() != v.typ || a.Network() != v.net || a.String() != v.addr || a.IsZero() {
			t.Errorf("%s: %v %v %q", v.addr, a.Type(), a.Network(), a.String())
		}
		// Independently of our classification: btcd's own script class.
		class := map[AddressType]txscript.ScriptClass{
			P2PKH: txscript.PubKeyHashTy, P2SH: txscript.ScriptHashTy, P2WPKH: txscript.WitnessV0PubKeyHashTy,
			P2WSH: txscript.WitnessV0ScriptHashTy, P2TR: txscript.WitnessV1TaprootTy,
		}[v.typ]
		if got := txscript.GetScriptClass(a.PkScript()); got != class {
			t.Errorf("%s: script class %v, want %v", v.addr, got, class)
		}
		// Core's vectors set tryCaseFlip for bech32: upper case is valid too
		// and the canonical form stays lower case.
		if v.typ == P2WPKH || v.typ == P2WSH || v.typ == P2TR {
			up, err := ParseAddress(strings.ToUpper(v.addr), v.net)
			if err != nil || up != a {
				t.Errorf("%s upper case: %v %v", v.addr, up, err)
			}
		}
		// Surrounding whitespace (a pasted address) is ignored.
		if sp, err := ParseAddress(" "+v.addr+"\n", v.net); err != nil || sp != a {
			t.Errorf("%s with whitespace: %v", v.addr, err)
		}
	}
}

// Regtest, signet and testnet share base58 versions (m/n/2) but not bech32
// prefixes (bcrt vs tb); regtest takes the tb form as well, as wallets show
// it, while signet and testnet refuse bcrt.
func TestParseAddressNetworks(t *testing.T) {
	for _, v := range validAddresses {
		for _, net := range []Network{Regtest, Signet, Testnet} {
			a, err := ParseAddress(v.addr, net)
			base58 := v.typ == P2PKH || v.typ == P2SH
			accepted := strings.HasPrefix(v.addr, "tb1") || net == Regtest
			switch {
			case base58 || accepted:
				if err != nil || hex.EncodeToString(a.PkScript()) != v.script || a.Network() != net {
					t.Errorf("%s on %s: %v", v.addr, net, err)
				}
			default:
				if !errors.Is(err, ErrWrongNetwork) {
					t.Errorf("%s on %s: %v, want ErrWrongNetwork", v.addr, net, err)
				}
			}
		}
	}
	_, err := ParseAddress("bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9", Signet)
	if err == nil || !strings.Contains(err.Error(), "regtest address") || !strings.Contains(err.Error(), "tb1") {
		t.Errorf("bcrt1 on signet: %v", err)
	}
}

// A tb1… address on regtest is the same recipient as its bcrt1… spelling:
// one canonical string (limits and drip records key on it), one script,
// the checksum variant kept (bech32 for v0, bech32m for taproot).
func TestParseAddressTestnetFormOnRegtest(t *testing.T) {
	for _, v := range validAddresses {
		if !strings.HasPrefix(v.addr, "tb1") {
			continue
		}
		a, err := ParseAddress(strings.ToUpper(v.addr), Regtest)
		if err != nil {
			t.Fatalf("%s on regtest: %v", v.addr, err)
		}
		if !strings.HasPrefix(a.String(), "bcrt1") || hex.EncodeToString(a.PkScript()) != v.script || a.Type() != v.typ {
			t.Errorf("%s on regtest: %s %x %s", v.addr, a, a.PkScript(), a.Type())
		}
		again, err := ParseAddress(a.String(), Regtest)
		if err != nil || again != a {
			t.Errorf("%s: its regtest form %s reads back as %v, %v", v.addr, a, again, err)
		}
	}
}

func TestParseAddressMainnet(t *testing.T) {
	for _, s := range []string{
		"BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4",                     // BIP-173 P2WPKH
		"bc1qyucykdlhp62tezs0hagqury402qwhk589q80tqs5myh3rxq34nwqhkdhv7", // key_io P2WSH
		"bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0", // BIP-350 P2TR
		"BC1SW50QGDZ25J",                     // BIP-350 v16: mainnet first
		"1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo", // key_io P2PKH
		"36j4NfKv6Akva9amjWrLG6MuSQym1GuEmm", // key_io P2SH
	} {
		_, err := ParseAddress(s, Regtest)
		var ae *AddressError
		if !errors.Is(err, ErrMainnet) || !errors.As(err, &ae) {
			t.Errorf("%s: %v, want ErrMainnet", s, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "mainnet address") || !strings.Contains(msg, "regtest BTC") || !strings.Contains(msg, "bcrt1…") {
			t.Errorf("%s: message %q", s, msg)
		}
	}
	_, err := ParseAddress("1FsSia9rv4NeEwvJ2GvXrX7LyxYspbN2mo", Signet)
	if err == nil || !strings.Contains(err.Error(), "signet BTC") || !strings.Contains(err.Error(), "tb1…") {
		t.Errorf("mainnet on signet: %v", err)
	}
}

func TestParseAddressInvalid(t *testing.T) {
	p2a, err := btcutil.NewAddressPayToAnchor(Regtest.ChainParams())
	if err != nil {
		t.Fatal(err)
	}
	// A 32-byte v1 program under the wrong checksum variant, and a 20-byte
	// v0 program under the other, both made with btcutil's bech32.
	v1WithBech32 := segwitString(t, "tb", 1, make([]byte, 32), false)
	v0WithBech32m := segwitString(t, "bcrt", 0, make([]byte, 20), true)
	for _, v := range []struct {
		in   string
		net  Network
		kind error
	}{
		// BIP-173 invalid segwit addresses.
		{"tc1qw508d6qejxtdg4y5r3zarvary0c5xw7kg3g4ty", Testnet, ErrNotAddress}, // invalid HRP
		{"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", Testnet, ErrBadChecksum},
		{"BC13W508D6QEJXTDG4Y5R3ZARVARY0C5XW7KN40WF2", Testnet, ErrNotAddress}, // witness version 17
		{"bc1rw5uspcuh", Testnet, ErrNotAddress},                               // program length
		{"bc10w508d6qejxtdg4y5r3zarvary0c5xw7kw508d6qejxtdg4y5r3zarvary0c5xw7kw5rljs90", Testnet, ErrNotAddress},
		{"BC1QR508D6QEJXTDG4Y5R3ZARVARYV98GJ9P", Testnet, ErrNotAddress},                            // v0 program of 16 bytes
		{"tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sL5k7", Testnet, ErrNotAddress},  // mixed case
		{"bc1zw508d6qejxtdg4y5r3zarvaryvqyzf3du", Testnet, ErrNotAddress},                           // padding over 4 bits
		{"tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3pjxtptv", Testnet, ErrNotAddress},  // non-zero padding
		{"bc1gmk9yu", Testnet, ErrNotAddress},                                                       // empty data
		{v1WithBech32, Testnet, ErrBadChecksum},                                                     // v1 needs bech32m
		{v0WithBech32m, Regtest, ErrBadChecksum},                                                    // v0 needs bech32
		{"tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k8", Testnet, ErrBadChecksum}, // last character changed
		{"bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu8", Regtest, ErrBadChecksum},                   // last character changed
		// BIP-350 invalid segwit addresses.
		{"tc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq5zuyut", Testnet, ErrNotAddress},  // invalid HRP
		{"bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqh2y7hd", Testnet, ErrBadChecksum}, // bech32 instead of bech32m
		{"tb1z0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqglt7rf", Testnet, ErrBadChecksum},
		{"BC1S0XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ54WELL", Testnet, ErrBadChecksum},
		{"bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh", Testnet, ErrBadChecksum}, // bech32m instead of bech32
		{"tb1q0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq24jc47", Testnet, ErrBadChecksum},
		{"bc1p38j9r5y49hruaue7wxjce0updqjuyyx0kh56v8s25huc6995vvpql3jow4", Testnet, ErrNotAddress}, // invalid character in checksum
		{"BC130XLXVLHEMJA6C4DQV22UAPCTQUPFHLXM9H8Z3K2E72Q4K9HCZ7VQ7ZWS8R", Testnet, ErrNotAddress}, // witness version 17
		{"bc1pw5dgrnzv", Testnet, ErrNotAddress},                                                   // 1-byte program
		{"bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v8n0nx0muaewav253zgeav", Testnet, ErrNotAddress},
		{"tb1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vq47Zagq", Testnet, ErrNotAddress},   // mixed case
		{"bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7v07qwwzcrf", Testnet, ErrNotAddress}, // padding over 4 bits
		{"tb1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vpggkg4j", Testnet, ErrNotAddress},   // non-zero padding
		// Valid, but not a type the faucet pays: witness v2+ (key_io) and pay-to-anchor.
		{"tb1rgv5m6uvdk3kc7qsuz0c79v88ycr5w4wa", Testnet, ErrUnsupportedAddress},
		{"tb1r3ss76jtsuxe8c8c8lxsehnpak55ylrgr345pww076l536ahjr6jsydamx3", Signet, ErrUnsupportedAddress},
		{"bcrt1sx6p8njlx7h9mc2agz4yg82dzne23050ncq72cneeecez2pst8mahn8xecsf8g6hzx94420", Regtest, ErrUnsupportedAddress},
		{p2a.EncodeAddress(), Regtest, ErrUnsupportedAddress},
		// Base58.
		{"n4fajahJrAuKbN7uNsKjLjQkz9Qn5ewJXR", Regtest, ErrBadChecksum},
		{"2MxFajLApXpYk4VodBSZSt7rw8y4ryABkfB", Regtest, ErrBadChecksum},
		{"cRez45VGSp5EXNqm89K3NJJPSKKapJg5Kbw3atxr2337x2gtgYed", Regtest, ErrNotAddress},               // a WIF key: 33-byte payload
		{"0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798", Regtest, ErrNotAddress}, // a public key (P2PK)
		{"not-an-address", Regtest, ErrNotAddress},
		{"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", Regtest, ErrNotAddress},
		{"", Regtest, ErrNotAddress},
		{"   ", Regtest, ErrNotAddress},
		{strings.Repeat("q", 91), Regtest, ErrNotAddress},
		{"bcrt1", Regtest, ErrNotAddress},
		{"bcrt1 qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9", Regtest, ErrNotAddress},
	} {
		a, err := ParseAddress(v.in, v.net)
		var ae *AddressError
		if !errors.Is(err, v.kind) || !errors.As(err, &ae) || !errors.Is(ae.Kind, v.kind) {
			t.Errorf("%q on %s: %v (%T), want %v", v.in, v.net, err, err, v.kind)
		}
		if !a.IsZero() {
			t.Errorf("%q: non-zero address with an error", v.in)
		}
	}
}

// segwitString encodes a witness program under hrp with either checksum.
func segwitString(t *testing.T, hrp string, version byte, program []byte, bech32m bool) string {
	t.Helper()
	conv, err := bech32.ConvertBits(program, 8, 5, true)
	if err != nil {
		t.Fatal(err)
	}
	data := append([]byte{version}, conv...)
	var s string
	if bech32m {
		s, err = bech32.EncodeM(hrp, data)
	} else {
		s, err = bech32.Encode(hrp, data)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseAddressMessages(t *testing.T) {
	ltc := segwitString(t, "ltc", 0, make([]byte, 20), false)
	for in, want := range map[string]string{
		ltc: `prefix "ltc"`,
		"bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu8":                                 "bech32 checksum",
		"n4fajahJrAuKbN7uNsKjLjQkz9Qn5ewJXR":                                           "base58check checksum",
		"bcrt1pfwxjqvtt4tcxrtdluukfmy2dv7xd2qzdfy6kajv5nwn4yam3wxkqgfarw8":             "bech32 checksum", // key_io P2TR, checksum changed
		"bcrt1sx6p8njlx7h9mc2agz4yg82dzne23050ncq72cneeecez2pst8mahn8xecsf8g6hzx94420": "witness v16",
	} {
		_, err := ParseAddress(in, Regtest)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to mention %q", in, err, want)
		}
	}
}

func TestParseAddressBadNetwork(t *testing.T) {
	if _, err := ParseAddress("bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9", 0); !errors.Is(err, ErrUnknownNetwork) {
		t.Fatalf("zero network: %v", err)
	}
}

func TestAddressValue(t *testing.T) {
	a, _ := ParseAddress("BCRT1QDAVT4J2SD7DLHQSAVTNFXVZPPW6K7QY97TMNU9", Regtest)
	b, _ := ParseAddress("bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9", Regtest)
	seen := map[Address]bool{a: true}
	if !seen[b] {
		t.Error("upper- and lower-case forms must be the same map key")
	}
	s := a.PkScript()
	s[0] = 0x51
	if a.PkScript()[0] != 0x00 {
		t.Error("PkScript must return a copy")
	}
	j, err := json.Marshal(struct{ A Address }{a})
	if err != nil || string(j) != `{"A":"bcrt1qdavt4j2sd7dlhqsavtnfxvzppw6k7qy97tmnu9"}` {
		t.Errorf("json: %s %v", j, err)
	}
	if (Address{}).String() != "" || !(Address{}).IsZero() {
		t.Error("zero address")
	}
}
