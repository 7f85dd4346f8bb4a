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
	// Policy decides every retry and wait. It is set by package transport
	// from its Config (the policy is internal: outside this module, leave
	// it nil for the recommended defaults).
	Policy *policy.Policy
	// MaxFrameSize bounds one event; default 16 MiB, as client-go.
	MaxFrameSize int
	// StallTimeout, when positive, treats a stream that delivers no byte
	// for that long as broken; default off.
	StallTimeout time.Duration
	// MaxInvalidFrames bounds resumes at one resourceVersion after an
	// invalid event; default DefaultMaxInvalidFrames.
	MaxInvalidFrames int
	// Hooks are told about every attempt, retry, resume and give-up. Set
	// by package transport, which adapts them to its Observer and logs.
	Hooks policy.Hooks
}

// New returns a RoundTripper for WATCH requests: every request it is given
// must be one (package transport decides). Answers other than a 200 with a
// JSON, protobuf or CBOR (application/cbor-seq) watch stream are returned as
// they are; streams of other encodings pass through without resumption.
func New(next http.RoundTripper, cfg Config) http.RoundTripper {
	if cfg.Policy == nil {
		cfg.Policy = policy.New(policy.Config{})
	}
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = frame.DefaultMaxFrameSize
	}
	if cfg.MaxInvalidFrames <= 0 {
		cfg.MaxInvalidFrames = DefaultMaxInvalidFrames
	}
	return &roundTripper{
		client: &establish.Client{Next: next, Policy: cfg.Policy, Hooks: cfg.Hooks},
		cfg:    cfg,
	}
}

type roundTripper struct {
	client *establish.Client
	cfg    Config
	// conns are the connections its watches asked to retire.
	conns marks
}

// RoundTrip opens the watch and, if it is a stream kretry can resume,
// replaces its body with a resuming stream.
func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	tracker := rt.cfg.Policy.NewTracker()
	params := parseWatchParams(req)
	var deadline time.Time
	if params.timeout > 0 {
		// The caller's deadline bounds the establishment too: a retry
		// that would end past it is not made, and the last answer goes
		// to the caller, as stock client-go would have had it at once.
		deadline = rt.cfg.Policy.Clock().Now().Add(params.timeout)
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
