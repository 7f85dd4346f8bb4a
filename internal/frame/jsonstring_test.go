package frame

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// TestSpecialBytes checks the word-at-a-time test against the byte-wise
// one for every pair of byte values at every pair of positions in a word
// (borrows run from one byte into the next), over fillers on both sides of
// each boundary: the lowest flagged byte must be the first special one.
func TestSpecialBytes(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < ' ' }
	for _, filler := range []byte{'a', ' ', '!', '#', 0x7f, 0x80, 0xff} {
		for lo := range 8 {
			for hi := lo + 1; hi < 8; hi++ {
				for c1 := range 256 {
					for c2 := range 256 {
						var w [8]byte
						for k := range w {
							w[k] = filler
						}
						w[lo], w[hi] = byte(c1), byte(c2)
						want := 8
						for k, c := range w {
							if special(c) {
								want = k
								break
							}
						}
						got := 8
						if m := specialBytes(binary.LittleEndian.Uint64(w[:])); m != 0 {
							got = bits.TrailingZeros64(m) >> 3
						}
						if got != want {
							t.Fatalf("word % x: first special byte at %d, want %d", w, got, want)
						}
					}
				}
			}
		}
	}
}
