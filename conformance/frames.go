package conformance

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// The suite reads recorded streams with client-go's and apimachinery's own decoders, never with
// kretry's frame scanner: a conformance suite must not judge an implementation by its own parts.

// initialEventsEnd is the annotation on the BOOKMARK that ends a streaming list.
const initialEventsEnd = "k8s.io/initial-events-end"

// Event is one watch event as a caller sees it, reduced to what the suite compares.
type Event struct {
	// Type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
	Type string
	// Name is the object's name; empty for BOOKMARK and ERROR.
	Name string
	// ResourceVersion is the object's metadata.resourceVersion; empty for ERROR.
	ResourceVersion string
	// InitialEventsEnd marks the BOOKMARK that ends a streaming list.
	InitialEventsEnd bool
	// Code and Reason are the Status code and reason of an ERROR event.
	Code   int32
	Reason string
}

// String is the compact form used in failure messages, e.g. "MODIFIED cm-a@412".
func (e Event) String() string {
	switch e.Type {
	case "ERROR":
		return fmt.Sprintf("ERROR %d %s", e.Code, e.Reason)
	case "BOOKMARK":
		if e.InitialEventsEnd {
			return "BOOKMARK(initial-events-end)@" + e.ResourceVersion
		}
		return "BOOKMARK@" + e.ResourceVersion
	}
	return fmt.Sprintf("%s %s@%s", e.Type, e.Name, e.ResourceVersion)
}

// eventOf reduces a decoded watch event object to an Event.
func eventOf(typ string, obj runtime.Object) (Event, error) {
	ev := Event{Type: typ}
	if typ == "ERROR" {
		st, ok := obj.(*metav1.Status)
		if !ok {
			return ev, fmt.Errorf("ERROR event carries a %T, not a Status", obj)
		}
		ev.Code, ev.Reason = st.Code, string(st.Reason)
		return ev, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ev, err
	}
	ev.ResourceVersion = m.GetResourceVersion()
	if typ == "BOOKMARK" {
		ev.InitialEventsEnd = m.GetAnnotations()[initialEventsEnd] == "true"
	} else {
		ev.Name = m.GetName()
	}
	return ev, nil
}

// encoding is a watch stream's wire format.
type encoding int

const (
	encJSON encoding = iota
	encProtobuf
	encCBOR
)

// encodingOf maps a watch response's Content-Type to its encoding, as client-go chooses its
// stream decoder.
func encodingOf(contentType string) (encoding, error) {
	if contentType == "" {
		return encJSON, nil
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, err
	}
	switch mediaType {
	case "application/json":
		return encJSON, nil
	case "application/vnd.kubernetes.protobuf":
		return encProtobuf, nil
	case "application/cbor-seq":
		return encCBOR, nil
	}
	return 0, fmt.Errorf("unsupported watch content type %q", contentType)
}

// recordedFrame is one whole event of a recorded watch stream.
type recordedFrame struct {
	// raw is the frame's bytes, separators after it included, so that frames laid end to end
	// are the stream.
	raw   []byte
	event Event
	// initial marks the initial state of a streaming list or an RV "0"/"" watch: the frames up
	// to and including the initial-events-end BOOKMARK (or, without one, before the first
	// event that is not ADDED). A resumed watch never replays them.
	initial bool
}

// splitFrames cuts a recorded watch body into its whole events. A partial frame at the end
// (a recording cut short) is an error: fixtures hold whole streams.
func splitFrames(body []byte, enc encoding) ([]recordedFrame, error) {
	var frames []recordedFrame
	for rest := body; len(rest) > 0; {
		n, typ, obj, err := nextFrame(rest, enc)
		if err != nil {
			return nil, fmt.Errorf("frame %d at byte %d: %w", len(frames), len(body)-len(rest), err)
		}
		decoded, _, err := objectDecoder(enc).Decode(obj, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", len(frames), err)
		}
		ev, err := eventOf(typ, decoded)
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", len(frames), err)
		}
		frames = append(frames, recordedFrame{raw: rest[:n], event: ev})
		rest = rest[n:]
	}
	return frames, nil
}

// nextFrame finds the first frame of b: its length (with trailing separators), type and the
// encoded object.
func nextFrame(b []byte, enc encoding) (int, string, []byte, error) {
	if enc == encCBOR {
		return nextCBORFrame(b)
	}
	if enc == encProtobuf {
		if len(b) < 4 {
			return 0, "", nil, errors.New("partial length prefix")
		}
		size := int(binary.BigEndian.Uint32(b))
		if len(b) < 4+size {
			return 0, "", nil, errors.New("partial protobuf frame")
		}
		var we metav1.WatchEvent
		if err := we.Unmarshal(b[4 : 4+size]); err != nil {
			return 0, "", nil, err
		}
		return 4 + size, we.Type, we.Object.Raw, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var we struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := dec.Decode(&we); err != nil {
		return 0, "", nil, err
	}
	n := int(dec.InputOffset())
	for n < len(b) && (b[n] == '\n' || b[n] == '\r' || b[n] == ' ' || b[n] == '\t') {
		n++
	}
	return n, we.Type, we.Object, nil
}

// markInitial sets initial on the frames that belong to a watch's initial state.
func markInitial(frames []recordedFrame, sendsInitialState bool) {
	if !sendsInitialState {
		return
	}
	end := -1
	for i, f := range frames {
		if f.event.InitialEventsEnd {
			end = i
			break
		}
	}
	if end < 0 {
		// No initial-events-end bookmark: the initial state ends before the first event that
		// is not ADDED (how client-go's reflector tells for RV "0").
		for end = 0; end < len(frames) && frames[end].event.Type == "ADDED"; end++ {
		}
		end--
	}
	for i := 0; i <= end && i < len(frames); i++ {
		frames[i].initial = true
	}
}

// rvAfter reports whether resourceVersion a is newer than b. API server resourceVersions are
// opaque to clients but are etcd revisions, decimal integers, on every server the fixtures
// come from.
func rvAfter(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a > b
	}
	return x > y
}

// errorFrame encodes an ERROR event carrying st in a stream's encoding, the way kube-apiserver
// writes one.
func errorFrame(st *metav1.Status, enc encoding) ([]byte, error) {
	st = st.DeepCopy()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if enc == encCBOR {
		return cborErrorFrame(st)
	}
	if enc == encProtobuf {
		var object bytes.Buffer
		if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(st, &object); err != nil {
			return nil, err
		}
		we := metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: object.Bytes()}}
		msg, err := we.Marshal()
		if err != nil {
			return nil, err
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...), nil
	}
	object, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	frame, err := json.Marshal(metav1.WatchEvent{Type: "ERROR", Object: runtime.RawExtension{Raw: object}})
	if err != nil {
		return nil, err
	}
	return append(frame, '\n'), nil
}

// statusFor builds the Status kube-apiserver sends for code about resource, with
// retryAfterSeconds where the server would name one.
func statusFor(code int32, resource schema.GroupResource, retryAfterSeconds int) *metav1.Status {
	var err *apierrors.StatusError
	switch code {
	case 410:
		err = apierrors.NewResourceExpired("too old resource version")
	case 429:
		err = apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", retryAfterSeconds)
	case 500:
		err = apierrors.NewInternalError(errors.New("etcdserver: leader changed"))
	case 503:
		err = apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	case 403:
		err = apierrors.NewForbidden(resource, "", errors.New(`User "limited" cannot list resource`))
	default:
		err = apierrors.NewGenericServerResponse(int(code), "get", resource, "", "", retryAfterSeconds, false)
	}
	st := err.Status()
	return &st
}
