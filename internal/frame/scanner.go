package frame

import (
	"errors"
	"io"
)

// initialBufferSize is the first buffer a Scanner reads into; it grows to fit
// the largest frame seen and is then reused.
const initialBufferSize = 32 << 10

// maxEmptyReads bounds how often a Reader may return 0, nil in a row before
// Next gives up with io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// Scanner reads whole watch frames from a stream. It is not safe for
// concurrent use.
type Scanner struct {
	r        io.Reader
	encoding Encoding
	maxSize  int

	buf   []byte // the stream's unconsumed bytes are buf[start:end]
	start int
	end   int
	// offset is the stream offset of buf[start].
	offset int64
	// returned is the length of the frame the last Next returned; it is
	// consumed at the start of the following Next, so Frame.Raw stays valid
	// until then.
	returned int

	readErr  error // what r returned with its last bytes; acted on once buf is used up
	err      error // terminal: every later Next returns it
	trailing []byte

	json  jsonScanner
	proto protoScanner
	cbor  cborScanner

	// lastFrame is the length of the last protobuf frame, its prefix
	// included: the next frame's is likely the same (see fillFrame).
	lastFrame int
}

// NewScanner returns a Scanner that reads frames of the given encoding from r.
// Frames longer than maxFrameSize bytes (the JSON object, the protobuf
// message after its 4-byte length, or the CBOR data item) are refused; maxFrameSize <= 0 means
// DefaultMaxFrameSize.
func NewScanner(r io.Reader, enc Encoding, maxFrameSize int) *Scanner {
	if maxFrameSize <= 0 {
		maxFrameSize = DefaultMaxFrameSize
	}
	s := &Scanner{encoding: enc, maxSize: maxFrameSize}
	s.Reset(r)
	return s
}

// Reset makes s read a new stream from r with the same encoding and limit,
// reusing its buffers (for example for the stream that resumes a broken one).
func (s *Scanner) Reset(r io.Reader) {
	s.r = r
	s.start, s.end, s.offset, s.returned = 0, 0, 0, 0
	s.readErr, s.err, s.trailing = nil, nil, nil
	s.lastFrame = 0
	s.json.reset()
	s.proto.reset()
	s.cbor.reset()
}

// Scan reads the next whole frame into f, which it overwrites whole (with
// the zero Frame on an error): a caller that reads a frame per call saves
// copying one.
//
//   - At a clean end of the stream (for JSON, nothing but whitespace after the
//     last frame; see Trailing) it returns io.EOF.
//   - If the reader ends or fails in the middle of a frame, the partial frame
//     is dropped and Scan returns the reader's error, or io.ErrUnexpectedEOF if
//     the reader returned io.EOF. A partial frame never yields an Event.
//   - A whole frame that is not a valid watch event yields an
//     *InvalidFrameError.
//   - A frame longer than the limit yields an error wrapping
//     ErrFrameTooLarge: for protobuf as soon as its length prefix is read,
//     for JSON and CBOR as soon as the limit is passed.
//
// Every error is final: later calls return it again.
func (s *Scanner) Scan(f *Frame) error {
	if s.err != nil {
		*f = Frame{}
		return s.err
	}
	s.consume(s.returned)
	s.returned = 0
	var err error
	switch s.encoding {
	case JSON:
		*f, err = s.nextJSON()
	case Protobuf:
		err = s.nextProtobuf(f)
	case CBOR:
		*f, err = s.nextCBOR()
	default:
		*f = Frame{}
		return s.fail(errors.New("frame: unknown encoding " + s.encoding.String()))
	}
	return err
}

// Trailing returns the separator bytes (JSON whitespace) read after the last
// frame Next returned and not part of any frame, once Next has returned an
// error, so that a caller relaying the stream can pass them on byte for byte.
// It is nil before that and for protobuf and CBOR streams. The bytes of a partial or
// invalid frame are never included.
func (s *Scanner) Trailing() []byte { return s.trailing }

// consume drops n bytes from the front of the buffered stream.
func (s *Scanner) consume(n int) {
	s.start += n
	s.offset += int64(n)
	if s.start == s.end {
		s.start, s.end = 0, 0
	}
}

// fill reads from r once, first making room at the end of the buffer if
// there is none. It returns false when no more bytes will come: the reader's
// error is then in s.readErr.
func (s *Scanner) fill() bool {
	if s.readErr != nil {
		return false
	}
	s.makeRoom()
	return s.read(len(s.buf))
}

// makeRoom moves the buffered bytes to the front of the buffer when it is
// full and they take at most half of it, and otherwise grows it when it is
// full: the buffer grows by doubling as bytes arrive, never on the word of
// a length prefix alone.
func (s *Scanner) makeRoom() {
	if s.end < len(s.buf) {
		return
	}
	buffered := s.end - s.start
	if s.start > 0 && buffered <= len(s.buf)/2 {
		copy(s.buf, s.buf[s.start:s.end])
	} else {
		grown := make([]byte, max(2*len(s.buf), initialBufferSize))
		copy(grown, s.buf[s.start:s.end])
		s.buf = grown
	}
	s.start, s.end = 0, buffered
}

// read reads from r once into the free bytes of the buffer before limit.
func (s *Scanner) read(limit int) bool {
	for range maxEmptyReads {
		n, err := s.r.Read(s.buf[s.end:limit])
		s.end += n
		if err != nil {
			s.readErr = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
	s.readErr = io.ErrNoProgress
	return false
}

// endOfStream is the error for a stream that ended after partial bytes
// (partial=true) or at a frame boundary.
func (s *Scanner) endOfStream(partial bool) error {
	if partial && s.readErr == io.EOF {
		return s.fail(io.ErrUnexpectedEOF)
	}
	return s.fail(s.readErr)
}

// fail records a terminal error.
func (s *Scanner) fail(err error) error {
	s.err = err
	return err
}

// invalid records and returns an *InvalidFrameError for the frame starting at
// the current position (after separators skipped).
func (s *Scanner) invalid(skipped int, reason error) error {
	return s.fail(&InvalidFrameError{Encoding: s.encoding, Offset: s.offset + int64(skipped), Err: reason})
}
