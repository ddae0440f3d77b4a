package controllers

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// sbtcNode stands in for a Stacks node's SIP-010 reads while the devnode
// has no tokens: it answers get-balance of one token through the node's
// real wire (POST /v2/contracts/call-read/{address}/{contract}/get-balance,
// arguments as 0x-prefixed serialised Clarity, the result (ok uN) the same
// way) and hands every other request to next, a devnode serving the STX
// side. A read of another contract gets the node's 404.
type sbtcNode struct {
	token stacks.ContractID
	next  http.Handler

	mu       sync.Mutex
	balances map[string]uint64 // by owner principal
	down     bool              // answer every token read with a 503
}

func newSBTCNode(token stacks.ContractID, next http.Handler) *sbtcNode {
	return &sbtcNode{token: token, next: next, balances: map[string]uint64{}}
}

// set gives owner a balance of the token.
func (n *sbtcNode) set(owner string, balance uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.balances[owner] = balance
}

// setDown makes token reads fail as a failing node's do.
func (n *sbtcNode) setDown(down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = down
}

func (n *sbtcNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/contracts/call-read/")
	if !ok {
		n.next.ServeHTTP(w, r)
		return
	}
	n.mu.Lock()
	down := n.down
	n.mu.Unlock()
	if down {
		http.Error(w, "node failing", http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if rest != n.token.Address.String()+"/"+n.token.Name+"/get-balance" {
		http.Error(w, "No contract analysis found or trait definition not found", http.StatusNotFound)
		return
	}
	var req struct {
		Sender    string   `json:"sender"`
		Arguments []string `json:"arguments"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("bad body: %v", err), http.StatusBadRequest)
		return
	}
	owner, err := principalArg(req.Arguments)
	if err == nil {
		_, err = stacks.ParsePrincipal(req.Sender)
	}
	if err != nil {
		writeJSON(w, map[string]any{"okay": false, "cause": err.Error()})
		return
	}
	n.mu.Lock()
	bal := n.balances[owner.String()]
	n.mu.Unlock()
	result := stacks.SerializeClarityValue(stacks.Response{Ok: true, Value: stacks.NewUInt(bal)})
	writeJSON(w, map[string]any{"okay": true, "result": "0x" + hex.EncodeToString(result)})
}

// principalArg decodes get-balance's one argument, a principal.
func principalArg(args []string) (stacks.Principal, error) {
	if len(args) != 1 {
		return stacks.Principal{}, fmt.Errorf("get-balance takes 1 argument, got %d", len(args))
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(args[0], "0x"))
	if err != nil {
		return stacks.Principal{}, fmt.Errorf("argument is not hex: %w", err)
	}
	v, err := stacks.DecodeClarityValue(raw)
	if err != nil {
		return stacks.Principal{}, fmt.Errorf("argument: %w", err)
	}
	p, ok := v.(stacks.Principal)
	if !ok {
		return stacks.Principal{}, fmt.Errorf("argument is Clarity type 0x%02x, not a principal", byte(v.ClarityType()))
	}
	return p, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
