package frame

import (
	"errors"
	"fmt"
	"mime"
	"strconv"
)

// DefaultMaxFrameSize is the frame size limit used when NewScanner is given
// none: 16 MiB, the largest frame client-go's streaming decoder accepts.
const DefaultMaxFrameSize = 16 << 20

// Encoding is the wire format of a watch stream.
type Encoding int

const (
	// JSON is application/json (with or without ;stream=watch): WatchEvent
	// objects back to back, with optional whitespace between them.
	JSON Encoding = iota + 1
	// Protobuf is application/vnd.kubernetes.protobuf;stream=watch: each frame
	// is a 4-byte big-endian length followed by a raw metav1.WatchEvent.
	Protobuf
	// CBOR is application/cbor-seq (RFC 8742 CBOR Sequences): each frame is
	// one self-delimiting CBOR data item, a metav1.WatchEvent, with nothing
	// between frames. kube-apiserver serves it behind the
	// CBORServingAndStorage feature gate to clients that accept
	// application/cbor.
	CBOR
)

// String returns the media type of the encoding.
func (e Encoding) String() string {
	switch e {
	case JSON:
		return "application/json"
	case Protobuf:
		return "application/vnd.kubernetes.protobuf"
	case CBOR:
		return "application/cbor-seq"
	}
	return fmt.Sprintf("Encoding(%d)", int(e))
}

// EncodingFor maps a watch response's Content-Type to its Encoding. It reports
// false for every media type client-go would not decode as JSON, protobuf or
// CBOR watch frames, such as text/plain, or application/cbor, which names a
// single data item (client-go refuses it for a watch). An empty Content-Type
// is JSON, because client-go falls back to its first (JSON) serializer for
// it.
func EncodingFor(contentType string) (Encoding, bool) {
	if contentType == "" {
		return JSON, true
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		return 0, false
	}
	switch mediaType {
	case "application/json":
		return JSON, true
	case "application/vnd.kubernetes.protobuf":
		return Protobuf, true
	case "application/cbor-seq":
		return CBOR, true
	}
	return 0, false
}

// EventType is the type of a watch event.
type EventType uint8

// The watch event types an API server sends.
const (
	Added EventType = iota + 1
	Modified
	Deleted
	Bookmark
	Error
)

var eventTypeNames = [...]string{
	Added:    "ADDED",
	Modified: "MODIFIED",
	Deleted:  "DELETED",
	Bookmark: "BOOKMARK",
	Error:    "ERROR",
}

// String returns the type as it is spelled on the wire, such as "ADDED".
func (t EventType) String() string {
	if t >= Added && t <= Error {
		return eventTypeNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// eventTypeOf maps a wire spelling to its EventType, or 0.
func eventTypeOf(name []byte) EventType {
	switch string(name) {
	case "ADDED":
		return Added
	case "MODIFIED":
		return Modified
	case "DELETED":
		return Deleted
	case "BOOKMARK":
		return Bookmark
	case "ERROR":
		return Error
	}
	return 0
}

// unknownTypeError is the reason for a frame whose type is not one of the
// five watch event types.
type unknownTypeError struct{ name string }

func (e *unknownTypeError) Error() string { return "unknown watch event type " + strconv.Quote(e.name) }

// Event is what a whole frame says, learned without decoding the object.
type Event struct {
	// Type is the event type; always one of the EventType constants.
	Type EventType
	// ResourceVersion is object.metadata.resourceVersion. It is empty for an
	// object that carries none (aggregated and virtual APIs may send such
	// events; client-go decodes them) and always nil for an ERROR event (a
	// Status is no resume point). It aliases memory owned by the Scanner and
	// is valid until the next call to Scan.
	ResourceVersion []byte
	// InitialEventsEnd reports a BOOKMARK whose object is annotated
	// k8s.io/initial-events-end: "true", the end of a streaming list.
	InitialEventsEnd bool

	// The fields below are set for ERROR events only, whose object is a
	// metav1.Status.

	// Code is the Status code, such as 410 or 429.
	Code int32
	// Reason is the Status reason, such as "Expired". It may allocate:
	// errors are rare.
	Reason string
	// RetryAfterSeconds is details.retryAfterSeconds.
	RetryAfterSeconds int32
	// HasRetryAfter reports RetryAfterSeconds > 0: the server suggested a
	// delay (the test apierrors.SuggestsClientDelay makes).
	HasRetryAfter bool
}

// setStatus fills the fields of an ERROR event from its Status. An empty
// reason converts to "" without allocating.
func (ev *Event) setStatus(code int32, reason []byte, retryAfter int32) {
	ev.Code = code
	ev.Reason = string(reason)
	ev.RetryAfterSeconds = retryAfter
	ev.HasRetryAfter = retryAfter > 0
}

// setResumePoint fills the fields of a non-ERROR event from its object's
// metadata.
func (ev *Event) setResumePoint(rv []byte, eventsEnd bool) {
	ev.ResourceVersion = rv
	ev.InitialEventsEnd = ev.Type == Bookmark && eventsEnd
}

// Frame is one whole frame as read.
type Frame struct {
	// Raw is exactly the bytes consumed for this frame, including any
	// separator bytes (JSON whitespace) read before it and those already
	// read after it (the newline the server writes with each event, so that
	// a reader splitting lines need not wait for the next event); protobuf
	// and CBOR have none. It aliases the Scanner's buffer and is valid until
	// the next call to Scan.
	Raw []byte
	// Event is what the frame says.
	Event Event
}

// ErrFrameTooLarge is wrapped by the error Scan returns for a frame longer
// than the Scanner's limit.
var ErrFrameTooLarge = errors.New("watch frame larger than the limit")

// InvalidFrameError is the error Scan returns for a whole frame that is not a
// valid watch event: one that client-go's watch decoder would reject.
type InvalidFrameError struct {
	// Encoding is the stream's encoding.
	Encoding Encoding
	// Offset is the stream offset at which the frame starts.
	Offset int64
	// Err says what is wrong with the frame.
	Err error
}

// Error implements error.
func (e *InvalidFrameError) Error() string {
	return fmt.Sprintf("invalid %s watch frame at offset %d: %v", e.Encoding, e.Offset, e.Err)
}

// Unwrap returns the reason the frame is invalid.
func (e *InvalidFrameError) Unwrap() error { return e.Err }
