package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// CallReadOnly is the call name of read-only contract calls.
const CallReadOnly = "call_read"

// ReadOnlyError is a read-only call the node ran and refused: okay false,
// with the node's cause (a runtime error, an unknown function, a check
// failure). It is an answer about the call, not about the node's health.
type ReadOnlyError struct {
	Function string
	Cause    string
}

func (e *ReadOnlyError) Error() string {
	return fmt.Sprintf("node call-read %s: %s", e.Function, excerpt([]byte(e.Cause)))
}

// readOnlyRequest is the body of POST /v2/contracts/call-read/…: the
// caller's principal and each argument as 0x-prefixed Clarity hex.
type readOnlyRequest struct {
	Sender    string   `json:"sender"`
	Arguments []string `json:"arguments"`
}

type readOnlyResponse struct {
	Okay   bool   `json:"okay"`
	Result string `json:"result"`
	Cause  string `json:"cause"`
}

// CallReadOnly runs a read-only function at the chain tip through
// POST /v2/contracts/call-read/{address}/{contract}/{function} and decodes
// its Clarity result. A call the node refused is a *ReadOnlyError.
func (c *Client) CallReadOnly(ctx context.Context, contract stacks.ContractID, function string, sender stacks.Principal, args ...stacks.ClarityValue) (v stacks.ClarityValue, err error) {
	if err := stacks.ValidateClarityName(function); err != nil {
		return nil, fmt.Errorf("node call-read: function: %w", err)
	}
	defer c.observe(CallReadOnly, time.Now(), &err)
	req := readOnlyRequest{Sender: sender.String(), Arguments: make([]string, len(args))}
	for i, a := range args {
		req.Arguments[i] = "0x" + hex.EncodeToString(stacks.SerializeClarityValue(a))
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("node call-read: encoding request: %w", err)
	}
	path := "/v2/contracts/call-read/" + url.PathEscape(contract.Address.String()) + "/" +
		url.PathEscape(contract.Name) + "/" + url.PathEscape(function)
	status, hdr, resp, err := c.do(ctx, CallReadOnly, http.MethodPost, path, body, "application/json")
	if err != nil {
		return nil, err
	}
	if status/100 != 2 {
		return nil, statusError(CallReadOnly, status, hdr, resp)
	}
	var out readOnlyResponse
	if err := json.Unmarshal(resp, &out); err != nil {
		return nil, &ResponseError{Call: CallReadOnly, Err: fmt.Errorf("decoding answer: %w", err)}
	}
	if !out.Okay {
		return nil, &ReadOnlyError{Function: function, Cause: out.Cause}
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(out.Result, "0x"))
	if err != nil {
		return nil, &ResponseError{Call: CallReadOnly, Err: fmt.Errorf("result is not hex: %w", err)}
	}
	v, err = stacks.DecodeClarityValue(raw)
	if err != nil {
		return nil, &ResponseError{Call: CallReadOnly, Err: fmt.Errorf("result: %w", err)}
	}
	return v, nil
}

// ErrNotUint is wrapped when a token read answers something other than
// (ok uint) within 64 bits.
var ErrNotUint = errors.New("not an (ok uint) within 64 bits")

// TokenBalance is a SIP-010 token's get-balance of owner, in the token's
// base units, read at the chain tip (confirmed transfers only).
func (c *Client) TokenBalance(ctx context.Context, token stacks.ContractID, owner stacks.Principal) (uint64, error) {
	v, err := c.CallReadOnly(ctx, token, "get-balance", owner, owner)
	if err != nil {
		return 0, err
	}
	return okUint64(v, "get-balance")
}

// okUint64 unwraps (ok uN) into a uint64.
func okUint64(v stacks.ClarityValue, function string) (uint64, error) {
	r, ok := v.(stacks.Response)
	if ok && r.Ok {
		if u, isUint := r.Value.(stacks.UInt); isUint {
			if n, fits := u.Uint64(); fits {
				return n, nil
			}
		}
	}
	return 0, &ResponseError{Call: CallReadOnly, Err: fmt.Errorf("%s answered %s: %w", function, describe(v), ErrNotUint)}
}

// describe names a Clarity value's type for an error message.
func describe(v stacks.ClarityValue) string {
	if v == nil {
		return "nothing"
	}
	return fmt.Sprintf("type 0x%02x", byte(v.ClarityType()))
}
