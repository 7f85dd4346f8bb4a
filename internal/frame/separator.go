package frame

// Separator hands over the separator bytes (JSON whitespace) that follow the
// last frame Next returned, reading once from the stream if nothing is
// buffered: a frame whose newline had not arrived when it was returned gets
// it as soon as it arrives, so a reader that splits lines does not run one
// event behind. open reports that the separator may not be over: it ran to
// the end of what was read, so more of it may follow (a "\r" whose "\n" has
// not arrived), or the read failed, which the next call to Next reports. It
// returns nil for protobuf and CBOR, after an error, and when the next byte
// starts a frame. The bytes are valid until the next call to Next.
func (s *Scanner) Separator() (sep []byte, open bool) {
	if s.encoding != JSON || s.err != nil {
		return nil, false
	}
	s.consume(s.returned)
	s.returned = 0
	if s.start == s.end && !s.fill() {
		return nil, true
	}
	b := s.buf[s.start:s.end]
	n := leadingSpace(b)
	s.returned = n
	return b[:n], n == len(b)
}
