package devnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// clarityOutcomes is what hack/clarity/outcomes.mjs records from the real
// Clarity VM (clarinet-sdk's simnet) running contracts/token.clar.tmpl
// rendered for each of its tokens.
type clarityOutcomes struct {
	Generator   string            `json:"generator"`
	ClarinetSDK string            `json:"clarinetSdk"`
	Epoch       string            `json:"epoch"`
	Deployer    string            `json:"deployer"`
	Tokens      []clarityToken    `json:"tokens"`
	Scenarios   []clarityScenario `json:"scenarios"`
	ReadOnly    []clarityReadOnly `json:"readOnly"`
}

// clarityToken is one deployed token: its ids, the template's fields and
// the sha256 of the source the VM ran.
type clarityToken struct {
	Contract       string `json:"contract"`
	Asset          string `json:"asset"`
	Name           string `json:"name"`
	Symbol         string `json:"symbol"`
	Decimals       uint8  `json:"decimals"`
	ClarityVersion string `json:"clarityVersion"`
	SourceSha256   string `json:"sourceSha256"`
}

type clarityWallet struct {
	Key     string `json:"key"`
	Address string `json:"address"`
}

type clarityScenario struct {
	Token   string                   `json:"token"` // the called token's asset identifier
	Name    string                   `json:"name"`
	Wallets map[string]clarityWallet `json:"wallets"`
	Mints   []struct {
		Asset     string `json:"asset"`
		Recipient string `json:"recipient"`
		Amount    string `json:"amount"`
	} `json:"mints"`
	TxSender          string   `json:"txSender"`
	Function          string   `json:"function"`
	Args              []string `json:"args"`
	PostConditionMode string   `json:"postConditionMode"`
	PostConditions    []struct {
		Principal string `json:"principal"` // "origin" or an address
		Code      string `json:"code"`
		Amount    string `json:"amount"`
		Asset     string `json:"asset"` // an asset identifier or "STX"
	} `json:"postConditions"`
	Outcome struct {
		Result                 string         `json:"result"`
		ResultRepr             string         `json:"resultRepr"`
		AbortedByPostCondition bool           `json:"abortedByPostCondition"`
		Events                 []clarityEvent `json:"events"`
		// Balances are every token's, by asset identifier and principal.
		Balances map[string]map[string]string `json:"balances"`
		Reads    []clarityReadOnly            `json:"reads"`
	} `json:"outcome"`
}

// clarityEvent is an event as both sides are compared: the simnet's, and
// the devnode's TxEvent.
type clarityEvent struct {
	Type      string `json:"type"`
	Asset     string `json:"asset,omitempty"`
	Sender    string `json:"sender,omitempty"`
	Recipient string `json:"recipient,omitempty"`
	Amount    string `json:"amount,omitempty"`
	Contract  string `json:"contract,omitempty"`
	Value     string `json:"value,omitempty"`
}

type clarityReadOnly struct {
	Contract string   `json:"contract"`
	Function string   `json:"function"`
	Args     []string `json:"args"`
	Sender   string   `json:"sender"`
	Okay     bool     `json:"okay"`
	Result   string   `json:"result,omitempty"`
	Cause    string   `json:"cause,omitempty"`
}

// defaultClarityOutcomes is a copy of hack/clarity's output kept in the
// repository, so a plain `go test` checks the devnode against the real VM
// without npm; `make test-clarity` points CLARITY_OUTCOMES at a fresh run.
const defaultClarityOutcomes = "testdata/clarity-outcomes.json"

// requiredScenarios must be in every outcomes file, for every token: a
// file that lost them would prove less than it seems to.
var requiredScenarios = []string{
	"success-memo-some", "success-memo-none", "insufficient-balance", "wrong-sender", "zero-amount",
	"sender-is-recipient", "pc-deny-uncovered", "pc-deny-wrong-amount", "pc-allow-violated",
	"pc-deny-other-token-only", "pc-deny-both-tokens",
}

// minClarityTokens is how many tokens, with distinct metadata, the file
// must cover: the rendered template must hold for more than sBTC.
const minClarityTokens = 2

var conditionCodes = map[string]stacks.ConditionCode{
	"eq": stacks.ConditionEq, "gt": stacks.ConditionGt, "gteq": stacks.ConditionGtEq, "lt": stacks.ConditionLt, "lteq": stacks.ConditionLtEq,
}

// TestClarityOutcomes deploys the tokens the real Clarity VM ran on one
// devnode and replays the scenarios in the same order through the
// devnode's RPC: each signed call is posted, mined, then the same
// read-only calls are made; results, post-condition aborts, events,
// balances and read-only answers must be identical.
func TestClarityOutcomes(t *testing.T) {
	path := os.Getenv("CLARITY_OUTCOMES")
	if path == "" {
		path = defaultClarityOutcomes
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read outcomes: %v", err)
	}
	var doc clarityOutcomes
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse outcomes %s: %v", path, err)
	}
	specs := clarityTokenSpecs(t, path, doc)
	checkClarityCoverage(t, path, doc)
	h := newHarness(t, Config{Tokens: specs})
	t.Logf("replaying %d scenarios and %d read-only calls over %d tokens from %s (%s, clarinet-sdk %s, epoch %s)",
		len(doc.Scenarios), len(doc.ReadOnly), len(specs), path, doc.Generator, doc.ClarinetSDK, doc.Epoch)

	for _, s := range doc.Scenarios {
		ok := t.Run(s.Token+"/"+s.Name, func(t *testing.T) { replayScenario(t, h, s) })
		if !ok {
			t.Fatalf("scenario %s of %s diverged; later ones share its node and would only repeat it", s.Name, s.Token)
		}
	}
	for _, ro := range doc.ReadOnly {
		sender, err := stacks.ParsePrincipal(ro.Sender)
		if err != nil {
			t.Fatal(err)
		}
		checkReadOnly(t, h, sender, ro)
	}
}

// clarityTokenSpecs turns the file's tokens into devnode specs, refusing a
// file recorded from another rendering of the template than ours.
func clarityTokenSpecs(t *testing.T, path string, doc clarityOutcomes) []TokenSpec {
	t.Helper()
	if len(doc.Tokens) < minClarityTokens {
		t.Fatalf("%s covers %d tokens, want at least %d", path, len(doc.Tokens), minClarityTokens)
	}
	var specs []TokenSpec
	decimals := make(map[uint8]bool)
	for _, tok := range doc.Tokens {
		asset, err := stacks.ParseAssetID(tok.Asset)
		if err != nil || asset.Contract.String() != tok.Contract || asset.Contract.Address.String() != doc.Deployer {
			t.Fatalf("token %q (contract %s, deployer %s): %v", tok.Asset, tok.Contract, doc.Deployer, err)
		}
		spec := TokenSpec{Asset: asset, Name: tok.Name, Symbol: tok.Symbol, Decimals: tok.Decimals}
		src, err := spec.ContractSource()
		if err != nil {
			t.Fatalf("token %s: %v", tok.Asset, err)
		}
		sum := sha256.Sum256([]byte(src))
		if got := hex.EncodeToString(sum[:]); tok.SourceSha256 != got {
			t.Fatalf("%s was recorded for another %s contract (sha256 %s, the devnode renders %s): regenerate it with `make test-clarity` and copy bin/clarity-outcomes.json to %s",
				path, tok.Asset, tok.SourceSha256, got, defaultClarityOutcomes)
		}
		specs = append(specs, spec)
		decimals[tok.Decimals] = true
	}
	if len(decimals) < minClarityTokens {
		t.Fatalf("%s: the tokens share their decimals; they should differ", path)
	}
	return specs
}

// checkClarityCoverage fails unless every token has the required
// scenarios and the getters were read.
func checkClarityCoverage(t *testing.T, path string, doc clarityOutcomes) {
	t.Helper()
	names := make(map[string]bool)
	for _, s := range doc.Scenarios {
		names[s.Token+" "+s.Name] = true
	}
	for _, tok := range doc.Tokens {
		for _, n := range requiredScenarios {
			if !names[tok.Asset+" "+n] {
				t.Fatalf("%s lacks scenario %q for %s", path, n, tok.Asset)
			}
		}
	}
	read := make(map[string]bool)
	for _, ro := range doc.ReadOnly {
		read[ro.Contract+" "+ro.Function] = true
	}
	for _, tok := range doc.Tokens {
		for _, fn := range []string{fnGetName, fnGetSymbol, fnGetDecimals, fnGetBalance, fnGetTotalSupply, fnGetTokenURI} {
			if !read[tok.Contract+" "+fn] {
				t.Fatalf("%s does not read %s of %s", path, fn, tok.Contract)
			}
		}
	}
}

// replayScenario funds the scenario's wallets, makes its call and
// compares what the devnode did with what the VM did.
func replayScenario(t *testing.T, h *harness, s clarityScenario) {
	keys := fundScenario(t, h, s)
	txid := h.mustAccept(scenarioCall(t, s, keys))
	mineOne(t, h, txid)
	checkScenarioOutcome(t, h, txid, s)
}

// fundScenario gives every wallet STX for fees and mints the scenario's
// tokens, returning the keys by address.
func fundScenario(t *testing.T, h *harness, s clarityScenario) map[string]*stacks.PrivateKey {
	t.Helper()
	keys := make(map[string]*stacks.PrivateKey)
	for role, w := range s.Wallets {
		k, err := stacks.ParsePrivateKey(w.Key)
		if err != nil {
			t.Fatalf("%s key: %v", role, err)
		}
		if got := k.TestnetAddress().String(); got != w.Address {
			t.Fatalf("%s: stacks.js derived %s, we derive %s", role, w.Address, got)
		}
		keys[w.Address] = k
		h.n.Fund(k.TestnetAddress(), 1_000_000) // fees; the VM run needs none
	}
	for _, m := range s.Mints {
		addr, err := stacks.ParseAddress(m.Recipient)
		if err != nil {
			t.Fatal(err)
		}
		a, err := stacks.ParseAssetID(m.Asset)
		if err != nil {
			t.Fatal(err)
		}
		h.n.FundAsset(a, addr, mustUint(t, m.Amount))
	}
	return keys
}

// scenarioCall signs the scenario's call of its token.
func scenarioCall(t *testing.T, s clarityScenario, keys map[string]*stacks.PrivateKey) *stacks.Transaction {
	t.Helper()
	asset, err := stacks.ParseAssetID(s.Token)
	if err != nil {
		t.Fatal(err)
	}
	key := keys[s.TxSender]
	if key == nil {
		t.Fatalf("no key for tx-sender %s", s.TxSender)
	}
	args := make([]stacks.ClarityValue, len(s.Args))
	for i, a := range s.Args {
		args[i] = mustClarity(t, a)
	}
	mode := stacks.PostConditionModeDeny
	if s.PostConditionMode == "allow" {
		mode = stacks.PostConditionModeAllow
	}
	var pcs []stacks.PostCondition
	for _, p := range s.PostConditions {
		pc := stacks.PostCondition{Code: conditionCodes[p.Code], Amount: mustUint(t, p.Amount)}
		if p.Principal == "origin" {
			pc.Origin = true
		} else if pc.Principal, _ = stacks.ParsePrincipal(p.Principal); pc.Principal == (stacks.Principal{}) {
			t.Fatalf("post-condition principal %q", p.Principal)
		}
		if p.Asset != "STX" {
			a, err := stacks.ParseAssetID(p.Asset)
			if err != nil {
				t.Fatal(err)
			}
			pc.Asset = a
		}
		pcs = append(pcs, pc)
	}
	tx, err := stacks.NewContractCall(stacks.ContractCallParams{
		Contract: asset.Contract, Function: s.Function, Args: args, Nonce: 0, Fee: 10_000,
		PostConditionMode: mode, PostConditions: pcs,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// checkScenarioOutcome compares the mined call's result, abort, events,
// balances and read-only answers with the VM's.
func checkScenarioOutcome(t *testing.T, h *harness, txid stacks.TxID, s clarityScenario) {
	t.Helper()
	mt, err := h.c.Transaction(context.Background(), txid.String())
	if err != nil {
		t.Fatal(err)
	}
	if r := simpleRepr(mustClarity(t, s.Outcome.Result)); r != s.Outcome.ResultRepr {
		t.Fatalf("the outcome's result %s reads %s, not %s", s.Outcome.Result, r, s.Outcome.ResultRepr)
	}
	if mt.Result != s.Outcome.ResultRepr {
		t.Errorf("result %s, the VM returned %s", mt.Result, s.Outcome.ResultRepr)
	}
	if got := h.n.TxPostConditionFailure(txid); (got != "") != s.Outcome.AbortedByPostCondition {
		t.Errorf("post-condition failure %q, the VM's events give aborted=%v", got, s.Outcome.AbortedByPostCondition)
	}
	evs, _ := h.n.TxEvents(txid)
	got := make([]clarityEvent, 0, len(evs))
	for _, e := range evs {
		ce := clarityEvent{Type: e.Type, Asset: e.AssetID, Sender: e.Sender, Recipient: e.Recipient, Contract: e.Contract}
		if e.Type != EventPrint {
			ce.Amount = strconv.FormatUint(e.Amount, 10)
		} else {
			ce.Value = "0x" + hex.EncodeToString(stacks.SerializeClarityValue(e.Value))
		}
		got = append(got, ce)
	}
	want := s.Outcome.Events
	if want == nil {
		want = []clarityEvent{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %+v\nwant %+v", got, want)
	}
	if len(s.Outcome.Balances) == 0 {
		t.Fatal("the outcome records no balances")
	}
	for assetID, balances := range s.Outcome.Balances {
		a, err := stacks.ParseAssetID(assetID)
		if err != nil {
			t.Fatal(err)
		}
		for principal, amount := range balances {
			p, err := stacks.ParsePrincipal(principal)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.n.AssetBalance(a, p); got != mustUint(t, amount) {
				t.Errorf("AssetBalance(%s, %s) = %d, the VM holds %s", a, principal, got, amount)
			}
		}
	}
	for _, ro := range s.Outcome.Reads {
		sender, err := stacks.ParsePrincipal(ro.Sender)
		if err != nil {
			t.Fatal(err)
		}
		checkReadOnly(t, h, sender, ro)
	}
}

// checkReadOnly makes the recorded read-only call through the RPC and
// compares the answer.
func checkReadOnly(t *testing.T, h *harness, sender stacks.Principal, ro clarityReadOnly) {
	t.Helper()
	args := make([]stacks.ClarityValue, len(ro.Args))
	for i, a := range ro.Args {
		args[i] = mustClarity(t, a)
	}
	got := h.callRead(t, ro.Contract, ro.Function, sender, args...)
	want := CallReadResponse{Okay: ro.Okay, Result: ro.Result, Cause: ro.Cause}
	if got != want {
		t.Errorf("%s %s(%s)\n got %+v\nwant %+v", ro.Contract, ro.Function, strings.Join(ro.Args, ", "), got, want)
	}
}

// simpleRepr renders the values a token call returns as Clarity prints
// them: (ok true), (err u4).
func simpleRepr(v stacks.ClarityValue) string {
	switch v := v.(type) {
	case stacks.Response:
		if v.Ok {
			return "(ok " + simpleRepr(v.Value) + ")"
		}
		return "(err " + simpleRepr(v.Value) + ")"
	case stacks.Bool:
		return v.String()
	case stacks.UInt:
		return v.String()
	}
	return fmt.Sprintf("unexpected %T", v)
}

func mustClarity(t *testing.T, h string) stacks.ClarityValue {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimPrefix(h, "0x"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := stacks.DecodeClarityValue(b)
	if err != nil {
		t.Fatalf("%s: %v", h, err)
	}
	return v
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
