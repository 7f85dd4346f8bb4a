package watchretry

import (
	"bytes"
	"context"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kretry/kretry/internal/frame"
)

// watchParams is what the caller's watch request asked for.
type watchParams struct {
	// timeout is the caller's timeoutSeconds; zero when it set none.
	timeout time.Duration
	// initial is what must arrive before the stream has a resume point.
	initial initialState
	// resourceVersion is the request's own resourceVersion.
	resourceVersion string
}

// initialState says what completes the initial state of a watch: until it
// is complete the events are a snapshot that a resume cannot splice.
type initialState uint8

const (
	// initialComplete: the watch started at a specific resourceVersion.
	initialComplete initialState = iota
	// initialUntilEndBookmark: sendInitialEvents=true, complete at the
	// BOOKMARK annotated k8s.io/initial-events-end.
	initialUntilEndBookmark
	// initialUntilNotAdded: resourceVersion "" or "0", complete at the
	// first BOOKMARK or the first event that is not ADDED.
	initialUntilNotAdded
)

// maxTimeout bounds a caller's timeoutSeconds so that a deadline computed
// from it cannot overflow; no watch outlives a century.
const maxTimeout = 100 * 365 * 24 * time.Hour

// parseWatchParams reads the caller's watch request as kube-apiserver reads
// it: converted into metav1.ListOptions by apimachinery's own generated
// conversion, so that "sendInitialEvents=yes" is true and
// "timeoutSeconds=1e3" is refused alike. A query the conversion refuses is
// one the server refuses too (400), so its stream never starts; it gets no
// resume point.
func parseWatchParams(req *http.Request) watchParams {
	var opts metav1.ListOptions
	query := req.URL.Query()
	if err := metav1.Convert_url_Values_To_v1_ListOptions(&query, &opts, nil); err != nil {
		return watchParams{initial: initialUntilNotAdded}
	}
	params := watchParams{resourceVersion: opts.ResourceVersion}
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		params.timeout = maxTimeout
		if *opts.TimeoutSeconds < int64(maxTimeout/time.Second) {
			params.timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
		}
	}
	switch {
	case opts.SendInitialEvents != nil && *opts.SendInitialEvents:
		params.initial = initialUntilEndBookmark
	case params.resourceVersion == "" || params.resourceVersion == "0":
		params.initial = initialUntilNotAdded
	}
	return params
}

// resumePoint is the resourceVersion a broken stream can reopen from: the
// request's own when specific, then that of every whole event the caller
// received, once the initial state is complete.
type resumePoint struct {
	initial initialState
	// rv is owned here (frame events alias the scanner's buffer) and
	// reused, so tracking it does not allocate per event.
	rv    []byte
	known bool
	// invalid counts the invalid frames met since the point last moved.
	invalid int
}

func newResumePoint(params watchParams) resumePoint {
	point := resumePoint{initial: params.initial}
	if params.initial == initialComplete {
		point.rv, point.known = []byte(params.resourceVersion), true
	}
	return point
}

// observe moves the resume point past a whole event delivered to the
// caller and reports whether it moved.
func (p *resumePoint) observe(event *frame.Event) bool {
	switch p.initial {
	case initialUntilEndBookmark:
		if event.Type != frame.Bookmark || !event.InitialEventsEnd {
			return false
		}
	case initialUntilNotAdded:
		if event.Type == frame.Added || event.Type == frame.Error {
			return false
		}
	}
	if event.Type == frame.Error || len(event.ResourceVersion) == 0 {
		return false
	}
	p.initial = initialComplete
	rv := event.ResourceVersion
	if p.known && sameVersion(p.rv, rv) {
		return false
	}
	if len(rv) <= cap(p.rv) {
		p.rv = p.rv[:len(rv)] // the length alone: no pointer stored
		copy(p.rv, rv)
	} else {
		p.rv = append(p.rv[:0], rv...)
	}
	p.known = true
	p.invalid = 0
	return true
}

// sameVersion is bytes.Equal(a, b), first comparing the last bytes: the
// resourceVersions of consecutive events have the same length and differ
// there, so most calls end before the call to compare the rest.
func sameVersion(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	if n := len(a); n > 0 && a[n-1] != b[n-1] {
		return false
	}
	return bytes.Equal(a, b)
}

// resumeRequest is the caller's request reopened at resourceVersion, every
// other parameter kept as it was (its timeoutSeconds is set to what remains
// of it by the bound on each attempt, establish.Bounds). A body (which a GET
// never needs, and which was read and closed by the first attempt) is not
// sent again. The caller's request is not modified.
func resumeRequest(ctx context.Context, orig *http.Request, resourceVersion string) *http.Request {
	req := orig.Clone(ctx)
	req.Body, req.GetBody, req.ContentLength = nil, nil, 0
	query := req.URL.Query()
	query.Set("resourceVersion", resourceVersion)
	query.Del("sendInitialEvents")
	query.Del("resourceVersionMatch")
	req.URL.RawQuery = query.Encode()
	return req
}
