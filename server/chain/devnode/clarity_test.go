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
// Clarity VM (clarinet-sdk's simnet) running contracts/token.clar.
type clarityOutcomes struct {
	Generator      string            `json:"generator"`
	ClarinetSDK    string            `json:"clarinetSdk"`
	Epoch          string            `json:"epoch"`
	ContractSha256 string            `json:"contractSha256"`
	Deployer       string            `json:"deployer"`
	Asset          string            `json:"asset"`
	Scenarios      []clarityScenario `json:"scenarios"`
	ReadOnly       []clarityReadOnly `json:"readOnly"`
}

type clarityWallet struct {
	Key     string `json:"key"`
	Address string `json:"address"`
}

type clarityScenario struct {
	Name    string                   `json:"name"`
	Wallets map[string]clarityWallet `json:"wallets"`
	Mints   []struct {
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
		Result                 string            `json:"result"`
		ResultRepr             string            `json:"resultRepr"`
		AbortedByPostCondition bool              `json:"abortedByPostCondition"`
		Events                 []clarityEvent    `json:"events"`
		Balances               map[string]string `json:"balances"`
		Reads                  []clarityReadOnly `json:"reads"`
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

// requiredScenarios must be in every outcomes file: a file that lost them
// would prove less than it seems to.
var requiredScenarios = []string{
	"success-memo-some", "success-memo-none", "insufficient-balance", "wrong-sender", "zero-amount",
	"sender-is-recipient", "pc-deny-uncovered", "pc-deny-wrong-amount", "pc-allow-violated",
}

var conditionCodes = map[string]stacks.ConditionCode{
	"eq": stacks.ConditionEq, "gt": stacks.ConditionGt, "gteq": stacks.ConditionGtEq, "lt": stacks.ConditionLt, "lteq": stacks.ConditionLtEq,
}

// TestClarityOutcomes replays the scenarios the real Clarity VM ran on one
// devnode, in the same order, through the devnode's RPC: each signed call
// is posted, mined, then the same read-only calls are made; results, post-
// condition aborts, events and read-only answers must be identical.
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
	sum := sha256.Sum256([]byte(TokenContractSource))
	if got := hex.EncodeToString(sum[:]); doc.ContractSha256 != got {
		t.Fatalf("%s was recorded for another token.clar (sha256 %s, the embedded one is %s): regenerate it with `make test-clarity` and copy bin/clarity-outcomes.json to %s",
			path, doc.ContractSha256, got, defaultClarityOutcomes)
	}
	names := make(map[string]bool)
	for _, s := range doc.Scenarios {
		names[s.Name] = true
	}
	for _, n := range requiredScenarios {
		if !names[n] {
			t.Fatalf("%s lacks scenario %q", path, n)
		}
	}
	if len(doc.ReadOnly) == 0 {
		t.Fatalf("%s holds no read-only calls", path)
	}
	asset, err := stacks.ParseAssetID(doc.Asset)
	if err != nil || asset.Contract.Address.String() != doc.Deployer {
		t.Fatalf("asset %q (deployer %s): %v", doc.Asset, doc.Deployer, err)
	}
	h := newHarness(t, Config{TokenAsset: doc.Asset})
	t.Logf("replaying %d scenarios and %d read-only calls from %s (%s, clarinet-sdk %s, epoch %s)",
		len(doc.Scenarios), len(doc.ReadOnly), path, doc.Generator, doc.ClarinetSDK, doc.Epoch)

	for _, s := range doc.Scenarios {
		ok := t.Run(s.Name, func(t *testing.T) { replayScenario(t, h, asset, s) })
		if !ok {
			t.Fatalf("scenario %s diverged; later ones share its node and would only repeat it", s.Name)
		}
	}
	for _, ro := range doc.ReadOnly {
		sender, err := stacks.ParsePrincipal(ro.Sender)
		if err != nil {
			t.Fatal(err)
		}
		checkReadOnly(t, h, asset.Contract.String(), sender, ro)
	}
}

func replayScenario(t *testing.T, h *harness, asset stacks.AssetInfo, s clarityScenario) {
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
		h.n.FundToken(addr, mustUint(t, m.Amount))
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
	txid := h.mustAccept(tx)
	mineOne(t, h, txid)

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
	for principal, amount := range s.Outcome.Balances {
		p, err := stacks.ParsePrincipal(principal)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.n.TokenBalance(p); got != mustUint(t, amount) {
			t.Errorf("TokenBalance(%s) = %d, the VM holds %s", principal, got, amount)
		}
	}
	for _, ro := range s.Outcome.Reads {
		sender, err := stacks.ParsePrincipal(ro.Sender)
		if err != nil {
			t.Fatal(err)
		}
		checkReadOnly(t, h, asset.Contract.String(), sender, ro)
	}
}

// checkReadOnly makes the recorded read-only call through the RPC and
// compares the answer.
func checkReadOnly(t *testing.T, h *harness, contract string, sender stacks.Principal, ro clarityReadOnly) {
	t.Helper()
	args := make([]stacks.ClarityValue, len(ro.Args))
	for i, a := range ro.Args {
		args[i] = mustClarity(t, a)
	}
	got := h.callRead(t, contract, ro.Function, sender, args...)
	want := CallReadResponse{Okay: ro.Okay, Result: ro.Result, Cause: ro.Cause}
	if got != want {
		t.Errorf("%s(%s)\n got %+v\nwant %+v", ro.Function, strings.Join(ro.Args, ", "), got, want)
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
