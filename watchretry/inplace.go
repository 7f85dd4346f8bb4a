package watchretry

import (
	"errors"

	"github.com/kretry/kretry/internal/frame"
)

// minInPlace is the smallest caller's slice scanned in place. Below it a
// whole frame rarely fits, and a read that finds none costs a read from the
// connection more than the buffered path would.
const minInPlace = 4 << 10

// readInPlace is Read's fast path: it reads from the connection straight
// into p, after the held-back tail of a frame that an earlier read tore,
// scans p in place and hands the caller the prefix that ends on the last
// whole frame delivered. Only the tail of a frame not yet whole is copied,
// back into the scanner's buffer, for the next read. Every frame goes
// through next exactly as on the buffered path, so the contract is the
// same: only whole frames, the resume point moves on whole valid frames,
// and a frame the stream does not deliver (an absorbed ERROR event) ends
// the prefix.
//
// It reports false when it delivered nothing (p too small for the held
// bytes or the next frame, or a state that reads no frames): the caller
// then takes the buffered path, which picks up whatever was read into p.
func (s *stream) readInPlace(p []byte) (int, bool) {
	if s.skipInPlace > 0 {
		s.skipInPlace--
		return 0, false
	}
	if len(p) < minInPlace || (s.m.phase != streaming && s.m.phase != draining) || !s.scanner.Lend(p) {
		return 0, false
	}
	held := 0 // the bytes of a frame Scan returned that the stream does not deliver
	var f frame.Frame
	for s.m.phase == streaming || s.m.phase == draining {
		err := s.scanner.Scan(&f)
		if errors.Is(err, frame.ErrNeedMore) {
			break
		}
		if err != nil {
			n := s.scanner.Return()
			s.handle(s.scanError(err))
			// The separators after the last whole frame (Trailing) follow
			// it in p: they are the caller's along with it.
			n += s.unheld()
			return n, n > 0
		}
		s.handle(frameEvent(&f))
		if !s.hasPending() {
			// Not delivered (an absorbed ERROR event): the stream breaks or
			// ends here, and the frame's bytes, the last Return counts, are
			// not the caller's.
			held = len(f.Raw)
			break
		}
		s.unheld() // f.Raw is in p, right after the frames before it
	}
	n := s.scanner.Return() - held
	if n == 0 && held == 0 {
		// The frame is larger than p: the bytes read into p were copied back.
		// Frames that size tend to come in runs; lending again at once would
		// copy every one twice.
		s.skipInPlace = skipAfterMiss
	}
	return n, n > 0
}

// skipAfterMiss is how many reads of at least minInPlace bytes take the
// buffered path after a frame did not fit in the caller's slice.
const skipAfterMiss = 64

// endsWithSpace reports whether a JSON frame ends with the separator the
// server wrote after it.
func endsWithSpace(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	switch raw[len(raw)-1] {
	case ' ', '\n', '\r', '\t':
		return true
	}
	return false
}
