package conformance

import (
	"fmt"
	"strings"
	"time"
)

// Caller is how real client-go uses the replayed server in a scenario.
type Caller int

const (
	// RawWatch is a typed clientset's Watch with the recorded watch's options, read until the
	// caller has every event or the result channel closes: the pattern behind kubectl get -w,
	// rollout waiters and CI tools, which get no help from client-go when a stream breaks.
	RawWatch Caller = iota + 1
	// Pager is a typed clientset LIST through client-go's tools/pager with the recorded page
	// size.
	Pager
	// List is one typed clientset LIST with the recorded options.
	List
	// Informer is a SharedIndexInformer on the recorded collection. On a fixture with a
	// streaming list (WATCH with sendInitialEvents) it is the informer factory's, which starts
	// with that where client-go's WatchListClient gate is on; on a fixture of LIST pages and a
	// watch it starts with the LIST (the reflector's pager, at the recorded page size), then
	// watches from the list's resourceVersion.
	Informer
	// Create is a typed clientset Create (a POST) of a ConfigMap into the recorded namespace.
	Create
)

// String names the caller as the table shows it.
func (c Caller) String() string {
	switch c {
	case RawWatch:
		return "watch"
	case Pager:
		return "pager"
	case List:
		return "list"
	case Informer:
		return "informer"
	case Create:
		return "create"
	}
	return fmt.Sprintf("Caller(%d)", int(c))
}

// Outcome is what a correct transport makes of a scenario's faults.
type Outcome int

const (
	// Recover: the caller gets exactly what it would have got without the faults: every
	// watch event once and in order, every LIST item, every informer notification, and
	// nothing more.
	Recover Outcome = iota
	// Deliver: the server's answer (Scenario.Code) must reach the caller, as a watch ERROR
	// event after the events before it or as the error of a LIST or Create; the server sees no
	// request after the one that got that answer (retrying 4xx answers, 410 Expired above
	// all, hides them from client-go's relist logic; retrying a POST can repeat a write).
	Deliver
	// PassThrough: a watch break with no resume point (inside the initial state of a
	// streaming list or an RV "0" watch) reaches the caller as the end of the stream after the
	// whole events before it; reopening the watch would replay the initial state twice.
	PassThrough
	// GiveUp: the trouble outlasts what a transport may absorb (a resume answered 401/403 or
	// another 4xx, refused or 503 past the InternalError window, "200, then ERROR 500"
	// forever). The caller's watch ends cleanly after the whole events before the break, with
	// no ERROR event and no error, exactly as the break would have ended it without a
	// transport: client-go then re-watches from its resourceVersion through its own stack
	// instead of relisting (which an error or an ERROR 500 would make it do).
	GiveUp
)

// RequestKind sorts the requests the replayed server sees.
type RequestKind int

const (
	// WatchRequest is a GET with watch=true on the collection.
	WatchRequest RequestKind = iota + 1
	// ListRequest is a GET of the collection without watch.
	ListRequest
	// CreateRequest is a POST to the collection.
	CreateRequest
)

// String names the request kind.
func (k RequestKind) String() string {
	switch k {
	case WatchRequest:
		return "WATCH"
	case ListRequest:
		return "LIST"
	case CreateRequest:
		return "POST"
	}
	return fmt.Sprintf("RequestKind(%d)", int(k))
}

// FaultKind is what goes wrong.
type FaultKind int

const (
	// Cut breaks the connection inside a response body: the recorded response is served up
	// to the position, then its body fails with io.ErrUnexpectedEOF, as an HTTP/1.1 chunked
	// body does when the connection drops.
	Cut FaultKind = iota + 1
	// Close ends a watch response cleanly (io.EOF) at a frame boundary, long before its
	// timeoutSeconds: an early clean close by a proxy or a restarting server.
	Close
	// ErrorEvent sends one ERROR event with Code (and details.retryAfterSeconds RetryAfter)
	// in the stream's encoding at a frame boundary; the server then ends the response, as
	// kube-apiserver does after an ERROR event.
	ErrorEvent
	// Status answers with an HTTP status in place of the response: the response recorded in
	// fixture Recorded (e.g. the real 429 with its text/plain body), or else a metav1.Status
	// of Code in the request's encoding, with Retry-After when RetryAfter > 0.
	Status
	// Refused fails the request before a response: connection refused.
	Refused
	// Reset fails the request before a response: connection reset by peer.
	Reset
	// Silent accepts the request and never answers it: a black-holed backend behind a
	// balancer, an apiserver stuck in shutdown. Fault.Elapse passes (Options.Elapse), then
	// the request waits until its context ends.
	Silent
)

// Half, as Fault.Into, cuts a frame (or a LIST body) in its middle.
const Half = -1

// Fault is one thing that goes wrong while a scenario is replayed.
type Fault struct {
	// Kind is what goes wrong.
	Kind FaultKind
	// On is the kind of request the fault hits, and Nth which one of that kind (0 is the
	// first), counting retries: a fault on WatchRequest 1 hits whatever watch request the
	// transport or the caller sends second.
	On  RequestKind
	Nth int
	// Always makes the fault hit every request of kind On from the Nth on.
	Always bool
	// Frame is, for Cut, Close and ErrorEvent on a watch, the number of whole frames of the
	// response served before the fault.
	Frame int
	// Into is, for Cut, how many bytes of the frame after those are served (0 cuts at the
	// frame boundary, Half in the middle of the frame); for a LIST body, the byte offset
	// (Half: the middle of the body).
	Into int
	// Code is the status code of Status and ErrorEvent.
	Code int32
	// RetryAfter is the Retry-After header (Status) or details.retryAfterSeconds (ErrorEvent)
	// in seconds; 0 means none.
	RetryAfter int
	// Recorded names the fixture whose recorded response of Code is served by Status.
	Recorded string
	// WatchCache makes a Status 410 on a watch the watch cache's: its message is
	// "too old resource version: RV (S)", RV the resourceVersion asked for and S one past it,
	// as a freshly restarted apiserver answers a resume whose point its cache does not hold.
	WatchCache bool
	// Elapse is time that passes while the fault acts, on the transport's clock
	// (Options.Elapse): for Silent, while the request goes unanswered; for a LIST Cut, while
	// the body streams, before the cut.
	Elapse time.Duration
}

// String describes the fault for tables and failure messages.
func (f Fault) String() string {
	target := fmt.Sprintf("%s #%d", f.On, f.Nth)
	if f.Always {
		target = fmt.Sprintf("every %s from #%d", f.On, f.Nth)
	}
	into := func() string {
		switch f.Into {
		case Half:
			return "mid-frame"
		case 0:
			return "at a frame boundary"
		}
		return fmt.Sprintf("%d bytes into the frame", f.Into)
	}
	switch f.Kind {
	case Cut:
		if f.On != WatchRequest {
			if f.Into == Half {
				return fmt.Sprintf("cut mid-body of %s%s", target, f.after())
			}
			return fmt.Sprintf("cut at byte %d of %s%s", f.Into, target, f.after())
		}
		return fmt.Sprintf("cut %s after %s of %s", into(), plural(f.Frame, "frame"), target)
	case Close:
		return fmt.Sprintf("clean close after %s of %s", plural(f.Frame, "frame"), target)
	case ErrorEvent:
		ra := ""
		if f.RetryAfter > 0 {
			ra = fmt.Sprintf(" retryAfterSeconds=%d", f.RetryAfter)
		}
		return fmt.Sprintf("ERROR event %d%s after %s of %s", f.Code, ra, plural(f.Frame, "frame"), target)
	case Status:
		what := fmt.Sprintf("%d", f.Code)
		if f.Recorded != "" {
			what += " (recorded in " + f.Recorded + ")"
		} else if f.RetryAfter > 0 {
			what += fmt.Sprintf(" Retry-After: %d", f.RetryAfter)
		} else if f.WatchCache {
			what += " (the watch cache's too old resource version)"
		}
		return fmt.Sprintf("%s instead of %s", what, target)
	case Refused:
		return "connection refused on " + target
	case Reset:
		return "connection reset on " + target
	case Silent:
		return "no answer to " + target
	}
	return fmt.Sprintf("FaultKind(%d) on %s", int(f.Kind), target)
}

// after describes Elapse for a LIST cut.
func (f Fault) after() string {
	if f.Elapse <= 0 {
		return ""
	}
	return fmt.Sprintf(", %v into the body", f.Elapse)
}

// retryable reports whether a correct transport retries what the fault does to a request:
// connection failures, and 429/5xx answers or ERROR events.
func (f Fault) retryable() bool {
	switch f.Kind {
	case Refused, Reset, Silent:
		return true
	case Status, ErrorEvent:
		return retryable(f.Code)
	}
	return false
}

// hits reports whether the fault applies to the nth request of kind.
func (f Fault) hits(kind RequestKind, nth int) bool {
	return f.On == kind && (nth == f.Nth || (f.Always && nth > f.Nth))
}

// Scenario is one case of the suite: a recorded fixture, the faults injected while it is
// replayed, the client-go caller, and what a correct transport makes of it.
type Scenario struct {
	// Name identifies the scenario, "<fixture>/<fault>".
	Name string
	// Fixture is the recorded file (without .json) whose exchanges the server replays.
	Fixture string
	// Caller is how client-go uses the server.
	Caller Caller
	// Faults are applied in the replay; at most one hits any one request.
	Faults []Fault
	// Outcome is what a correct transport makes of the faults.
	Outcome Outcome
	// Code is, for Deliver, the status the caller must get (0: the connection error itself).
	Code int32
	// Search is, for Deliver, how many watch requests may follow the answer the caller must
	// get: a watch cache's 410 on a resume may come from a freshly restarted apiserver behind a
	// balancer, and a transport may look for another one on new connections, as long as the
	// 410 reaches the caller in the end. 0: none may.
	Search int
	// Why says in one line what the scenario shows.
	Why string
	// NoTimeout makes a RawWatch caller ask for no timeoutSeconds, where the recorded watch
	// had one.
	NoTimeout bool
}

// String is the scenario's name.
func (s Scenario) String() string { return s.Name }

// faultFor returns the fault that hits the nth request of kind, if any.
func (s Scenario) faultFor(kind RequestKind, nth int) (Fault, bool) {
	for _, f := range s.Faults {
		if f.hits(kind, nth) {
			return f, true
		}
	}
	return Fault{}, false
}

// describeFaults lists the faults in one line.
func (s Scenario) describeFaults() string {
	if len(s.Faults) == 0 {
		return "no fault"
	}
	parts := make([]string, len(s.Faults))
	for i, f := range s.Faults {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}

// plural renders a count of things: "1 frame", "2 frames".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
