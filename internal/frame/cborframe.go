// Framing: CBOR watch frames (application/cbor-seq) cut from the Scanner's
// buffer. A CBOR sequence has no separators: each data item delimits itself,
// so the end of a frame is found by walking the heads of the item's nested
// data items, as client-go's frame reader (fxamacker/cbor's Decoder with its
// default options) does, but resumably: the walk goes on from where it
// stopped when more bytes arrive instead of starting the item over.

package frame

import (
	"encoding/binary"
	"errors"
	"math"
)

// Limits of the cbor.Decoder client-go's CBOR framer reads with (the
// defaults of fxamacker/cbor v2.9.1): deeper or larger items are not
// well-formed to it.
const (
	cborMaxNestedLevels  = 32
	cborMaxArrayElements = 131072
	cborMaxMapPairs      = 131072
)

// CBOR major types.
const (
	cborUint   = 0
	cborNint   = 1
	cborBytes  = 2
	cborText   = 3
	cborArray  = 4
	cborMap    = 5
	cborTag    = 6
	cborSimple = 7
)

const (
	cborBreak          = 0xff
	cborNull           = 0xf6
	cborSelfDescribed  = 55799 // the tag kube-apiserver opens every item with
	cborIndefinite     = 31    // additional information of an indefinite length
	cborBignumPositive = 2
	cborBignumNegative = 3
)

// Reasons a CBOR data item is not well-formed, to client-go's frame reader or
// to the decode mode apimachinery decodes a watch event with.
var (
	errCBORHead        = errors.New("CBOR head with reserved additional information")
	errCBORBreak       = errors.New(`CBOR "break" outside an indefinite-length item`)
	errCBORSimple      = errors.New("CBOR simple value below 32 in two bytes")
	errCBORChunk       = errors.New("CBOR indefinite-length string chunk of another type or itself indefinite")
	errCBOROddMap      = errors.New("CBOR indefinite-length map ends after a key")
	errCBORLength      = errors.New("CBOR length overflows an int")
	errCBORTooDeep     = errors.New("CBOR data item nested deeper than 32 levels")
	errCBORTooMany     = errors.New("CBOR array or map with more than 131072 elements")
	errCBORFloat       = errors.New("CBOR floating-point NaN or infinity")
	errCBORBignum      = errors.New("CBOR bignum tag")
	errCBORNotWellForm = errors.New("CBOR data item is not well-formed")
)

// cborLevel is one open container of the item being walked.
type cborLevel struct {
	major      uint8 // cborArray, cborMap, cborTag, or the string type of an indefinite-length string
	indefinite bool
	remaining  int // data items still to come in a definite-length array or map
	count      int // data items seen in an indefinite-length array or map
	outerDepth int // the walk's depth to restore when the level closes
}

// cborScanner holds the state of the CBOR frame being walked and what a
// whole frame says.
type cborScanner struct {
	pos    int // bytes of the current item walked so far, from the Scanner's start
	depth  int // nesting depth of the next data item, as fxamacker/cbor counts it
	levels []cborLevel
	// laxErr is the first thing in the item that the decode mode of the
	// watch event serializer refuses but the frame reader does not (NaN,
	// infinity, bignums). It makes the item invalid once it is whole; a
	// stream that ends first ends torn, as it does for client-go.
	laxErr error

	fields cborFields
}

func (c *cborScanner) reset() {
	c.pos, c.depth, c.levels, c.laxErr = 0, 0, c.levels[:0], nil
}

// nextCBOR is Scan for CBOR streams.
func (s *Scanner) nextCBOR() (Frame, error) {
	c := &s.cbor
	c.reset()
	for {
		b := s.buf[s.start:s.end]
		done, err := c.walk(b)
		switch {
		case err != nil:
			return Frame{}, s.invalid(0, err)
		case done:
			if c.pos > s.maxSize {
				return Frame{}, s.fail(s.tooLarge(c.pos))
			}
			if c.laxErr != nil {
				return Frame{}, s.invalid(0, c.laxErr)
			}
			fr := Frame{Raw: b[:c.pos]}
			if err := c.fields.event(fr.Raw, &fr.Event); err != nil {
				return Frame{}, s.invalid(0, err)
			}
			s.returned = c.pos
			return fr, nil
		case len(b) > s.maxSize:
			return Frame{}, s.fail(s.tooLarge(len(b)))
		}
		if !s.fill() {
			return Frame{}, s.endOfStream(s.end > s.start)
		}
	}
}

// walk goes on walking the item that starts at b[0] from c.pos. It reports
// done once the item is whole (it is then b[:c.pos]), an error for an item
// that is not well-formed, and neither when it needs more bytes. It checks
// what fxamacker/cbor's Decoder checks, in the same order, so that a torn
// item is refused exactly when client-go would refuse it too.
func (c *cborScanner) walk(b []byte) (bool, error) {
	for c.pos < len(b) {
		var top *cborLevel
		if n := len(c.levels); n > 0 {
			top = &c.levels[n-1]
		}
		initial := b[c.pos]
		if top != nil && top.indefinite {
			if initial == cborBreak {
				if top.major == cborMap && top.count%2 == 1 {
					return false, errCBOROddMap
				}
				c.pos++
				if done, err := c.close(); done || err != nil {
					return done, err
				}
				continue
			}
			if (top.major == cborBytes || top.major == cborText) &&
				(initial>>5 != top.major || initial&31 == cborIndefinite) {
				return false, errCBORChunk
			}
		}
		major, ai, val, size, err := cborHead(b[c.pos:])
		if err != nil {
			return false, err
		}
		if size == 0 {
			return false, nil // the head is not all here yet
		}
		switch major {
		case cborBytes, cborText:
			if ai == cborIndefinite {
				c.pos += size
				c.levels = append(c.levels, cborLevel{major: major, indefinite: true, outerDepth: c.depth})
				continue
			}
			if val > math.MaxInt {
				return false, errCBORLength
			}
			if uint64(len(b)-c.pos-size) < val {
				return false, nil
			}
			c.pos += size + int(val)
		case cborArray, cborMap:
			if c.depth+1 > cborMaxNestedLevels {
				return false, errCBORTooDeep
			}
			level := cborLevel{major: major, indefinite: ai == cborIndefinite, outerDepth: c.depth}
			if !level.indefinite {
				switch {
				case val > math.MaxInt:
					return false, errCBORLength
				case major == cborArray && val > cborMaxArrayElements, major == cborMap && val > cborMaxMapPairs:
					return false, errCBORTooMany
				}
				level.remaining = int(val)
				if major == cborMap {
					level.remaining *= 2
				}
			}
			c.pos += size
			if level.indefinite || level.remaining > 0 {
				c.levels = append(c.levels, level)
				c.depth++
				continue
			}
		case cborTag:
			// Tags on tags deepen the item after the first, as the Decoder
			// counts them.
			chained := top != nil && top.major == cborTag
			if chained && c.depth+1 > cborMaxNestedLevels {
				return false, errCBORTooDeep
			}
			if (val == cborBignumPositive || val == cborBignumNegative) && c.laxErr == nil {
				c.laxErr = errCBORBignum
			}
			c.pos += size
			c.levels = append(c.levels, cborLevel{major: cborTag, remaining: 1, outerDepth: c.depth})
			if chained {
				c.depth++
			}
			continue
		case cborSimple:
			if ai >= 25 && ai <= 27 && !finite(ai, val) && c.laxErr == nil {
				c.laxErr = errCBORFloat
			}
			c.pos += size
		default: // integers
			c.pos += size
		}
		if done, err := c.itemDone(); done || err != nil {
			return done, err
		}
	}
	return false, nil
}

// itemDone counts a data item just walked in the levels that hold it, closing
// those it completes. It reports whether the frame's item is whole.
func (c *cborScanner) itemDone() (bool, error) {
	for len(c.levels) > 0 {
		top := &c.levels[len(c.levels)-1]
		switch {
		case top.major == cborTag:
			// The tag's content is its whole item.
		case top.indefinite:
			if top.major == cborBytes || top.major == cborText {
				return false, nil // one more chunk
			}
			top.count++
			if top.major == cborArray && top.count > cborMaxArrayElements ||
				top.major == cborMap && top.count%2 == 0 && top.count/2 > cborMaxMapPairs {
				return false, errCBORTooMany
			}
			return false, nil
		default:
			top.remaining--
			if top.remaining > 0 {
				return false, nil
			}
		}
		c.depth = top.outerDepth
		c.levels = c.levels[:len(c.levels)-1]
	}
	return true, nil
}

// close ends the indefinite-length level on top at its "break", which
// completes a data item of the level below.
func (c *cborScanner) close() (bool, error) {
	top := c.levels[len(c.levels)-1]
	c.depth = top.outerDepth
	c.levels = c.levels[:len(c.levels)-1]
	return c.itemDone()
}

// cborHead reads the head of the data item at the start of b: its major type,
// additional information, argument and size in bytes. Size 0 means the head
// is not all in b.
func cborHead(b []byte) (major, ai uint8, val uint64, size int, err error) {
	major, ai = b[0]>>5, b[0]&31
	switch {
	case ai < 24:
		return major, ai, uint64(ai), 1, nil
	case ai == 24:
		if len(b) < 2 {
			return major, ai, 0, 0, nil
		}
		if major == cborSimple && b[1] < 32 {
			return 0, 0, 0, 0, errCBORSimple
		}
		return major, ai, uint64(b[1]), 2, nil
	case ai == 25:
		if len(b) < 3 {
			return major, ai, 0, 0, nil
		}
		return major, ai, uint64(binary.BigEndian.Uint16(b[1:])), 3, nil
	case ai == 26:
		if len(b) < 5 {
			return major, ai, 0, 0, nil
		}
		return major, ai, uint64(binary.BigEndian.Uint32(b[1:])), 5, nil
	case ai == 27:
		if len(b) < 9 {
			return major, ai, 0, 0, nil
		}
		return major, ai, binary.BigEndian.Uint64(b[1:]), 9, nil
	case ai == cborIndefinite:
		switch major {
		case cborUint, cborNint, cborTag:
			return 0, 0, 0, 0, errCBORHead
		case cborSimple:
			return 0, 0, 0, 0, errCBORBreak
		}
		return major, ai, 0, 1, nil
	}
	return 0, 0, 0, 0, errCBORHead
}

// finite reports whether the float of additional information ai (25, 26 or
// 27: half, single or double precision) with bits val is neither NaN nor an
// infinity, which apimachinery's decode mode refuses.
func finite(ai uint8, val uint64) bool {
	switch ai {
	case 25:
		return val&0x7c00 != 0x7c00
	case 26:
		return val&0x7f800000 != 0x7f800000
	}
	return val&0x7ff0000000000000 != 0x7ff0000000000000
}
