package devnode

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

const (
	tokGenesisSTX = 1_000_000_000
	tokGenesis    = 50_000
	tokFee        = 3_000
)

// tokenFixture is a node whose token contract was deployed by deployer,
// with alice holding tokGenesis tokens; everyone holds STX for fees.
type tokenFixture struct {
	*harness
	deployer, alice, bob wallet
	asset                stacks.AssetInfo
}

func newTokenFixture(t *testing.T) *tokenFixture {
	t.Helper()
	f := &tokenFixture{deployer: newWallet(t), alice: newWallet(t), bob: newWallet(t)}
	assetID := f.deployer.addr.String() + ".sbtc-token::" + TokenName
	a, err := stacks.ParseAssetID(assetID)
	if err != nil {
		t.Fatal(err)
	}
	f.asset = a
	f.harness = newHarness(t, Config{
		Genesis: map[stacks.Address]uint64{
			f.deployer.addr: tokGenesisSTX, f.alice.addr: tokGenesisSTX, f.bob.addr: tokGenesisSTX,
		},
		SendManyContract: stacks.SendManyMemoTestnet,
		TokenAsset:       assetID,
		TokenGenesis:     map[stacks.Address]uint64{f.alice.addr: tokGenesis},
	})
	return f
}

// call signs a call of the token contract without NewSIP010Transfer's
// checks, so tests can send what the contract itself must refuse.
func (f *tokenFixture) call(t *testing.T, from wallet, function string, args []stacks.ClarityValue, nonce uint64, mode byte, pcs ...stacks.PostCondition) *stacks.Transaction {
	t.Helper()
	tx, err := stacks.NewContractCall(stacks.ContractCallParams{
		Contract: f.asset.Contract, Function: function, Args: args, Nonce: nonce, Fee: tokFee,
		PostConditionMode: mode, PostConditions: pcs,
	}, from.key)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func transferArgs(amount uint64, from, to stacks.Principal, memo []byte) []stacks.ClarityValue {
	m := stacks.None
	if memo != nil {
		m = stacks.Some(stacks.Buffer(memo))
	}
	return []stacks.ClarityValue{stacks.NewUInt(amount), from, to, m}
}

// checkToken fails unless the token balances are as given.
func (f *tokenFixture) checkToken(t *testing.T, want map[string]uint64) {
	t.Helper()
	for name, w := range map[string]wallet{"deployer": f.deployer, "alice": f.alice, "bob": f.bob} {
		if got := f.n.TokenBalance(w.principal()); got != want[name] {
			t.Errorf("%s holds %d tokens, want %d", name, got, want[name])
		}
	}
}

// checkFeeOnly fails unless w paid one fee and advanced its nonce once.
func (f *tokenFixture) checkFeeOnly(t *testing.T, w wallet) {
	t.Helper()
	if bal, nonce := f.n.Account(w.addr); bal != tokGenesisSTX-tokFee || nonce != 1 {
		t.Errorf("STX %d, nonce %d; want %d, 1", bal, nonce, tokGenesisSTX-tokFee)
	}
}

func TestTokenConfig(t *testing.T) {
	w := newWallet(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unparsable asset", Config{TokenAsset: "not-an-asset"}, "Config.TokenAsset"},
		{"another token name", Config{TokenAsset: w.addr.String() + ".token::other"}, "defines sbtc-token"},
		{"genesis without a token", Config{TokenGenesis: map[stacks.Address]uint64{w.addr: 1}}, "TokenGenesis without"},
		{"the send-many contract", Config{SendManyContract: stacks.SendManyMemoTestnet, TokenAsset: stacks.SendManyMemoTestnet + "::" + TokenName}, "same contract"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkNewPanics(t, tc.cfg, tc.want) })
	}

	n := New(Config{TokenAsset: settings.SBTCTestnet, TokenGenesis: map[stacks.Address]uint64{w.addr: 7}})
	if got := n.TokenBalance(w.principal()); got != 7 {
		t.Errorf("genesis balance %d, want 7", got)
	}
	n.FundToken(w.addr, 5)
	if got := n.TokenBalance(w.principal()); got != 12 {
		t.Errorf("after FundToken %d, want 12", got)
	}
	if got := New(Config{}).TokenBalance(w.principal()); got != 0 {
		t.Errorf("no token deployed: balance %d", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("FundToken without a token did not panic")
		}
	}()
	New(Config{}).FundToken(w.addr, 1)
}

func TestTokenAdmissionRejections(t *testing.T) {
	f := newTokenFixture(t)
	a, b := f.alice.principal(), f.bob.principal()
	other := f.deployer.addr.String() + ".other-token"
	for _, tc := range []struct {
		name, contract, fn string
		args               []stacks.ClarityValue
		reason, message    string
	}{
		{"another contract", other, fnTransfer, transferArgs(1, a, b, nil), node.ReasonNoSuchContract, ""},
		{"read-only function", "", fnGetBalance, []stacks.ClarityValue{a}, node.ReasonNoSuchPublicFunction, ""},
		{"unknown function", "", "burn", nil, node.ReasonNoSuchPublicFunction, ""},
		{"three arguments", "", fnTransfer, transferArgs(1, a, b, nil)[:3], node.ReasonBadFunctionArgument, "IncorrectArgumentCount(4, 3)"},
		{"mint with one argument", "", fnMint, []stacks.ClarityValue{stacks.NewUInt(1)}, node.ReasonBadFunctionArgument, "IncorrectArgumentCount(2, 1)"},
		{"int amount", "", fnTransfer, []stacks.ClarityValue{stacks.NewInt(1), a, b, stacks.None}, node.ReasonBadFunctionArgument, "TypeError(UIntType, IntType)"},
		{"uint sender", "", fnTransfer, []stacks.ClarityValue{stacks.NewUInt(1), stacks.NewUInt(1), b, stacks.None}, node.ReasonBadFunctionArgument, "TypeError(PrincipalType, UIntType)"},
		{"bool recipient", "", fnTransfer, []stacks.ClarityValue{stacks.NewUInt(1), a, stacks.Bool(true), stacks.None}, node.ReasonBadFunctionArgument, "TypeError(PrincipalType, BoolType)"},
		{"memo not optional", "", fnTransfer, []stacks.ClarityValue{stacks.NewUInt(1), a, b, stacks.Buffer("hi")}, node.ReasonBadFunctionArgument,
			"TypeError(OptionalType(SequenceType(BufferType(BufferLength(34)))), SequenceType(BufferType(BufferLength(2))))"},
		{"memo too long", "", fnTransfer, transferArgs(1, a, b, make([]byte, 35)), node.ReasonBadFunctionArgument,
			"TypeError(SequenceType(BufferType(BufferLength(34))), SequenceType(BufferType(BufferLength(35))))"},
		{"memo of a uint", "", fnTransfer, []stacks.ClarityValue{stacks.NewUInt(1), a, b, stacks.Some(stacks.NewUInt(1))}, node.ReasonBadFunctionArgument,
			"TypeError(SequenceType(BufferType(BufferLength(34))), UIntType)"},
		{"mint to a uint", "", fnMint, []stacks.ClarityValue{stacks.NewUInt(1), stacks.NewUInt(2)}, node.ReasonBadFunctionArgument, "TypeError(PrincipalType, UIntType)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			contract := tc.contract
			if contract == "" {
				contract = f.asset.Contract.String()
			}
			tx := rawCall(t, f.alice, contract, tc.fn, tc.args, 0, tokFee)
			rej := rejectionOf(t, f.harness, tx)
			if rej.Reason != tc.reason {
				t.Fatalf("reason %q, want %q", rej.Reason, tc.reason)
			}
			r := f.post(tx)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d", r.status)
			}
			if tc.message != "" && !strings.Contains(r.body, `"message":"`+tc.message+`"`) {
				t.Errorf("body %s, want message %q", r.body, tc.message)
			}
		})
	}
	if n := f.n.MempoolSize(); n != 0 {
		t.Errorf("mempool holds %d txs", n)
	}
}

// A call's STX balance must cover only its fee, whatever it moves.
func TestTokenAdmissionNeedsOnlyTheFee(t *testing.T) {
	f := newTokenFixture(t)
	poor := newWallet(t)
	f.n.Fund(poor.addr, tokFee)
	f.n.FundToken(poor.addr, 10)
	// Far more tokens than poor holds: admitted, the contract decides.
	txid := f.mustAccept(f.call(t, poor, fnTransfer, transferArgs(1_000_000, poor.principal(), f.bob.principal(), nil), 0, stacks.PostConditionModeAllow))
	mineOne(t, f.harness, txid)
	checkMined(t, f.harness, txid, "(err u1)", true)

	poorer := newWallet(t)
	f.n.Fund(poorer.addr, tokFee-1)
	f.n.FundToken(poorer.addr, 10)
	rej := rejectionOf(t, f.harness, f.call(t, poorer, fnTransfer, transferArgs(1, poorer.principal(), f.bob.principal(), nil), 0, stacks.PostConditionModeAllow))
	if rej.Reason != node.ReasonNotEnoughFunds {
		t.Errorf("STX below the fee: %s, want NotEnoughFunds", rej.Reason)
	}
}

func TestTokenTransferMined(t *testing.T) {
	for _, tc := range []struct {
		name string
		memo []byte
	}{
		{"memo", []byte("faucet drip")},
		{"empty memo", []byte{}},
		{"no memo", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTokenFixture(t)
			tx, err := stacks.NewSIP010Transfer(stacks.SIP010TransferParams{
				Asset: f.asset, Recipient: f.bob.principal(), Amount: 1_234, Memo: tc.memo, Fee: tokFee,
			}, f.alice.key)
			if err != nil {
				t.Fatal(err)
			}
			txid := f.mustAccept(tx)
			if st := f.n.TxStatus(txid); st.State != TxPending {
				t.Fatalf("TxStatus %v, want pending", st.State)
			}
			f.checkToken(t, map[string]uint64{"alice": tokGenesis}) // pending moves nothing
			mineOne(t, f.harness, txid)
			checkMined(t, f.harness, txid, "(ok true)", false)
			f.checkToken(t, map[string]uint64{"alice": tokGenesis - 1_234, "bob": 1_234})
			f.checkFeeOnly(t, f.alice)
			if r := f.n.TxPostConditionFailure(txid); r != "" {
				t.Errorf("post-condition failure %q", r)
			}
			want := []TxEvent{{Type: EventFTTransfer, AssetID: f.asset.String(), Sender: f.alice.addr.String(), Recipient: f.bob.addr.String(), Amount: 1_234}}
			if tc.memo != nil {
				want = append(want, TxEvent{Type: EventPrint, Contract: f.asset.Contract.String(), Value: stacks.Buffer(tc.memo)})
			}
			if got, ok := f.n.TxEvents(txid); !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("events %+v, %v; want %+v", got, ok, want)
			}
		})
	}
}

// The contract's own refusals: the tx is mined, pays its fee, returns
// (err uN) and moves nothing.
func TestTokenTransferErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   func(f *tokenFixture) []stacks.ClarityValue
		result string
	}{
		{"sender is not tx-sender", func(f *tokenFixture) []stacks.ClarityValue {
			return transferArgs(5, f.bob.principal(), f.deployer.principal(), nil)
		}, "(err u4)"},
		{"not the owner, and zero", func(f *tokenFixture) []stacks.ClarityValue {
			return transferArgs(0, f.bob.principal(), f.bob.principal(), nil)
		}, "(err u4)"},
		{"zero amount", func(f *tokenFixture) []stacks.ClarityValue {
			return transferArgs(0, f.alice.principal(), f.alice.principal(), nil)
		}, "(err u3)"},
		{"sender is recipient", func(f *tokenFixture) []stacks.ClarityValue {
			return transferArgs(tokGenesis+1, f.alice.principal(), f.alice.principal(), nil)
		}, "(err u2)"},
		{"beyond the balance", func(f *tokenFixture) []stacks.ClarityValue {
			return transferArgs(tokGenesis+1, f.alice.principal(), f.bob.principal(), []byte("m"))
		}, "(err u1)"},
		{"beyond 64 bits", func(f *tokenFixture) []stacks.ClarityValue {
			return []stacks.ClarityValue{stacks.UInt{Hi: 1}, f.alice.principal(), f.bob.principal(), stacks.None}
		}, "(err u1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTokenFixture(t)
			txid := f.mustAccept(f.call(t, f.alice, fnTransfer, tc.args(f), 0, stacks.PostConditionModeAllow))
			mineOne(t, f.harness, txid)
			checkMined(t, f.harness, txid, tc.result, true)
			f.checkToken(t, map[string]uint64{"alice": tokGenesis})
			f.checkFeeOnly(t, f.alice)
			if ev, ok := f.n.TxEvents(txid); !ok || len(ev) != 0 {
				t.Errorf("events %+v, %v; want none", ev, ok)
			}
			if r := f.n.TxPostConditionFailure(txid); r != "" {
				t.Errorf("post-condition failure %q for an err result in Allow mode", r)
			}
		})
	}
}

func TestTokenPostConditions(t *testing.T) {
	const amount = 700
	for _, tc := range []struct {
		name   string
		mode   byte
		pcs    func(f *tokenFixture) []stacks.PostCondition
		amount uint64
		result string
		// failure is the start of stacks-core's reason; "" means the
		// conditions pass and the transfer happens.
		failure string
	}{
		{"deny, exact", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{stacks.PrincipalSendsExactlyFT(f.alice.principal(), f.asset, amount)}
		}, amount, "(ok true)", ""},
		{"deny, origin at least", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{{Origin: true, Code: stacks.ConditionGtEq, Amount: amount, Asset: f.asset}}
		}, amount, "(ok true)", ""},
		{"deny, less than", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{{Origin: true, Code: stacks.ConditionLt, Amount: amount + 1, Asset: f.asset}}
		}, amount, "(ok true)", ""},
		{"deny, no condition", stacks.PostConditionModeDeny, func(*tokenFixture) []stacks.PostCondition { return nil },
			amount, "(ok true)", "Post-condition check failure: Fungible asset {asset} was moved by {alice} but not checked"},
		{"deny, only an STX condition", stacks.PostConditionModeDeny, func(*tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{stacks.OriginSendsExactly(0)}
		}, amount, "(ok true)", "Post-condition check failure: Fungible asset {asset} was moved by {alice} but not checked"},
		{"deny, condition on another token", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			other := f.asset
			other.Name = "other-token"
			return []stacks.PostCondition{stacks.PrincipalSendsExactlyFT(f.alice.principal(), other, 0)}
		}, amount, "(ok true)", "Post-condition check failure: Fungible asset {asset} was moved by {alice} but not checked"},
		{"deny, condition on the recipient", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{stacks.PrincipalSendsExactlyFT(f.bob.principal(), f.asset, 0)}
		}, amount, "(ok true)", "Post-condition check failure: Fungible asset {asset} was moved by {alice} but not checked"},
		{"deny, wrong amount", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{stacks.PrincipalSendsExactlyFT(f.alice.principal(), f.asset, amount-1)}
		}, amount, "(ok true)", "Post-condition check failure on fungible asset {asset} owned by {alice}: 699 SentEq 700"},
		{"deny, more than", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{{Origin: true, Code: stacks.ConditionGt, Amount: amount, Asset: f.asset}}
		}, amount, "(ok true)", "Post-condition check failure on fungible asset {asset} owned by {alice}: 700 SentGt 700"},
		{"allow, no condition", stacks.PostConditionModeAllow, func(*tokenFixture) []stacks.PostCondition { return nil },
			amount, "(ok true)", ""},
		{"allow, condition on the recipient", stacks.PostConditionModeAllow, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{stacks.PrincipalSendsExactlyFT(f.bob.principal(), f.asset, 0)}
		}, amount, "(ok true)", ""},
		{"allow, at most, violated", stacks.PostConditionModeAllow, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{{Origin: true, Code: stacks.ConditionLtEq, Amount: amount - 1, Asset: f.asset}}
		}, amount, "(ok true)", "Post-condition check failure on fungible asset {asset} owned by {alice}: 699 SentLe 700"},
		{"allow, STX condition violated", stacks.PostConditionModeAllow, func(*tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{stacks.OriginSendsExactly(1)}
		}, amount, "(ok true)", "Post-condition check failure on STX owned by {alice}: 1 SentEq 0"},
		// After an (err …) result nothing moved: an exact condition fails
		// and the receipt keeps the err.
		{"err result, exact condition", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{stacks.PrincipalSendsExactlyFT(f.alice.principal(), f.asset, tokGenesis+1)}
		}, tokGenesis + 1, "(err u1)", "Post-condition check failure on fungible asset {asset} owned by {alice}: 50001 SentEq 0"},
		{"err result, at most", stacks.PostConditionModeDeny, func(f *tokenFixture) []stacks.PostCondition {
			return []stacks.PostCondition{{Origin: true, Code: stacks.ConditionLtEq, Amount: tokGenesis + 1, Asset: f.asset}}
		}, tokGenesis + 1, "(err u1)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newTokenFixture(t)
			args := transferArgs(tc.amount, f.alice.principal(), f.bob.principal(), []byte("pc"))
			txid := f.mustAccept(f.call(t, f.alice, fnTransfer, args, 0, tc.mode, tc.pcs(f)...))
			mineOne(t, f.harness, txid)
			moved := tc.failure == "" && tc.result == "(ok true)"
			checkMined(t, f.harness, txid, tc.result, !moved)
			f.checkFeeOnly(t, f.alice)
			want := strings.NewReplacer("{asset}", f.asset.String(), "{alice}", f.alice.addr.String()).Replace(tc.failure)
			if got := f.n.TxPostConditionFailure(txid); got != want {
				t.Errorf("post-condition failure\n got %q\nwant %q", got, want)
			}
			ev, _ := f.n.TxEvents(txid)
			if moved {
				f.checkToken(t, map[string]uint64{"alice": tokGenesis - tc.amount, "bob": tc.amount})
				if len(ev) != 2 {
					t.Errorf("events %+v, want the transfer and the memo", ev)
				}
			} else {
				f.checkToken(t, map[string]uint64{"alice": tokGenesis})
				if len(ev) != 0 {
					t.Errorf("events %+v of a rolled-back call", ev)
				}
			}
		})
	}
}

// Token post-conditions on a send-many call: it moves no token, so an
// exact condition on one fails while "sends at most" holds.
func TestSendManyFungiblePostCondition(t *testing.T) {
	f := newTokenFixture(t)
	entries := []stacks.SendManyEntry{{To: f.bob.principal(), Amount: 1_000}}
	ftExact := stacks.PrincipalSendsExactlyFT(f.alice.principal(), f.asset, 1_000)
	txid := f.mustAccept(rawCall(t, f.alice, stacks.SendManyMemoTestnet, stacks.SendManyFunction, sendManyArgs(t, entries), 0, tokFee,
		stacks.OriginSendsExactly(1_000), ftExact))
	mineOne(t, f.harness, txid)
	checkMined(t, f.harness, txid, "(ok true)", true)
	if got, want := f.n.TxPostConditionFailure(txid), "Post-condition check failure on fungible asset "+f.asset.String()+" owned by "+f.alice.addr.String()+": 1000 SentEq 0"; got != want {
		t.Errorf("failure %q, want %q", got, want)
	}
	ftAtMost := stacks.PostCondition{Principal: f.alice.principal(), Code: stacks.ConditionLtEq, Amount: 0, Asset: f.asset}
	txid = f.mustAccept(rawCall(t, f.alice, stacks.SendManyMemoTestnet, stacks.SendManyFunction, sendManyArgs(t, entries), 1, tokFee,
		stacks.OriginSendsExactly(1_000), ftAtMost))
	mineOne(t, f.harness, txid)
	checkMined(t, f.harness, txid, "(ok true)", false)
	if bal, _ := f.n.Account(f.bob.addr); bal != tokGenesisSTX+1_000 {
		t.Errorf("recipient STX %d, want %d", bal, tokGenesisSTX+1_000)
	}
	// Deny mode names STX the way stacks-core prints AssetIdentifier::STX().
	txid = f.mustAccept(rawCall(t, f.alice, stacks.SendManyMemoTestnet, stacks.SendManyFunction, sendManyArgs(t, entries), 2, tokFee, ftAtMost))
	mineOne(t, f.harness, txid)
	checkMined(t, f.harness, txid, "(ok true)", true)
	if got, want := f.n.TxPostConditionFailure(txid), "Post-condition check failure: Fungible asset S0000000000000000000002AA028H.STX::STX was moved by "+f.alice.addr.String()+" but not checked"; got != want {
		t.Errorf("failure %q, want %q", got, want)
	}
}

func TestTokenMint(t *testing.T) {
	f := newTokenFixture(t)
	mint := func(from wallet, amount uint64, nonce uint64) stacks.TxID {
		t.Helper()
		args := []stacks.ClarityValue{stacks.NewUInt(amount), f.bob.principal()}
		txid := f.mustAccept(f.call(t, from, fnMint, args, nonce, stacks.PostConditionModeDeny))
		mineOne(t, f.harness, txid)
		return txid
	}
	txid := mint(f.deployer, 900, 0)
	checkMined(t, f.harness, txid, "(ok true)", false)
	want := []TxEvent{{Type: EventFTMint, AssetID: f.asset.String(), Recipient: f.bob.addr.String(), Amount: 900}}
	if got, _ := f.n.TxEvents(txid); !reflect.DeepEqual(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
	f.checkToken(t, map[string]uint64{"alice": tokGenesis, "bob": 900})

	checkMined(t, f.harness, mint(f.alice, 900, 0), "(err u5)", true)
	checkMined(t, f.harness, mint(f.deployer, 0, 1), "(err u1)", true)
	f.checkToken(t, map[string]uint64{"alice": tokGenesis, "bob": 900})
	f.n.contracts.mu.Lock()
	supply := f.n.contracts.tokens[f.asset.Contract].supply
	f.n.contracts.mu.Unlock()
	if supply != tokGenesis+900 {
		t.Errorf("supply %d, want %d", supply, tokGenesis+900)
	}
}

func TestTxEventsUnknown(t *testing.T) {
	f := newTokenFixture(t)
	if ev, ok := f.n.TxEvents(stacks.TxID{1}); ok || ev != nil {
		t.Errorf("unknown txid: %v, %v", ev, ok)
	}
	// A plain STX transfer is mined with no modelled events.
	txid := f.mustAccept(f.alice.send(t, f.bob.principal(), 1, 0, tokFee, ""))
	mineOne(t, f.harness, txid)
	if ev, ok := f.n.TxEvents(txid); !ok || len(ev) != 0 {
		t.Errorf("STX transfer: %v, %v", ev, ok)
	}
}
