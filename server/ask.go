package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/stxfaucet/faucet-operator/server/guard"
)

// A drip request reaches the faucet through four doors: v1's query, v3's
// JSON body, the eligibility endpoint and the MCP drip tool. Each door only
// gathers what was typed into a question; one judge reads every question,
// so the same question gets the same verdict at every door.

// question is a drip request as typed: every value given for each field
// (two of one are ambiguous: a proxy may limit on one while the faucet
// pays the other).
type question struct {
	address  []string
	stacking []string // "true" or "false"
	size     []string // "default", "large" or "xlarge"
	// large and xlarge are the v1 BTC route's form of size.
	large, xlarge []string
}

// dripOptions are what a drip asks for beside its recipient.
type dripOptions struct {
	stacking bool // STX's stacking drip: PoX's minimum plus padding
	size     dripSize
}

// dripSize is which of BTC's three drip sizes a drip asks for.
type dripSize uint8

const (
	sizeDefault dripSize = iota
	sizeLarge
	sizeXLarge
)

// recipient is an address of an asset's chain, parsed.
type recipient interface {
	String() string
	// admit names the recipient in the admission the limits count.
	admit(adm *guard.Admission)
}

// ask is a judged question: a drip of asset to a recipient.
type ask struct {
	asset *asset
	to    recipient
	text  string // to, as the chain writes it (encoded once: logs, history, answers)
	opts  dripOptions
}

// refusal is a question the faucet will not take: its status (400), the
// body v1, eligibility and MCP answer with, and v3's {error} text with,
// where that text is the incumbent's terse one, v3's detail saying why.
type refusal struct {
	status   int
	body     errorBody
	v3       string
	v3Detail string
}

// badRequest is a 400 whose v3 text is its v1 text.
func badRequest(reason, msg string) *refusal {
	return &refusal{status: http.StatusBadRequest, body: errorBody{Error: msg, Reason: reason}, v3: msg}
}

// judge reads q as a drip of a: the address first, then the options,
// then the recipient by a's kind.
func (a *asset) judge(q question) (ask, *refusal) {
	switch {
	case len(q.address) == 0 || strings.TrimSpace(q.address[0]) == "":
		return ask{}, badRequest("address_required", "address required")
	case len(q.address) > 1:
		return ask{}, badRequest("invalid_address", "address given more than once")
	}
	o, bad := q.options()
	if bad != nil {
		return ask{}, bad
	}
	if bad := a.admits(a, o); bad != nil {
		return ask{}, bad
	}
	// Pasted addresses often carry a newline.
	to, bad := a.recipient(strings.TrimSpace(q.address[0]))
	if bad != nil {
		return ask{}, bad
	}
	return ask{asset: a, to: to, text: to.String(), opts: o}, nil
}

// options reads the question's options, of any kind.
func (q question) options() (dripOptions, *refusal) {
	var o dripOptions
	stacking, bad := boolValue("stacking", "invalid_stacking", q.stacking)
	if bad != nil {
		return o, bad
	}
	large, bad := boolValue("large", "invalid_amount", q.large)
	if bad != nil {
		return o, bad
	}
	xlarge, bad := boolValue("xlarge", "invalid_amount", q.xlarge)
	if bad != nil {
		return o, bad
	}
	o.stacking = stacking
	switch {
	case len(q.size) > 1:
		return o, badRequest("invalid_amount", "size given more than once")
	case len(q.size) == 1:
		switch q.size[0] {
		case "", "default":
		case "large":
			o.size = sizeLarge
		case "xlarge":
			o.size = sizeXLarge
		default:
			return o, badRequest("invalid_amount", "invalid size, use default, large or xlarge")
		}
	}
	switch {
	case large && xlarge, (large || xlarge) && o.size != sizeDefault:
		return o, badRequest("invalid_amount", btcBothSizes)
	case large:
		o.size = sizeLarge
	case xlarge:
		o.size = sizeXLarge
	}
	return o, nil
}

// boolValue reads a true/false option given at most once.
func boolValue(name, reason string, v []string) (bool, *refusal) {
	switch {
	case len(v) == 0:
		return false, nil
	case len(v) > 1:
		return false, badRequest(reason, name+" given more than once")
	case v[0] == "true":
		return true, nil
	case v[0] == "false":
		return false, nil
	}
	return false, badRequest(reason, fmt.Sprintf("invalid %s value, use true or false", name))
}

// refuseOptions is the admits rule of kinds without stacking or sizes.
func refuseOptions(a *asset, o dripOptions, stacking, sizes bool) *refusal {
	switch {
	case o.stacking && !stacking:
		return badRequest("invalid_stacking", "stacking drips are STX only; drop stacking=true for "+a.label())
	case o.size != sizeDefault && !sizes:
		return badRequest("invalid_amount", "size is for BTC drips only; leave it out for "+a.label())
	}
	return nil
}

// admission is the ask as the rate limits and checks count it.
func (k ask) admission() guard.Admission {
	adm := guard.Admission{Asset: string(k.asset.name), Stacking: k.opts.stacking}
	k.to.admit(&adm)
	return adm
}
