package stacks

import (
	"crypto/sha256"
	"fmt"
	"unicode/utf8"
)

// c32Alphabet is Crockford's base-32 alphabet as used by Stacks (no I, L, O, U).
const c32Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// c32Index maps an upper-case c32 character to its value, -1 when invalid.
var c32Index = func() [256]int8 {
	var t [256]int8
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(c32Alphabet); i++ {
		t[c32Alphabet[i]] = int8(i)
	}
	return t
}()

// maxC32Input bounds decoding so an attacker-sized string cannot drive large
// allocations; real addresses are ~41 characters, contract principals add a name.
const maxC32Input = 256

// c32Normalize reads s the way the c32check package does: upper-cased as by
// JavaScript's toUpperCase, then O→0 and I, L→1. Besides ASCII letters,
// toUpperCase turns exactly ten characters into c32 letters (ı→I, ſ→S, ß→SS
// and the ligatures ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ), so those are accepted too. The first
// character that is not c32 after normalisation is reported as typed, with
// its character position in s. No mapping lengthens its input, so the result
// is never longer than s.
func c32Normalize(s string) (string, error) {
	out := make([]byte, 0, len(s))
	pos := 0
	for i := 0; i < len(s); pos++ {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		var up string
		switch {
		case r < utf8.RuneSelf:
			c := byte(r)
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			switch c {
			case 'O':
				c = '0'
			case 'I', 'L':
				c = '1'
			}
			if c32Index[c] < 0 {
				return "", &CharError{Char: r, Pos: pos}
			}
			out = append(out, c)
			continue
		case r == 'ı':
			up = "1" // I
		case r == 'ſ':
			up = "S"
		case r == 'ß':
			up = "SS"
		case r == 'ﬀ':
			up = "FF"
		case r == 'ﬁ':
			up = "F1" // FI
		case r == 'ﬂ':
			up = "F1" // FL
		case r == 'ﬃ':
			up = "FF1" // FFI
		case r == 'ﬄ':
			up = "FF1" // FFL
		case r == 'ﬅ', r == 'ﬆ':
			up = "ST"
		default:
			return "", &CharError{Char: r, Pos: pos} // an invalid byte is RuneError
		}
		out = append(out, up...)
	}
	return string(out), nil
}

// C32Encode encodes data as c32: the big-endian integer value of data in
// base 32 without leading zero digits, prefixed by one '0' per leading zero byte.
func C32Encode(data []byte) string {
	zeros := 0
	for zeros < len(data) && data[zeros] == 0 {
		zeros++
	}
	// Each 5 output bits consume input bits from the least significant end.
	out := make([]byte, 0, len(data)*8/5+2+zeros)
	var acc uint32
	var bits uint
	for i := len(data) - 1; i >= zeros; i-- {
		acc |= uint32(data[i]) << bits
		bits += 8
		for bits >= 5 {
			out = append(out, c32Alphabet[acc&31])
			acc >>= 5
			bits -= 5
		}
	}
	if bits > 0 {
		out = append(out, c32Alphabet[acc&31])
	}
	// Drop the high-order zero digits produced by padding, then add the
	// explicit zero-byte prefix.
	for len(out) > 0 && out[len(out)-1] == '0' {
		out = out[:len(out)-1]
	}
	for range zeros {
		out = append(out, '0')
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

// C32Decode decodes a c32 string (after normalisation) into bytes: one zero
// byte per leading '0' character followed by the minimal big-endian bytes of
// the remaining value. It is the inverse of C32Encode.
func C32Decode(s string) ([]byte, error) {
	if len(s) > maxC32Input {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrBadLength, len(s), maxC32Input)
	}
	s, err := c32Normalize(s)
	if err != nil {
		return nil, err
	}
	return c32DecodeNormalized(s), nil
}

// c32DecodeNormalized decodes a string of c32 alphabet characters only.
func c32DecodeNormalized(s string) []byte {
	zeros := 0
	for zeros < len(s) && s[zeros] == '0' {
		zeros++
	}
	out := make([]byte, 0, len(s)*5/8+1+zeros)
	var acc uint32
	var bits uint
	for i := len(s) - 1; i >= zeros; i-- {
		acc |= uint32(c32Index[s[i]]) << bits
		bits += 5
		if bits >= 8 {
			out = append(out, byte(acc))
			acc >>= 8
			bits -= 8
		}
	}
	if bits > 0 && acc != 0 {
		out = append(out, byte(acc))
	}
	for len(out) > 0 && out[len(out)-1] == 0 {
		out = out[:len(out)-1]
	}
	for range zeros {
		out = append(out, 0)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// c32Checksum is the first four bytes of SHA-256(SHA-256(version ‖ data)).
func c32Checksum(version byte, data []byte) [4]byte {
	h := sha256.New()
	h.Write([]byte{version})
	h.Write(data)
	first := h.Sum(nil)
	second := sha256.Sum256(first)
	return [4]byte(second[:4])
}

// C32CheckEncode encodes version and data as c32check: the version character
// followed by c32(data ‖ checksum).
func C32CheckEncode(version byte, data []byte) (string, error) {
	if version >= 32 {
		return "", fmt.Errorf("c32check version %d out of range 0..31", version)
	}
	sum := c32Checksum(version, data)
	buf := make([]byte, 0, len(data)+4)
	buf = append(buf, data...)
	buf = append(buf, sum[:]...)
	return string(c32Alphabet[version]) + C32Encode(buf), nil
}

// C32CheckDecode reverses C32CheckEncode and verifies the checksum. Like the
// c32check package it normalises the whole string, version character included.
func C32CheckDecode(s string) (version byte, data []byte, err error) {
	if len(s) > maxC32Input {
		return 0, nil, fmt.Errorf("%w: %d bytes, at most %d", ErrBadLength, len(s), maxC32Input)
	}
	s, err = c32Normalize(s)
	if err != nil {
		return 0, nil, err
	}
	if len(s) < 2 {
		return 0, nil, fmt.Errorf("%w: c32check string too short", ErrBadLength)
	}
	v := c32Index[s[0]]
	raw := c32DecodeNormalized(s[1:])
	if len(raw) < 4 {
		return 0, nil, fmt.Errorf("%w: %d bytes decoded, need at least a 4-byte checksum", ErrBadLength, len(raw))
	}
	data, sum := raw[:len(raw)-4], raw[len(raw)-4:]
	want := c32Checksum(byte(v), data)
	if [4]byte(sum) != want {
		return 0, nil, ErrBadChecksum
	}
	return byte(v), data, nil
}
