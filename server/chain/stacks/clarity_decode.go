package stacks

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// DecodeClarityValue parses exactly one serialised Clarity value, as the node
// does without a type hint: unknown type bytes, truncation, trailing bytes,
// nesting deeper than MaxClarityDepth, lengths over MaxClarityValueSize, a
// serialisation over 2 MiB, bad names, duplicate tuple keys, empty tuples,
// non-ASCII string-ascii and invalid UTF-8 are errors wrapping
// ErrMalformedClarityValue. Tuples keep their wire order, so the result
// re-serialises to the input. List item types are not compared.
func DecodeClarityValue(b []byte) (ClarityValue, error) {
	d := decoder{buf: b, sentinel: ErrMalformedClarityValue}
	v := d.clarityValue()
	if d.err == nil && d.off != len(b) {
		d.fail("%d trailing bytes", len(b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	return v, nil
}

// clarityValue reads one value whose serialisation may span at most
// maxClaritySerialized bytes (stacks-core's BoundReader).
func (d *decoder) clarityValue() ClarityValue {
	if d.err != nil {
		return nil
	}
	full := d.buf
	if end := d.off + maxClaritySerialized; end < len(full) {
		d.buf = full[:end]
	}
	v := d.cv(1)
	d.buf = full
	return v
}

// cv reads one value at nesting depth depth (the outermost is 1): its type
// prefix, then the body that prefix announces. Each body reader returns nil
// once d.err is set.
func (d *decoder) cv(depth int) ClarityValue {
	if d.err != nil {
		return nil
	}
	if depth > MaxClarityDepth {
		d.fail("Clarity value nested deeper than %d", MaxClarityDepth)
		return nil
	}
	t := ClarityType(d.byte("Clarity type"))
	if d.err != nil {
		return nil
	}
	switch t {
	case ClarityInt, ClarityUInt:
		return d.cvInteger(t)
	case ClarityBuffer, ClarityStringASCII, ClarityStringUTF8:
		return d.cvBytes(t)
	case ClarityBoolTrue:
		return Bool(true)
	case ClarityBoolFalse:
		return Bool(false)
	case ClarityPrincipalStandard, ClarityPrincipalContract:
		return d.principalBody(byte(t))
	case ClarityResponseOk, ClarityResponseErr:
		return d.cvResponse(t, depth)
	case ClarityOptionalNone:
		return None
	case ClarityOptionalSome:
		return d.cvSome(depth)
	case ClarityList:
		return d.cvList(depth)
	case ClarityTuple:
		return d.cvTuple(depth)
	default:
		d.off--
		d.fail("unknown Clarity type 0x%02x", byte(t))
		return nil
	}
}

// cvInteger reads the 16 big-endian bytes of an int or a uint.
func (d *decoder) cvInteger(t ClarityType) ClarityValue {
	s := d.take("integer", 16)
	if s == nil {
		return nil
	}
	hi, lo := binary.BigEndian.Uint64(s), binary.BigEndian.Uint64(s[8:])
	if t == ClarityInt {
		return Int{Hi: hi, Lo: lo}
	}
	return UInt{Hi: hi, Lo: lo}
}

// cvBytes reads a length-prefixed buff, string-ascii or string-utf8 and
// checks a string's contents.
func (d *decoder) cvBytes(t ClarityType) ClarityValue {
	n := d.clarityLen("length")
	s := d.take("contents", n)
	if d.err != nil {
		return nil
	}
	switch t {
	case ClarityBuffer:
		return Buffer(slices.Clone(s))
	case ClarityStringASCII:
		for i, c := range s {
			if !validASCIIByte(c) {
				d.fail("string-ascii byte 0x%02x at %d not allowed", c, i)
				return nil
			}
		}
		return StringASCII(s)
	default:
		if !utf8.Valid(s) {
			d.fail("string-utf8 is not valid UTF-8")
			return nil
		}
		return StringUTF8(s)
	}
}

// cvResponse reads the value of (ok …) or (err …).
func (d *decoder) cvResponse(t ClarityType, depth int) ClarityValue {
	v := d.cv(depth + 1)
	if d.err != nil {
		return nil
	}
	return Response{Ok: t == ClarityResponseOk, Value: v}
}

// cvSome reads the value of (some …).
func (d *decoder) cvSome(depth int) ClarityValue {
	v := d.cv(depth + 1)
	if d.err != nil {
		return nil
	}
	return Some(v)
}

// cvList reads a list's length and items.
func (d *decoder) cvList(depth int) ClarityValue {
	n := d.clarityLen("list length")
	if d.err != nil {
		return nil
	}
	// Every item takes at least one byte: never allocate for more.
	l := make(List, 0, min(n, len(d.buf)-d.off))
	for range n {
		v := d.cv(depth + 1)
		if d.err != nil {
			return nil
		}
		l = append(l, v)
	}
	return l
}

// cvTuple reads a tuple's length and entries, in wire order, refusing an
// empty tuple and duplicate keys.
func (d *decoder) cvTuple(depth int) ClarityValue {
	n := d.clarityLen("tuple length")
	if d.err == nil && n == 0 {
		d.fail("empty tuple")
	}
	if d.err != nil {
		return nil
	}
	// Every entry takes at least three bytes.
	t := make(Tuple, 0, min(n, (len(d.buf)-d.off)/3))
	keys := tupleKeys{n: n}
	for range n {
		name := d.clarityName("tuple key")
		if d.err != nil {
			return nil
		}
		if keys.seen(t, name) {
			d.fail("duplicate tuple key %q", name)
			return nil
		}
		v := d.cv(depth + 1)
		if d.err != nil {
			return nil
		}
		t = append(t, TupleEntry{Name: name, Value: v})
	}
	return t
}

// tupleKeys finds a duplicate key among a tuple's n entries as they are
// read: by scanning the entries read so far while there are fewer than 16,
// then in a set of the names, made on first use.
type tupleKeys struct {
	n   int
	set map[string]struct{}
}

// seen reports whether name is a key of t, the entries read so far, and
// remembers it once the set is in use.
func (k *tupleKeys) seen(t Tuple, name string) bool {
	if k.set == nil && len(t) < 16 {
		for _, e := range t {
			if e.Name == name {
				return true
			}
		}
		return false
	}
	if k.set == nil {
		k.set = make(map[string]struct{}, k.n)
		for _, e := range t {
			k.set[e.Name] = struct{}{}
		}
	}
	_, dup := k.set[name]
	k.set[name] = struct{}{}
	return dup
}

// clarityLen reads a u32 length and refuses one over MaxClarityValueSize.
func (d *decoder) clarityLen(field string) int {
	n := d.u32(field)
	if d.err == nil && n > MaxClarityValueSize {
		d.fail("%s %d exceeds %d", field, n, MaxClarityValueSize)
	}
	return int(n)
}

// clarityName reads a length-prefixed ClarityName.
func (d *decoder) clarityName(field string) string {
	return d.name(field, 1, maxClarityNameLen, ValidateClarityName)
}
