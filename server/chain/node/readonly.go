package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"

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
	defer c.rc.Observe(CallReadOnly)(&err)
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
	resp, err := c.rc.Do(ctx, CallReadOnly, http.MethodPost, path, body, "application/json")
	if err != nil {
		return nil, err
	}
	if resp.Status/100 != 2 {
		return nil, statusError(CallReadOnly, resp)
	}
	var out readOnlyResponse
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		return nil, responseError(CallReadOnly, fmt.Errorf("decoding answer: %w", err))
	}
	if !out.Okay {
		return nil, &ReadOnlyError{Function: function, Cause: out.Cause}
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(out.Result, "0x"))
	if err != nil {
		return nil, responseError(CallReadOnly, fmt.Errorf("result is not hex: %w", err))
	}
	v, err = stacks.DecodeClarityValue(raw)
	if err != nil {
		return nil, responseError(CallReadOnly, fmt.Errorf("result: %w", err))
	}
	return v, nil
}

// ErrNotUint is wrapped when a token read answers something other than
// (ok uint) within 64 bits.
var ErrNotUint = errors.New("not an (ok uint) within 64 bits")

// ErrNotASCII is wrapped when a token read answers something other than
// (ok (string-ascii …)), which SIP-010's get-name and get-symbol return.
var ErrNotASCII = errors.New("not an (ok (string-ascii …))")

// ErrDecimalsRange is wrapped when get-decimals answers more than 255,
// which no amount could be shown with.
var ErrDecimalsRange = errors.New("decimals beyond 255")

// The SIP-010 read-only functions the client calls.
const (
	fnGetBalance  = "get-balance"
	fnGetDecimals = "get-decimals"
	fnGetSymbol   = "get-symbol"
	fnGetName     = "get-name"
)

// TokenBalance is a SIP-010 token's get-balance of owner, in the token's
// base units, read at the chain tip (confirmed transfers only).
func (c *Client) TokenBalance(ctx context.Context, token stacks.ContractID, owner stacks.Principal) (uint64, error) {
	v, err := c.CallReadOnly(ctx, token, fnGetBalance, owner, owner)
	if err != nil {
		return 0, err
	}
	return okUint64(v, fnGetBalance)
}

// TokenMetadata is what a SIP-010 token says of itself through its
// read-only functions.
type TokenMetadata struct {
	Decimals uint8  // get-decimals: base units are 10^-Decimals of a token
	Symbol   string // get-symbol, e.g. "tUSD"
	Name     string // get-name, e.g. "Test USD"
}

// TokenMetadata reads a SIP-010 token's get-decimals, get-symbol and
// get-name at the chain tip, as the contract's deployer (any sender will
// do: the getters read no caller). Errors are those of CallReadOnly (a
// contract or function the node does not know is a *ReadOnlyError) or a
// *ResponseError wrapping ErrNotUint, ErrDecimalsRange or ErrNotASCII for an
// answer of the wrong type, each with the token and the function.
func (c *Client) TokenMetadata(ctx context.Context, token stacks.ContractID) (TokenMetadata, error) {
	var md TokenMetadata
	sender := stacks.Principal{Address: token.Address}
	wrap := func(err error) (TokenMetadata, error) {
		return TokenMetadata{}, fmt.Errorf("node token metadata of %s: %w", token, err)
	}
	v, err := c.CallReadOnly(ctx, token, fnGetDecimals, sender)
	if err != nil {
		return wrap(err)
	}
	d, err := okUint64(v, fnGetDecimals)
	if err != nil {
		return wrap(err)
	}
	if d > math.MaxUint8 {
		return wrap(responseError(CallReadOnly, fmt.Errorf("%s answered u%d: %w", fnGetDecimals, d, ErrDecimalsRange)))
	}
	md.Decimals = uint8(d)
	for _, f := range []struct {
		function string
		dst      *string
	}{{fnGetSymbol, &md.Symbol}, {fnGetName, &md.Name}} {
		v, err := c.CallReadOnly(ctx, token, f.function, sender)
		if err != nil {
			return wrap(err)
		}
		if *f.dst, err = okASCII(v, f.function); err != nil {
			return wrap(err)
		}
	}
	return md, nil
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
	return 0, responseError(CallReadOnly, fmt.Errorf("%s answered %s: %w", function, describe(v), ErrNotUint))
}

// okASCII unwraps (ok "…") of a string-ascii.
func okASCII(v stacks.ClarityValue, function string) (string, error) {
	if r, ok := v.(stacks.Response); ok && r.Ok {
		if s, isASCII := r.Value.(stacks.StringASCII); isASCII {
			return string(s), nil
		}
	}
	return "", responseError(CallReadOnly, fmt.Errorf("%s answered %s: %w", function, describe(v), ErrNotASCII))
}

// describe names a Clarity value's type for an error message.
func describe(v stacks.ClarityValue) string {
	if v == nil {
		return "nothing"
	}
	return fmt.Sprintf("type 0x%02x", byte(v.ClarityType()))
}
