package frame

// Separator hands over the separator bytes (JSON whitespace) that follow the
// last frame Next returned, reading once from the stream if nothing is
// buffered: a frame whose newline had not arrived when it was returned gets
// it as soon as it arrives, so a reader that splits lines does not run one
// event behind. It returns nil for protobuf and CBOR, after an error, and when the next byte starts a frame. A read error
// is kept for the next call to Next. The bytes are valid until then.
func (s *Scanner) Separator() []byte {
	if s.encoding != JSON || s.err != nil {
		return nil
	}
	s.consume(s.returned)
	s.returned = 0
	if s.start == s.end && !s.fill() {
		return nil
	}
	b := s.buf[s.start:s.end]
	n := leadingSpace(b)
	s.returned = n
	return b[:n]
}
