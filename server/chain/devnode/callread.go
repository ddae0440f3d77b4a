package devnode

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stxfaucet/faucet-operator/server/chain/stacks"
)

// POST /v2/contracts/call-read/{address}/{contract}/{function}, after
// stacks-core's net/api/callreadonly.rs (checked at tag 4.0.2).
const (
	// maxCallArgumentSize is the default maximum_call_argument_size, 20 ×
	// BOUND_VALUE_SERIALIZATION_HEX: the body must be shorter.
	maxCallArgumentSize = 20 * 4 << 20

	msgCallReadWrongCT      = decodePrefix + "Invalid content-type: expected application/json"
	msgCallReadBadJSON      = decodePrefix + "Failed to parse JSON body"
	msgCallReadBadSender    = decodePrefix + "Failed to parse sender principal"
	msgCallReadBadSponsor   = decodePrefix + "Failed to parse sponsor principal"
	msgCallReadBadArgument  = decodePrefix + "Failed to deserialize argument value"
	msgCallReadBadAddress   = "Failed to decode `address`"
	msgCallReadBadFunction  = "Failed to decode `function`"
	causeNotReadOnly        = "NotReadOnly"
	causeSendManyNotModeled = "devnode: read-only execution of send-many-memo is not modelled"
)

// callReadPath is the handler's path regex: STANDARD_PRINCIPAL_REGEX_STRING,
// CONTRACT_NAME_REGEX_STRING and the lexer's CLARITY_NAME_REGEX.
var callReadPath = regexp.MustCompile(`^/v2/contracts/call-read/([0123456789ABCDEFGHJKMNPQRSTVWXYZ]{28,41})/([a-zA-Z](?:[a-zA-Z0-9]|[-_]){0,127})/((?:[0-9A-Za-z_]|[-!?+<>=/*]){1,128})$`)

// CallReadResponse is CallReadOnlyResponse: Result (a 0x-prefixed hex
// Clarity value) when Okay, else Cause.
type CallReadResponse struct {
	Okay   bool   `json:"okay"`
	Result string `json:"result,omitempty"`
	Cause  string `json:"cause,omitempty"`
}

func (s *rpcServer) postCallRead(w http.ResponseWriter, r *http.Request, m []string) {
	// try_parse_request's order: body length, content type, path captures,
	// JSON body, sender, sponsor, arguments.
	if r.ContentLength <= 0 || r.ContentLength >= maxCallArgumentSize {
		writeText(w, http.StatusBadRequest, fmt.Sprintf("%sInvalid Http request: invalid body length for CallReadOnly (%d)", decodePrefix, max(r.ContentLength, 0)))
		return
	}
	if !isJSON(contentType(r)) {
		writeText(w, http.StatusBadRequest, msgCallReadWrongCT)
		return
	}
	addr, err := stacks.ParseAddress(m[1])
	if err != nil {
		writeText(w, http.StatusBadRequest, msgCallReadBadAddress)
		return
	}
	contract := stacks.ContractID{Address: addr, Name: m[2]}
	function := m[3]
	if stacks.ValidateClarityName(function) != nil {
		writeText(w, http.StatusBadRequest, msgCallReadBadFunction)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCallArgumentSize))
	if err != nil {
		writeText(w, http.StatusBadRequest, msgReadBody)
		return
	}
	req, err := parseCallReadBody(body)
	if err != nil {
		writeText(w, http.StatusBadRequest, msgCallReadBadJSON)
		return
	}
	sender, err := stacks.ParsePrincipal(req.sender)
	if err != nil {
		writeText(w, http.StatusBadRequest, msgCallReadBadSender)
		return
	}
	if req.sponsor != nil {
		if _, err := stacks.ParsePrincipal(*req.sponsor); err != nil {
			writeText(w, http.StatusBadRequest, msgCallReadBadSponsor)
			return
		}
	}
	args := make([]stacks.ClarityValue, 0, len(req.arguments))
	for _, a := range req.arguments {
		// try_deserialize_hex_untyped: an optional 0x, then one value.
		b, err := hex.DecodeString(strings.TrimPrefix(a, "0x"))
		if err != nil {
			writeText(w, http.StatusBadRequest, msgCallReadBadArgument)
			return
		}
		v, err := stacks.DecodeClarityValue(b)
		if err != nil {
			writeText(w, http.StatusBadRequest, msgCallReadBadArgument)
			return
		}
		args = append(args, v)
	}
	writeJSON(w, http.StatusOK, s.contracts.callRead(contract, function, sender, args))
}

// callReadBody is CallReadOnlyRequestBody.
type callReadBody struct {
	sender    string
	sponsor   *string
	arguments []string
}

var errCallReadBody = errors.New("call-read body")

// parseCallReadBody decodes the body as serde_json decodes
// CallReadOnlyRequestBody, which encoding/json alone would not: field names
// are case-sensitive, a repeated known field is an error, sender and
// arguments must be present and not null (sponsor may be null), and
// unknown fields are ignored.
func parseCallReadBody(b []byte) (callReadBody, error) {
	var out callReadBody
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return out, fmt.Errorf("%w: not a JSON object", errCallReadBody)
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, fmt.Errorf("%w: %w", errCallReadBody, err)
		}
		key, _ := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return out, fmt.Errorf("%w: field %q: %w", errCallReadBody, key, err)
		}
		if key != "sender" && key != "sponsor" && key != "arguments" {
			continue
		}
		if seen[key] {
			return out, fmt.Errorf("%w: duplicate field %q", errCallReadBody, key)
		}
		seen[key] = true
		isNull := string(raw) == "null"
		switch key {
		case "sender":
			if isNull || json.Unmarshal(raw, &out.sender) != nil {
				return out, fmt.Errorf("%w: sender is not a string", errCallReadBody)
			}
		case "sponsor":
			if !isNull {
				var s string
				if json.Unmarshal(raw, &s) != nil {
					return out, fmt.Errorf("%w: sponsor is not a string", errCallReadBody)
				}
				out.sponsor = &s
			}
		case "arguments":
			var list []*string
			if isNull || json.Unmarshal(raw, &list) != nil {
				return out, fmt.Errorf("%w: arguments is not a list of strings", errCallReadBody)
			}
			out.arguments = make([]string, len(list))
			for i, s := range list {
				if s == nil {
					return out, fmt.Errorf("%w: argument %d is null", errCallReadBody, i)
				}
				out.arguments[i] = *s
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return out, fmt.Errorf("%w: %w", errCallReadBody, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return out, fmt.Errorf("%w: trailing data", errCallReadBody)
	}
	if !seen["sender"] || !seen["arguments"] {
		return out, fmt.Errorf("%w: missing sender or arguments", errCallReadBody)
	}
	return out, nil
}

// callRead runs a read-only call at the tip as the node's
// execute_contract(read_only = false) under a cost limit that allows no
// writes: a missing contract or function, a wrong argument count or type is
// okay:false with the VM error's text, a function that would write is
// okay:false "NotReadOnly", anything else okay:true with the returned value
// (an (err …) included).
func (c *contracts) callRead(contract stacks.ContractID, function string, sender stacks.Principal, args []stacks.ClarityValue) CallReadResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(cause string) CallReadResponse { return CallReadResponse{Cause: cause} }
	t := c.tokens[contract]
	switch {
	case t != nil:
	case c.sendMany != nil && contract == *c.sendMany:
		// Its functions exist, but their execution is not modelled here.
		switch function {
		case stacks.SendManyFunction, fnSendStxWithMemo:
			return fail(causeSendManyNotModeled)
		case "send-stx", "check-err":
			return fail(fmt.Sprintf("RuntimeCheck(NoSuchPublicFunction(%q, %q))", contract.String(), function))
		}
		return fail(fmt.Sprintf("RuntimeCheck(UndefinedFunction(%q))", function))
	default:
		return fail(fmt.Sprintf("RuntimeCheck(NoSuchContract(%q))", contract.String()))
	}

	params, ok := tokenParams[function]
	if !ok {
		return fail(fmt.Sprintf("RuntimeCheck(UndefinedFunction(%q))", function))
	}
	if len(args) != len(params) {
		return fail(fmt.Sprintf("RuntimeCheck(IncorrectArgumentCount(%d, %d))", len(params), len(args)))
	}
	for i, p := range params {
		if !p.admits(args[i]) {
			return fail(fmt.Sprintf("RuntimeCheck(TypeValueError(%s, %s))", p.debug, rustQuote(valueErrorString(args[i]))))
		}
	}

	var v stacks.ClarityValue
	switch function {
	case fnGetName:
		v = stacks.ResponseOk(stacks.StringASCII(t.spec.Name))
	case fnGetSymbol:
		v = stacks.ResponseOk(stacks.StringASCII(t.spec.Symbol))
	case fnGetDecimals:
		v = stacks.ResponseOk(stacks.NewUInt(uint64(t.spec.Decimals)))
	case fnGetBalance:
		v = stacks.ResponseOk(stacks.NewUInt(t.balances[args[0].(stacks.Principal).String()]))
	case fnGetTotalSupply:
		v = stacks.ResponseOk(stacks.NewUInt(t.supply))
	case fnGetTokenURI:
		v = stacks.ResponseOk(stacks.None)
	case fnTransfer:
		// The caller is both tx-sender and contract-caller. Past the
		// assertion, ft-transfer? charges a write before anything else.
		if s := args[1].(stacks.Principal); s != sender {
			v = stacks.ResponseErr(stacks.NewUInt(tokenErrNotOwner))
		} else {
			return fail(causeNotReadOnly)
		}
	case fnMint:
		if sender.String() != t.deployer {
			v = stacks.ResponseErr(stacks.NewUInt(tokenErrNotDeployer))
		} else {
			return fail(causeNotReadOnly) // ft-mint? writes
		}
	}
	return CallReadResponse{Okay: true, Result: "0x" + hex.EncodeToString(stacks.SerializeClarityValue(v))}
}

// maxErrorValueLen is MAX_ERROR_VALUE_DISPLAY_LEN: Value::to_error_string
// cuts the Debug form there and appends "...".
const maxErrorValueLen = 512

// valueErrorString is Value::to_error_string: the value's Debug form, cut
// at 512 bytes on a character boundary.
func valueErrorString(v stacks.ClarityValue) string {
	s := valueDebug(v)
	if len(s) <= maxErrorValueLen {
		return s
	}
	end := maxErrorValueLen
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "..."
}

// valueDebug is the derived Debug form of a clarity Value. It is exact for
// atoms, principals, buffers, strings, optionals and responses; for lists
// and tuples the embedded type signature is approximated (a list's entry
// type is its first element's).
func valueDebug(v stacks.ClarityValue) string {
	switch v := v.(type) {
	case stacks.Int:
		return "Int(" + v.String() + ")"
	case stacks.UInt:
		return "UInt(" + v.Big().String() + ")"
	case stacks.Bool:
		return "Bool(" + v.String() + ")"
	case stacks.Buffer:
		return "Sequence(Buffer(" + hex.EncodeToString(v) + "))"
	case stacks.StringASCII:
		return `Sequence(String("` + asciiEscape(string(v)) + `"))`
	case stacks.StringUTF8:
		var b strings.Builder
		for _, r := range string(v) {
			if r < utf8.RuneSelf {
				b.WriteString(asciiEscape(string(r)))
			} else {
				var buf [4]byte
				fmt.Fprintf(&b, `\u{%x}`, buf[:utf8.EncodeRune(buf[:], r)])
			}
		}
		return `Sequence(String(u"` + b.String() + `"))`
	case stacks.Principal:
		std := "StandardPrincipalData(" + v.Address.String() + ")"
		if !v.IsContract() {
			return "Principal(Standard(" + std + "))"
		}
		return "Principal(Contract(QualifiedContractIdentifier { issuer: " + std + `, name: ContractName("` + v.ContractName + `") }))`
	case stacks.Optional:
		if v.Value == nil {
			return "Optional(OptionalData { data: None })"
		}
		return "Optional(OptionalData { data: Some(" + valueDebug(v.Value) + ") })"
	case stacks.Response:
		return fmt.Sprintf("Response(ResponseData { committed: %t, data: %s })", v.Ok, valueDebug(v.Value))
	case stacks.List:
		items := make([]string, len(v))
		for i, e := range v {
			items[i] = valueDebug(e)
		}
		entry := "NoType"
		if len(v) > 0 {
			entry = typeDebug(v[0])
		}
		return fmt.Sprintf("Sequence(List(ListData { data: [%s], type_signature: ListTypeData { max_len: %d, entry_type: %s } }))", strings.Join(items, ", "), len(v), entry)
	case stacks.Tuple:
		sig := strings.TrimSuffix(strings.TrimPrefix(typeDebug(v), "TupleType("), ")")
		sorted := append(stacks.Tuple(nil), v...)
		for i := 1; i < len(sorted); i++ { // BTreeMap order; tuples are small
			for j := i; j > 0 && sorted[j].Name < sorted[j-1].Name; j-- {
				sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
			}
		}
		entries := make([]string, len(sorted))
		for i, e := range sorted {
			entries[i] = fmt.Sprintf("ClarityName(%q): %s", e.Name, valueDebug(e.Value))
		}
		return fmt.Sprintf("Tuple(TupleData { type_signature: %s, data_map: {%s} })", sig, strings.Join(entries, ", "))
	}
	return fmt.Sprintf("%v", v)
}

// asciiEscape is Rust's std::ascii::escape_default over each byte.
func asciiEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\\', c == '\'', c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}

// rustQuote approximates a Rust String's Debug form: quoted, with '"' and
// '\' escaped (strconv's escapes for control characters differ slightly).
func rustQuote(s string) string {
	return strconv.Quote(s)
}
