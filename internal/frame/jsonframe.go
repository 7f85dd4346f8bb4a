// Framing: JSON watch frames cut from the Scanner's buffer, with the
// separators between them kept for the caller and the size limit enforced.

package frame

import (
	"fmt"
)

// nextJSON is Scan for JSON streams.
func (s *Scanner) nextJSON() (Frame, error) {
	j := &s.json
	j.reset()
	for {
		b := s.buf[s.start:s.end]
		status, err := j.scan(b)
		switch status {
		case scanInvalid:
			s.trailing = b[:leadingSpace(b)]
			return Frame{}, s.invalid(len(s.trailing), err)
		case scanDone:
			var fr Frame
			if j.pos-j.valStart > s.maxSize {
				s.trailing = b[:j.valStart]
				return Frame{}, s.fail(s.tooLarge(j.pos - j.valStart))
			}
			if err := j.event(b[:j.pos], &fr.Event); err != nil {
				s.trailing = b[:j.valStart]
				return Frame{}, s.invalid(j.valStart, err)
			}
			// The separator the server wrote after the frame (its newline)
			// goes with it when it has arrived: a reader that splits lines
			// must not wait for the next event to see this one.
			end := j.pos + leadingSpace(b[j.pos:])
			fr.Raw = b[:end]
			s.returned = end
			return fr, nil
		}
		// Need more. Refuse to buffer past the limit, counting a run of
		// separators on its own.
		if j.state == stBeforeFrame && j.pos > s.maxSize ||
			j.state != stBeforeFrame && len(b)-j.valStart > s.maxSize {
			s.trailing = b[:leadingSpace(b)]
			return Frame{}, s.fail(s.tooLarge(len(b) - j.valStart))
		}
		if !s.fill() {
			b = s.buf[s.start:s.end]
			s.trailing = b[:leadingSpace(b)]
			return Frame{}, s.endOfStream(len(s.trailing) < len(b))
		}
	}
}

// leadingSpace returns the length of b's leading JSON whitespace.
func leadingSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			return i
		}
	}
	return len(b)
}

func (s *Scanner) tooLarge(size int) error {
	return fmt.Errorf("frame: %s frame at offset %d is more than %d bytes (%d so far): %w",
		s.encoding, s.offset, s.maxSize, size, ErrFrameTooLarge)
}
