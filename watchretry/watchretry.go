package watchretry

import (
	"net/http"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/policy"
)

// Config tunes watch resumption; the zero Config is the recommended one.
type Config struct {
	// MaxFrameSize bounds one event; default 16 MiB, as client-go.
	MaxFrameSize int
	// StallTimeout, when positive, treats a stream that delivers no byte
	// for that long as broken; default off.
	StallTimeout time.Duration
}

// New returns a RoundTripper for WATCH requests, with the recommended policy
// (package transport's zero Config): every request it is given must be one
// (package transport decides, and builds the next it is given so that all
// its RoundTrippers share one policy, retry budget and Observer). Answers
// other than a 200 with a JSON, protobuf or CBOR (application/cbor-seq)
// watch stream are returned as they are; streams of other encodings pass
// through without resumption. A give-up of the retries that open the watch
// is a *transport.GiveUpError when package transport built the
// RoundTripper, and otherwise an error with the same message.
func New(next http.RoundTripper, cfg Config) http.RoundTripper {
	if cfg.MaxFrameSize <= 0 {
		cfg.MaxFrameSize = frame.DefaultMaxFrameSize
	}
	return &roundTripper{client: establish.For(next), cfg: cfg}
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
	tracker := rt.client.Policy.NewTracker()
	params := parseWatchParams(req)
	var deadline time.Time
	if params.timeout > 0 {
		// The caller's deadline bounds the establishment too: a retry
		// that would end past it is not made, and the last answer goes
		// to the caller, as stock client-go would have had it at once.
		deadline = rt.client.Policy.Clock().Now().Add(params.timeout)
		tracker.SetDeadline(deadline)
	}
	resp, err := rt.client.Watch(req, tracker, establish.Bounds{Deadline: deadline, AnswerTimeout: policy.AnswerTimeout})
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
