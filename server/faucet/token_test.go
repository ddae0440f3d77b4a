package faucet

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/devnode"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
	"github.com/stxfaucet/faucet-operator/server/journal"
	"github.com/stxfaucet/faucet-operator/server/settings"
)

const tokenDrip uint64 = 100_000 // satoshis

func sbtcAsset(t testing.TB) stacks.AssetInfo {
	t.Helper()
	a, err := stacks.ParseAssetID(settings.SBTCTestnet)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newTokenEnv is newEnv with the sBTC token deployed and on, each key
// minted tokenFunding satoshis.
func newTokenEnv(t *testing.T, nKeys int, funding, tokenFunding uint64, dcfg devnode.Config, fcfg Config) *env {
	t.Helper()
	dcfg.TokenAsset = settings.SBTCTestnet
	var below, amount uint64
	if len(fcfg.Tokens) > 0 {
		below, amount = fcfg.Tokens[0].RefillBelow, fcfg.Tokens[0].RefillAmount
	}
	fcfg.Tokens = []Token{{Name: tSBTC, Asset: sbtcAsset(t), Amount: tokenDrip, RefillBelow: below, RefillAmount: amount}}
	e := newEnv(t, nKeys, funding, dcfg, fcfg)
	for _, k := range e.keys {
		e.dn.FundToken(k.TestnetAddress(), tokenFunding)
	}
	if err := e.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// tSBTC is the tests' name of the sBTC token.
const tSBTC Asset = "sbtc"

func tokenOf(e *env, addr stacks.Address) uint64 {
	return e.dn.TokenBalance(stacks.Principal{Address: addr})
}

// Token transfers recorded before a crash, sent or not, are resumed like
// STX drips, and their amounts still count against the key's sBTC after
// the restart (the ledger row carries the asset): with 3 drips' worth, two
// in flight leave room for exactly one more.
func TestTokenDripsResumeAndStayCounted(t *testing.T) {
	e := newTokenEnv(t, 1, 100_000_000_000, 3*tokenDrip, devnode.Config{}, Config{State: State{Journal: journal.NewMemoryStore()}})
	ctx := context.Background()
	key := e.keys[0]
	sender := key.TestnetAddress()
	asset := sbtcAsset(t)
	unsent, sent := recipient(t), recipient(t)
	record := func(nonce uint64, to stacks.Principal, submit bool) {
		tx, err := stacks.NewSIP010Transfer(stacks.SIP010TransferParams{Asset: asset, Recipient: to, Amount: tokenDrip,
			Nonce: nonce, Fee: 400, ChainID: stacks.ChainIDTestnet}, key)
		if err != nil {
			t.Fatal(err)
		}
		raw := tx.Serialize()
		putPending(t, e.f.cfg.State.Journal, PendingTx{Sender: sender, Nonce: nonce, TxID: tx.TxID(), Raw: raw, Recipient: to,
			Asset: tSBTC, Amount: tokenDrip, Fee: 400, State: TxBroadcasting})
		if submit {
			if _, err := e.dn.Submit(raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(0, unsent, false) // crashed before the send
	record(1, sent, true)    // crashed before the mark
	cfg := e.f.cfg
	f, err := New(Config{Keys: cfg.Keys, Node: cfg.Node, Tokens: cfg.Tokens, State: State{Journal: cfg.State.Journal}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	e.f = f
	if n := e.dn.MempoolSize(); n != 2 {
		t.Fatalf("mempool %d after resume, want both transfers", n)
	}
	if s := f.Keys()[0]; !s.Tokens[tSBTC].Known || s.Tokens[tSBTC].Balance != 3*tokenDrip || s.Tokens[tSBTC].Available != tokenDrip {
		t.Fatalf("key after resume: %+v; want 1 drip of sBTC available beyond the 2 in flight", s)
	}
	third := recipient(t)
	res, err := f.Drip(ctx, Request{Recipient: third, Asset: tSBTC})
	if err != nil || res.Nonce != 2 || res.Asset != tSBTC || res.Amount != tokenDrip {
		t.Fatalf("third drip %+v, %v", res, err)
	}
	_, err = f.Drip(ctx, Request{Recipient: recipient(t), Asset: tSBTC})
	if ReasonOf(err) != ReasonExhausted {
		t.Fatalf("fourth drip with sBTC for three: %v, want exhausted", err)
	}
	// STX drips still go out on the same nonces.
	if res, err := f.Drip(ctx, Request{Recipient: recipient(t)}); err != nil || res.Nonce != 3 {
		t.Fatalf("STX drip %+v, %v; want nonce 3", res, err)
	}
	for e.dn.MempoolSize() > 0 {
		e.mine()
	}
	for _, to := range []stacks.Principal{unsent, sent, third} {
		if got := e.dn.TokenBalance(to); got != tokenDrip {
			t.Errorf("%s holds %d sats, want exactly one drip", to, got)
		}
	}
	if got := tokenOf(e, sender); got != 0 {
		t.Errorf("key keeps %d sats", got)
	}
	if s := f.Keys()[0]; s.Tokens[tSBTC].Balance != 0 || s.Tokens[tSBTC].Available != 0 || s.InFlight != 0 {
		t.Errorf("key after mining: %+v", s)
	}
}

// The treasury refills a key's sBTC when it runs low, with a SIP-010
// transfer of its own sBTC placed like every refill, and leaves a key whose
// STX is fine alone; a treasury without sBTC is dry for sBTC only.
func TestTreasuryRefillsToken(t *testing.T) {
	const below, amount = 5 * tokenDrip, 20 * tokenDrip
	hist := &recordingHistory{}
	e := newTreasuryEnv(t, 1, 10_000_000_000, 10_000_000_000, devnode.Config{TokenAsset: settings.SBTCTestnet},
		Config{State: State{History: hist}, Tokens: []Token{{Name: tSBTC, Asset: sbtcAsset(t), Amount: tokenDrip, RefillBelow: below, RefillAmount: amount}}})
	rb := &recordingBroadcast{NodeClient: e.f.cfg.Node}
	e.f.setNode(rb)
	ctx := context.Background()
	dist := e.keys[0].TestnetAddress()
	tAddr := e.f.cfg.Refills.Treasury.TestnetAddress()
	e.dn.FundToken(dist, 7*tokenDrip)
	e.dn.FundToken(tAddr, 30*tokenDrip) // one refill and a half
	e.mine()
	if s := e.treasury(); len(s.Tokens) != 1 || s.Tokens[0].RefillBelow != below || s.Tokens[0].RefillAmount != amount || s.Tokens[0].Balance != 30*tokenDrip {
		t.Fatalf("treasury token status %+v", s.Tokens)
	}
	for range 3 { // 7 → 4 drips available: below 5
		if _, err := e.f.Drip(ctx, Request{Recipient: recipient(t), Asset: tSBTC}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(rb.from(t, tAddr)); n != 0 {
		t.Fatalf("refill before the next block: %d", n)
	}
	e.mine()
	refills := rb.from(t, tAddr)
	if len(refills) != 1 {
		t.Fatalf("%d treasury txs after the block, want one sBTC refill", len(refills))
	}
	tr, ok := stacks.ParseSIP010Transfer(refills[0].ContractCall)
	if !ok || tr.Recipient.Address != dist || tr.Amount != amount || string(tr.Memo) != RefillMemo {
		t.Fatalf("refill %+v", tr)
	}
	if pc := refills[0].PostConditions; len(pc) != 1 || pc[0].Asset.String() != settings.SBTCTestnet || pc[0].Amount != amount {
		t.Fatalf("refill post-conditions %+v", pc)
	}
	e.mine()
	if got := tokenOf(e, dist); got != 4*tokenDrip+amount {
		t.Fatalf("distributor holds %d sats after the refill, want %d", got, 4*tokenDrip+amount)
	}
	if s := e.treasury(); s.Tokens[0].Balance != 30*tokenDrip-amount || s.InFlightRefills != 0 {
		t.Fatalf("treasury after the refill %+v / %+v", s, s.Tokens)
	}
	e.mine()
	if n := len(rb.from(t, tAddr)); n != 1 {
		t.Fatalf("%d treasury txs for a key above both thresholds", n)
	}
	hist.mu.Lock()
	var refilled bool
	for _, r := range hist.recs {
		refilled = refilled || (r.Outcome == OutcomeRefill && r.Asset == tSBTC && r.Amount == amount)
	}
	hist.mu.Unlock()
	if !refilled {
		t.Fatal("no sBTC refill in the history")
	}

	// Low again, the treasury's 10 drips' worth cannot pay a refill of 20:
	// it is dry for sBTC, not for STX, and says so once per block.
	for e.f.Keys()[0].Tokens[tSBTC].Available >= below {
		if _, err := e.f.Drip(ctx, Request{Recipient: recipient(t), Asset: tSBTC}); err != nil {
			t.Fatal(err)
		}
	}
	e.mine()
	if s := e.treasury(); !s.Tokens[0].Dry || s.Dry {
		t.Fatalf("treasury short of sBTC: token dry %v, STX dry %v", s.Tokens[0].Dry, s.Dry)
	}
}

// A token the node does not have (a wrong --sbtc-asset) leaves STX drips
// alone: sBTC drips answer out of funds, and the failing read is logged once
// per key, not at every block.
func TestMissingTokenContract(t *testing.T) {
	logs := &countingHandler{}
	asset := sbtcAsset(t)
	asset.Contract.Name = "not-deployed"
	e := newEnv(t, 2, 10_000_000_000, devnode.Config{TokenAsset: settings.SBTCTestnet},
		Config{Tokens: []Token{{Name: tSBTC, Asset: asset, Amount: tokenDrip}}, Logger: slog.New(logs)})
	ctx := context.Background()
	for range 3 {
		e.mine()
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: recipient(t), Asset: tSBTC}); ReasonOf(err) != ReasonExhausted {
		t.Fatalf("sBTC drip with an unreadable token: %v, want exhausted", err)
	}
	if _, err := e.f.Drip(ctx, Request{Recipient: recipient(t)}); err != nil {
		t.Fatalf("STX drip: %v", err)
	}
	if n := logs.count("token balance read failed"); n != 2 {
		t.Fatalf("%d warnings of a failing token read over 4 reads of 2 keys, want one per key", n)
	}
	if fund, on := e.f.TokenFunding(tSBTC); !on || fund.Keys != 0 || fund.DripsLeft != 0 {
		t.Fatalf("token funding %+v (on %v): nothing is known", fund, on)
	}
}
