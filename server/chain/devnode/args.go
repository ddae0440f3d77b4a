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

// typeNotation is one way of writing a value's Clarity type: the Debug form
// of TypeSignature that stacks-core prints in a TypeError, or its Display
// form (Clarity syntax). Formats take a length or an inner type.
type typeNotation struct {
	atoms                  map[string]string // by Go type name: Int, UInt, Bool, Principal
	buff, ascii, utf8      string            // %d: the length
	unknown                string            // a type nothing fixes (none, the other side of a response)
	optional               string            // %s: the inner type
	responseOk, responseEr string            // %s: the known side
	list                   string            // %d: the length, %s: the entry type
	tupleOpen, tupleClose  string
	tupleEntry             string // %s or %q: the name, %s: the value's Display form
}

var (
	// debugTypes approximates the Debug form of TypeSignature::type_of(v)
	// (a list's entry type is its first element's, not the least supertype
	// of all of them).
	debugTypes = &typeNotation{
		atoms:      map[string]string{"Int": "IntType", "UInt": "UIntType", "Bool": "BoolType", "Principal": "PrincipalType"},
		buff:       "SequenceType(BufferType(BufferLength(%d)))",
		ascii:      "SequenceType(StringType(ASCII(BufferLength(%d))))",
		utf8:       "SequenceType(StringType(UTF8(StringUTF8Length(%d))))",
		unknown:    "NoType",
		optional:   "OptionalType(%s)",
		responseOk: "ResponseType((%s, NoType))",
		responseEr: "ResponseType((NoType, %s))",
		list:       "SequenceType(ListType(ListTypeData { max_len: %d, entry_type: %s }))",
		tupleOpen:  "TupleType(TupleTypeSignature {",
		tupleEntry: " %q: %s,",
		tupleClose: "})",
	}
	// displayTypes approximates TypeSignature's Display (Clarity syntax).
	displayTypes = &typeNotation{
		atoms:      map[string]string{"Int": "int", "UInt": "uint", "Bool": "bool", "Principal": "principal"},
		buff:       "(buff %d)",
		ascii:      "(string-ascii %d)",
		utf8:       "(string-utf8 %d)",
		unknown:    "UnknownType",
		optional:   "(optional %s)",
		responseOk: "(response %s UnknownType)",
		responseEr: "(response UnknownType %s)",
		list:       "(list %d %s)",
		tupleOpen:  "(tuple",
		tupleEntry: " (%s %s)",
		tupleClose: ")",
	}
)

func typeDebug(v stacks.ClarityValue) string { return debugTypes.of(v) }

// of writes v's type in this notation.
func (n *typeNotation) of(v stacks.ClarityValue) string {
	switch v := v.(type) {
	case stacks.Int:
		return n.atoms["Int"]
	case stacks.UInt:
		return n.atoms["UInt"]
	case stacks.Bool:
		return n.atoms["Bool"]
	case stacks.Principal:
		return n.atoms["Principal"]
	case stacks.Buffer:
		return fmt.Sprintf(n.buff, len(v))
	case stacks.StringASCII:
		return fmt.Sprintf(n.ascii, len(v))
	case stacks.StringUTF8:
		// Clarity sizes a UTF-8 string at four bytes a character.
		return fmt.Sprintf(n.utf8, 4*utf8.RuneCountInString(string(v)))
	case stacks.Optional:
		inner := n.unknown
		if v.Value != nil {
			inner = n.of(v.Value)
		}
		return fmt.Sprintf(n.optional, inner)
	case stacks.Response:
		if v.Ok {
			return fmt.Sprintf(n.responseOk, n.of(v.Value))
		}
		return fmt.Sprintf(n.responseEr, n.of(v.Value))
	case stacks.List:
		entry := n.unknown
		if len(v) > 0 {
			entry = n.of(v[0])
		}
		return fmt.Sprintf(n.list, len(v), entry)
	case stacks.Tuple:
		var b strings.Builder
		b.WriteString(n.tupleOpen)
		for _, e := range v {
			fmt.Fprintf(&b, n.tupleEntry, e.Name, displayTypes.of(e.Value))
		}
		b.WriteString(n.tupleClose)
		return b.String()
	}
	return n.unknown
}
