package frame

import (
	"encoding/binary"
	"math/bits"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// strEscaped flags a JSON string that has a backslash escape.
const strEscaped = 1

// SWAR constants: one byte repeated eight times.
const (
	ones      = 0x0101010101010101
	highBits  = 0x8080808080808080
	backslash = '\\' * ones
	// quoteFlip turns '"' (0x22) into 0x20 and keeps every control
	// character under 0x20, so that one "less than belowQuote" test finds
	// both; no other byte lands under it.
	quoteFlip  = 0x02 * ones
	belowQuote = 0x21 * ones
)

// specialBytes returns a mask whose lowest set bit marks the first byte of w
// (little endian) that is '"', '\\' or a control character. Higher bits may be
// false positives (borrows), the lowest one never is.
//
// x-k sets a byte's high bit when the byte is under k (or a borrow came from
// a lower byte that was), for bytes under 0x80; &^w drops bytes of 0x80 and
// over, which neither flip changes. Two tests: (w^quoteFlip) < 0x21 for '"'
// and control characters, (w^backslash) < 1 for '\\'.
func specialBytes(w uint64) uint64 {
	return (((w ^ quoteFlip) - belowQuote) | ((w ^ backslash) - ones)) &^ w & highBits
}

// scanStringBody scans a JSON string's content from b[i], checking it as
// encoding/json does. It returns the index of the closing quote, or
// needMoreAt >= 0 when b ends first: the index to resume from (never inside an
// escape). It sets strEscaped in flags if the string has escapes.
//
// Bytes in b's spare capacity (past len(b)) are read, never trusted, so that
// the word-at-a-time loop rarely needs a byte-wise tail.
func scanStringBody(b []byte, i int, flags *uint8) (end, needMoreAt int, err error) {
	full := b[:cap(b)]
	for {
		// indexSpecial, inlined and unrolled: this loop is where a JSON scan
		// spends its time.
		for ; i+16 <= len(full); i += 16 {
			w := full[i : i+16 : i+16]
			m1 := specialBytes(binary.LittleEndian.Uint64(w))
			m2 := specialBytes(binary.LittleEndian.Uint64(w[8:]))
			if m1|m2 != 0 {
				if m1 != 0 {
					i += bits.TrailingZeros64(m1) >> 3
				} else {
					i += 8 + bits.TrailingZeros64(m2)>>3
				}
				goto found
			}
		}
		i = indexSpecial(full, i)
	found:
		if i >= len(b) {
			return -1, len(b), nil
		}
		switch c := b[i]; {
		case c == '"':
			return i, -1, nil
		case c < ' ':
			return -1, -1, errControlInString
		}
		// A backslash escape.
		*flags |= strEscaped
		if i+1 >= len(b) {
			return -1, i, nil
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			for k := i + 2; k < i+6; k++ {
				if k >= len(b) {
					return -1, i, nil
				}
				if !isHex(b[k]) {
					return -1, -1, errBadEscape
				}
			}
			i += 6
		default:
			return -1, -1, errBadEscape
		}
	}
}

// indexSpecial returns the index of the first '"', '\\' or control character
// in b at or after i, or len(b).
func indexSpecial(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < ' ' {
			return i
		}
	}
	return len(b)
}

// isASCII reports whether s has no byte >= 0x80.
func isASCII(s []byte) bool {
	var seen uint64
	i := 0
	for ; i+8 <= len(s); i += 8 {
		seen |= binary.LittleEndian.Uint64(s[i:])
	}
	for ; i < len(s); i++ {
		seen |= uint64(s[i])
	}
	return seen&highBits == 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// hex4 decodes the four hex digits of a \u escape at s[0:4] (already checked).
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendUnquoted appends the value of a syntactically valid JSON string's
// content s, decoded the way encoding/json and sigs.k8s.io/json decode it:
// escapes resolved, invalid UTF-8 and unpaired surrogates replaced by U+FFFD.
func appendUnquoted(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			switch s[r+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := hex4(s[r+2:])
				r += 6
				if utf16.IsSurrogate(rr) {
					rr1 := rune(-1)
					if r+6 <= len(s) && s[r] == '\\' && s[r+1] == 'u' {
						rr1 = hex4(s[r+2:])
					}
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						dst = utf8.AppendRune(dst, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, s[r+1])
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			if rr == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, unicode.ReplacementChar)
			} else {
				dst = append(dst, s[r:r+size]...)
			}
			r += size
		}
	}
	return dst
}

// needsUnquote reports whether a string's content differs from its value:
// it has escapes, or non-ASCII bytes that might be invalid UTF-8.
func needsUnquote(raw []byte, flags uint8) bool { return flags&strEscaped != 0 || !isASCII(raw) }
