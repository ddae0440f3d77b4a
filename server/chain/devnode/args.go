package devnode

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/stxfaucet/faucet-operator/server/chain/node"
	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// param is one parameter of a contract function: its type's Debug form
// and whether a value is admitted (TypeSignature::admits). inner is an
// optional's value type, into which the argument checker recurses.
type param struct {
	debug  string
	admits func(stacks.ClarityValue) bool
	inner  *param
}

var (
	paramUInt = param{"UIntType", func(v stacks.ClarityValue) bool { _, ok := v.(stacks.UInt); return ok }, nil}
	// A principal parameter admits standard and contract principals.
	paramPrincipal = param{"PrincipalType", func(v stacks.ClarityValue) bool { _, ok := v.(stacks.Principal); return ok }, nil}
	// paramMemo is SIP-010 transfer's (optional (buff 34)).
	paramMemo = optionalParam(bufferParam(stacks.SIP010MaxMemo))
)

// bufferParam is (buff n).
func bufferParam(n int) param {
	return param{fmt.Sprintf("SequenceType(BufferType(BufferLength(%d)))", n), func(v stacks.ClarityValue) bool {
		b, ok := v.(stacks.Buffer)
		return ok && len(b) <= n
	}, nil}
}

// optionalParam is (optional inner).
func optionalParam(inner param) param {
	return param{"OptionalType(" + inner.debug + ")", func(v stacks.ClarityValue) bool {
		o, ok := v.(stacks.Optional)
		return ok && (o.Value == nil || inner.admits(o.Value))
	}, &inner}
}

// checkArgs is the argument check of a contract call at admission: the
// count, then each argument's type in order, the first mismatch reported
// as BadFunctionArgument with the message stacks-core prints.
func checkArgs(params []param, args []stacks.ClarityValue) (string, map[string]any) {
	badArg := func(msg string) (string, map[string]any) {
		return node.ReasonBadFunctionArgument, map[string]any{"message": msg}
	}
	if len(args) != len(params) {
		return badArg(fmt.Sprintf("IncorrectArgumentCount(%d, %d)", len(params), len(args)))
	}
	for i, p := range params {
		if p.admits(args[i]) {
			continue
		}
		// The Clarity 2 checker recurses into an optional, so a bad value
		// inside one is reported as the inner types.
		want, got := p, args[i]
		for o, ok := got.(stacks.Optional); ok && o.Value != nil && want.inner != nil; o, ok = got.(stacks.Optional) {
			want, got = *want.inner, o.Value
		}
		return badArg(fmt.Sprintf("TypeError(%s, %s)", want.debug, typeDebug(got)))
	}
	return "", nil
}

// typeDebug approximates the Debug form of TypeSignature::type_of(v) that
// stacks-core prints in a TypeError (a list's entry type is its first
// element's, not the least supertype of all of them).
func typeDebug(v stacks.ClarityValue) string {
	switch v := v.(type) {
	case stacks.Int:
		return "IntType"
	case stacks.UInt:
		return "UIntType"
	case stacks.Bool:
		return "BoolType"
	case stacks.Principal:
		return "PrincipalType"
	case stacks.Buffer:
		return fmt.Sprintf("SequenceType(BufferType(BufferLength(%d)))", len(v))
	case stacks.StringASCII:
		return fmt.Sprintf("SequenceType(StringType(ASCII(BufferLength(%d))))", len(v))
	case stacks.StringUTF8:
		return fmt.Sprintf("SequenceType(StringType(UTF8(StringUTF8Length(%d))))", 4*utf8.RuneCountInString(string(v)))
	case stacks.Optional:
		if v.Value == nil {
			return "OptionalType(NoType)"
		}
		return "OptionalType(" + typeDebug(v.Value) + ")"
	case stacks.Response:
		if v.Ok {
			return "ResponseType((" + typeDebug(v.Value) + ", NoType))"
		}
		return "ResponseType((NoType, " + typeDebug(v.Value) + "))"
	case stacks.List:
		entry := "NoType"
		if len(v) > 0 {
			entry = typeDebug(v[0])
		}
		return fmt.Sprintf("SequenceType(ListType(ListTypeData { max_len: %d, entry_type: %s }))", len(v), entry)
	case stacks.Tuple:
		var b strings.Builder
		b.WriteString("TupleType(TupleTypeSignature {")
		for _, e := range v {
			fmt.Fprintf(&b, " %q: %s,", e.Name, typeDisplay(e.Value))
		}
		b.WriteString("})")
		return b.String()
	}
	return "NoType"
}

// typeDisplay approximates TypeSignature's Display (Clarity syntax).
func typeDisplay(v stacks.ClarityValue) string {
	switch v := v.(type) {
	case stacks.Int:
		return "int"
	case stacks.UInt:
		return "uint"
	case stacks.Bool:
		return "bool"
	case stacks.Principal:
		return "principal"
	case stacks.Buffer:
		return fmt.Sprintf("(buff %d)", len(v))
	case stacks.StringASCII:
		return fmt.Sprintf("(string-ascii %d)", len(v))
	case stacks.StringUTF8:
		return fmt.Sprintf("(string-utf8 %d)", 4*utf8.RuneCountInString(string(v)))
	case stacks.Optional:
		if v.Value == nil {
			return "(optional UnknownType)"
		}
		return "(optional " + typeDisplay(v.Value) + ")"
	case stacks.Response:
		if v.Ok {
			return "(response " + typeDisplay(v.Value) + " UnknownType)"
		}
		return "(response UnknownType " + typeDisplay(v.Value) + ")"
	case stacks.List:
		entry := "UnknownType"
		if len(v) > 0 {
			entry = typeDisplay(v[0])
		}
		return fmt.Sprintf("(list %d %s)", len(v), entry)
	case stacks.Tuple:
		var b strings.Builder
		b.WriteString("(tuple")
		for _, e := range v {
			fmt.Fprintf(&b, " (%s %s)", e.Name, typeDisplay(e.Value))
		}
		b.WriteString(")")
		return b.String()
	}
	return "UnknownType"
}
