package listretry

import (
	"io"
	"sync"
)

// segmentSize is the unit a LIST body is held in. Segments are pooled, so
// that LISTs of any size reuse each other's memory (a pager's pages differ
// in length; a buffer sized to one body would fit no other), and a body of
// unknown length is never copied to grow.
const segmentSize = 256 << 10

// segmentPool holds *[]byte of segmentSize bytes.
var segmentPool = sync.Pool{New: func() any {
	segment := make([]byte, segmentSize)
	return &segment
}}

// held is a LIST body read into memory, in order: whole segments, then the
// last one, which may be short.
type held struct {
	segments [][]byte
	pooled   []*[]byte // the segments that go back to segmentPool
}

// readHeld reads body into segments, holding at most limit bytes: a pooled
// segment while a whole one fits under the limit, then one of exactly the
// room left. It reports whether the body ended within the limit. If it did
// not, the segments hold exactly limit bytes and next is the one byte read
// past them (read to learn that the body goes on); the rest is still in
// body. On a read error nothing is held and the error is returned.
func readHeld(body io.Reader, limit int) (h *held, whole bool, next []byte, err error) {
	h = &held{}
	for total := 0; total < limit; {
		segment := h.grow(limit - total)
		for len(segment) < cap(segment) {
			n, err := body.Read(segment[len(segment):cap(segment)])
			segment = segment[:len(segment)+n]
			if err == io.EOF {
				h.segments = append(h.segments, segment)
				return h, true, nil, nil
			}
			if err != nil {
				h.release()
				return nil, false, nil, err
			}
		}
		h.segments = append(h.segments, segment)
		total += len(segment)
	}
	var probe [1]byte
	for {
		n, err := body.Read(probe[:])
		switch {
		case n > 0:
			return h, false, probe[:], nil
		case err == io.EOF:
			return h, true, nil, nil
		case err != nil:
			h.release()
			return nil, false, nil, err
		}
	}
}

// grow returns an empty segment for up to room more bytes: a pooled one if
// a whole one fits, else one of exactly room bytes.
func (h *held) grow(room int) []byte {
	if room < segmentSize {
		return make([]byte, 0, room)
	}
	segment := segmentPool.Get().(*[]byte)
	h.pooled = append(h.pooled, segment)
	return (*segment)[:0]
}

// capacity is the memory the segments hold.
func (h *held) capacity() int {
	n := 0
	for _, segment := range h.segments {
		n += cap(segment)
	}
	return n
}

// release hands the pooled segments back; h must not be read after it.
func (h *held) release() {
	for _, segment := range h.pooled {
		segmentPool.Put(segment)
	}
	h.segments, h.pooled = nil, nil
}
