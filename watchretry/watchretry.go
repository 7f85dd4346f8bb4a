package watchretry

import (
	"net/http"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/policy"
)

// DefaultMaxInvalidFrames bounds the resumes at one resourceVersion after an
// event that is not a valid watch event.
const DefaultMaxInvalidFrames = 3

// Config tunes watch resumption; the zero Config is the recommended one.
type Config struct {
	// MaxFrameSize bounds one event; default 16 MiB, as client-go.
	MaxFrameSize int
	// StallTimeout, when positive, treats a stream that delivers no byte
	// for that long as broken; default off.
	StallTimeout time.Duration
	// MaxInvalidFrames bounds resumes at one resourceVersion after an
	// invalid event; default DefaultMaxInvalidFrames.
	MaxInvalidFrames int
}

// New returns a RoundTripper for WATCH requests, with the recommended policy
// (package transport's zero Config): every request it is given must be one
// (package transport decides). Answers other than a 200 with a JSON,
// protobuf or CBOR (application/cbor-seq) watch stream are returned as they
// are; streams of other encodings pass through without resumption. A
// give-up of the retries that open the watch is reachable with errors.As as
// a *transport.GiveUpError.
func New(next http.RoundTripper, cfg Config) http.RoundTripper {
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = frame.DefaultMaxFrameSize
	}
	if cfg.MaxInvalidFrames <= 0 {
		cfg.MaxInvalidFrames = DefaultMaxInvalidFrames
	}
	rt := &roundTripper{client: &establish.Client{Next: next}, cfg: cfg}
	rt.Share(establish.Shared{})
	return rt
}

// Share sets the policy and hooks package transport shares between the
// RoundTrippers it builds (see establish.Sharer).
func (rt *roundTripper) Share(shared establish.Shared) {
	if shared.Policy == nil {
		shared.Policy = policy.New(policy.Config{})
	}
	rt.client.Policy, rt.client.Hooks = shared.Policy, shared.Hooks
	rt.policy, rt.hooks = shared.Policy, shared.Hooks
}

type roundTripper struct {
	client *establish.Client
	cfg    Config
	policy *policy.Policy
	hooks  policy.Hooks
	// conns are the connections its watches asked to retire.
	conns marks
}

// RoundTrip opens the watch and, if it is a stream kretry can resume,
// replaces its body with a resuming stream.
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	tracker := rt.policy.NewTracker()
	params := parseWatchParams(req)
	var deadline time.Time
	if params.timeout > 0 {
		// The caller's deadline bounds the establishment too: a retry
		// that would end past it is not made, and the last answer goes
		// to the caller, as stock client-go would have had it at once.
		deadline = rt.policy.Clock().Now().Add(params.timeout)
		tracker.SetDeadline(deadline)
	}
	resp, err := rt.client.Watch(req, tracker, rt.bounds(deadline))
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	enc, ok := frame.EncodingFor(resp.Header.Get("Content-Type"))
	if !ok {
		return resp, nil
	}
	resp.Body = newStream(rt, req, resp, enc, tracker, params, deadline)
	return resp, nil
}

// answerTimeout bounds the wait for the response headers of every attempt
// to open or reopen a watch, with or without timeoutSeconds: the bound the
// policy shares between a watch and a LIST's resume.
const answerTimeout = policy.AnswerTimeout

// bounds are the bounds of every attempt of a watch ending at deadline
// (zero: none).
func (rt *roundTripper) bounds(deadline time.Time) establish.Bounds {
	return establish.Bounds{Deadline: deadline, AnswerTimeout: answerTimeout}
}
