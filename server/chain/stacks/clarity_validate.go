package stacks

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// What the node checks of a Clarity value beyond its encoding: the names,
// the string contents, the nesting and the sizes. DecodeClarityValue applies
// the same rules as it reads (clarity_decode.go).

// ValidateClarityName applies Clarity's ClarityName rule (tuple keys,
// function names): 1 to 128 bytes matching
// ^[a-zA-Z]([a-zA-Z0-9]|[-_!?+<>=/*])*$ or one of - + = / * < > <= >=.
func ValidateClarityName(name string) error {
	if len(name) == 0 || len(name) > maxClarityNameLen {
		return fmt.Errorf("%w: Clarity name %q: length %d, must be 1 to %d", ErrMalformedClarityValue, truncate(name), len(name), maxClarityNameLen)
	}
	switch name {
	case "-", "+", "=", "/", "*", "<", ">", "<=", ">=":
		return nil
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		letter := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if i == 0 && !letter {
			return fmt.Errorf("%w: Clarity name %q must start with a letter", ErrMalformedClarityValue, truncate(name))
		}
		if !letter && !(c >= '0' && c <= '9') && !strings.ContainsRune("-_!?+<>=/*", rune(c)) {
			return fmt.Errorf("%w: Clarity name %q: character %q not allowed", ErrMalformedClarityValue, truncate(name), rune(c))
		}
	}
	return nil
}

// validASCIIByte is Rust's is_ascii_alphanumeric || is_ascii_punctuation ||
// is_ascii_whitespace, which string-ascii values must satisfy.
func validASCIIByte(c byte) bool {
	return (c >= 0x20 && c <= 0x7e) || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// ValidateClarityValue checks what the node checks when it decodes v: no nil
// values, nesting at most MaxClarityDepth, lengths at most
// MaxClarityValueSize, valid names, no duplicate or empty tuples, valid
// string contents and principals, and a serialisation of at most 2 MiB.
// List item types are not compared.
func ValidateClarityValue(v ClarityValue) error {
	if err := validateCV(v, 1); err != nil {
		return err
	}
	if n := v.ClarityLen(); n > maxClaritySerialized {
		return fmt.Errorf("%w: serialises to %d bytes, at most %d", ErrMalformedClarityValue, n, maxClaritySerialized)
	}
	return nil
}

func validateCV(v ClarityValue, depth int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrMalformedClarityValue, fmt.Sprintf(format, args...))
	}
	if depth > MaxClarityDepth {
		return bad("nested deeper than %d", MaxClarityDepth)
	}
	switch v := v.(type) {
	case nil:
		return bad("nil value")
	case UInt, Int, Bool:
	case Buffer:
		if len(v) > MaxClarityValueSize {
			return bad("buffer of %d bytes, at most %d", len(v), MaxClarityValueSize)
		}
	case StringASCII:
		if len(v) > MaxClarityValueSize {
			return bad("string-ascii of %d bytes, at most %d", len(v), MaxClarityValueSize)
		}
		for i := 0; i < len(v); i++ {
			if !validASCIIByte(v[i]) {
				return bad("string-ascii byte 0x%02x at %d not allowed", v[i], i)
			}
		}
	case StringUTF8:
		if len(v) > MaxClarityValueSize {
			return bad("string-utf8 of %d bytes, at most %d", len(v), MaxClarityValueSize)
		}
		if !utf8.ValidString(string(v)) {
			return bad("string-utf8 is not valid UTF-8")
		}
	case Principal:
		if v.Address.Version >= 32 {
			return bad("address version %d out of range", v.Address.Version)
		}
		if v.IsContract() {
			if err := ValidateContractName(v.ContractName); err != nil {
				return bad("%v", err)
			}
		}
	case Optional:
		if v.Value != nil {
			return validateCV(v.Value, depth+1)
		}
	case Response:
		return validateCV(v.Value, depth+1)
	case List:
		if len(v) > MaxClarityValueSize {
			return bad("list of %d items, at most %d", len(v), MaxClarityValueSize)
		}
		for _, item := range v {
			if err := validateCV(item, depth+1); err != nil {
				return err
			}
		}
	case Tuple:
		if len(v) == 0 {
			return bad("empty tuple")
		}
		if len(v) > MaxClarityValueSize {
			return bad("tuple of %d entries, at most %d", len(v), MaxClarityValueSize)
		}
		seen := make(map[string]struct{}, len(v))
		for _, e := range v {
			if err := ValidateClarityName(e.Name); err != nil {
				return err
			}
			if _, dup := seen[e.Name]; dup {
				return bad("duplicate tuple key %q", e.Name)
			}
			seen[e.Name] = struct{}{}
			if err := validateCV(e.Value, depth+1); err != nil {
				return err
			}
		}
	default:
		return bad("unsupported value type %T", v)
	}
	return nil
}
