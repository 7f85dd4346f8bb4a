package frame_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kretry/kretry/internal/frame"
)

// A resuming watch reads frames, relays each one byte for byte, and keeps the
// resourceVersion of every whole non-ERROR event as its resume point.
func Example() {
	body := `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"41"}}}
{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"42","annotations":{"k8s.io/initial-events-end":"true"}}}}
{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"details":{"retryAfterSeconds":3}}}
{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"43"`

	enc, _ := frame.EncodingFor("application/json;stream=watch")
	scanner := frame.NewScanner(strings.NewReader(body), enc, 0)
	var resumePoint string
	for {
		f, err := scanner.Next()
		if err != nil {
			// The last event was cut short: it is dropped, and a resume from
			// resumePoint will deliver it again.
			fmt.Println("stream ended:", err, errors.Is(err, io.ErrUnexpectedEOF))
			break
		}
		ev := f.Event
		switch ev.Type {
		case frame.Error:
			fmt.Println(ev.Type, ev.Code, ev.Reason, "retry after", ev.RetryAfterSeconds)
		default:
			resumePoint = string(ev.ResourceVersion)
			fmt.Println(ev.Type, resumePoint, "initial events end:", ev.InitialEventsEnd, "frame bytes:", len(f.Raw))
		}
	}
	fmt.Println("resume from", resumePoint)
	// Output:
	// ADDED 41 initial events end: false frame bytes: 112
	// BOOKMARK 42 initial events end: true frame bytes: 155
	// ERROR 429 TooManyRequests retry after 3
	// stream ended: unexpected EOF true
	// resume from 42
}

// A resume answered 410 is delivered in the stream's own encoding; here a
// CBOR watch (application/cbor-seq), scanned back as client-go would read it.
func ExampleEncodeError() {
	expired := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
		Message: "too old resource version: 42 (97)"}
	event, err := frame.EncodeError(frame.CBOR, expired)
	if err != nil {
		fmt.Println(err)
		return
	}
	enc, _ := frame.EncodingFor("application/cbor-seq")
	f, err := frame.NewScanner(bytes.NewReader(event), enc, 0).Next()
	fmt.Println(enc, f.Event.Type, f.Event.Code, f.Event.Reason, err, len(f.Raw) == len(event))
	// Output:
	// application/cbor-seq ERROR 410 Expired <nil> true
}
