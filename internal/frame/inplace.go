// In place: frames scanned in a buffer the caller lends (its Read slice), so
// that the bytes of whole frames are never copied; only the tail of a frame
// not yet whole is kept back, in the Scanner's own buffer.

package frame

import "errors"

// ErrNeedMore is what Scan returns while a buffer is lent (see Lend) when
// the next frame does not end within the bytes already read: the lent
// buffer is full, or a frame was already returned from it and reading more
// could block. It is not terminal: after Return, Scan reads on.
var ErrNeedMore = errors.New("frame: the lent buffer holds no further whole frame")

// lent is the state of a Scanner that scans a borrowed buffer.
type lent struct {
	active bool
	own    []byte // the Scanner's own buffer, given back by Return
	// delivered reports that Scan returned a frame from the lent buffer:
	// from then on it must not read (the caller has bytes to hand on).
	delivered bool
}

// Held returns how many bytes the Scanner holds that no frame returned so
// far contains (the separators and partial frame after the last one).
func (s *Scanner) Held() int { return s.end - s.start - s.returned }

// Lend makes p the Scanner's buffer until Return: the bytes it holds are
// copied to the front of p, and Scan then
// reads into the rest of p, at most until it returns its first frame, and
// returns frames whose Raw aliases p, back to back from p[0]. When no
// further frame ends within p it returns ErrNeedMore instead of reading on.
// It reports false, and lends nothing, unless p is longer than Held.
func (s *Scanner) Lend(p []byte) bool {
	if s.err != nil || s.lent.active || len(p) <= s.Held() {
		return false
	}
	s.consume(s.returned)
	s.returned = 0
	held := copy(p, s.buf[s.start:s.end])
	s.lent = lent{active: true, own: s.buf}
	s.buf, s.start, s.end = p, 0, held
	return true
}

// Return gives the Scanner its own buffer back, with the bytes of the lent
// one that no returned frame contains: the only bytes copied in place, a
// torn frame's tail. It reports how many bytes of p the returned frames
// span: p[:n] is the caller's (after an error, Trailing follows them in p).
func (s *Scanner) Return() (n int) {
	s.consume(s.returned)
	s.returned = 0
	n = s.start
	rest := s.buf[s.start:s.end]
	own := s.lent.own
	if len(rest) > len(own) {
		own = make([]byte, max(2*len(own), initialBufferSize, len(rest)))
	}
	s.buf = own
	s.start, s.end = 0, copy(own, rest)
	s.lent = lent{}
	return n
}

// lentFill is fill for a lent buffer: it reads once into what is left of
// it, unless a frame was already returned or it is full.
func (s *Scanner) lentFill() bool {
	if s.lent.delivered || s.end == len(s.buf) {
		s.needMore = true
		return false
	}
	return s.read(len(s.buf))
}
