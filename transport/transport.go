package transport

import (
	"net/http"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/listretry"
	"github.com/kretry/kretry/watchretry"
)

// New returns a RoundTripper that retries LIST and WATCH requests and
// resumes WATCH streams, sending every attempt through next. Requests it
// does not retry reach next exactly as they came. With DisableEnv set it
// returns next itself.
func New(next http.RoundTripper, cfg Config) http.RoundTripper {
	if !builtState().On {
		return next
	}
	// One policy (and so one retry budget) for every request; each kind's
	// reports labelled with its verb.
	p := cfg.policy()
	sender := func(verb Verb) *establish.Client {
		return &establish.Client{Next: next, Policy: p, Report: cfg.reporter(verb), GiveUpError: publicGiveUp}
	}
	initial, _ := cfg.Observer.(InitialStateObserver)
	return &roundTripper{
		next:      next,
		initial:   initial,
		apiPrefix: cfg.APIPrefix,
		retryGets: cfg.RetryGets,
		list:      listretry.New(sender(VerbList), listretry.Config{BufferSize: cfg.ListBufferSize}),
		// The same LIST retries, reported as gets, and every body held
		// whole: a single object has no list resourceVersion to resume at.
		get: listretry.New(sender(VerbGet), listretry.Config{BufferSize: cfg.ListBufferSize, Hold: true}),
		watch: watchretry.New(sender(VerbWatch), watchretry.Config{
			MaxFrameSize: cfg.MaxFrameSize,
			StallTimeout: cfg.stallTimeout(),
		}),
	}
}

// Wrapper returns New as a transport wrapper, for rest.Config.Wrap (or
// WrapTransport):
//
//	cfg.Wrap(transport.Wrapper(transport.Config{}))
//
// DisableEnv, read when client-go calls the wrapper, makes it a
// pass-through.
func Wrapper(cfg Config) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper { return New(next, cfg) }
}

type roundTripper struct {
	next      http.RoundTripper
	initial   InitialStateObserver // hears initial-state fetches; nil: none
	apiPrefix string
	retryGets bool
	list      http.RoundTripper
	get       http.RoundTripper
	watch     http.RoundTripper
}

// RoundTrip routes req by its kind; see classify.
func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if retryOff(req) {
		return t.next.RoundTrip(req)
	}
	k := classify(req, t.apiPrefix)
	observeInitialState(t.initial, req, k)
	switch k {
	case kindWatch:
		return t.watch.RoundTrip(req)
	case kindList:
		return t.list.RoundTrip(req)
	case kindGet:
		if t.retryGets {
			return t.get.RoundTrip(req)
		}
	}
	return t.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's utilnet helpers (CloseIdleConnectionsFor)
// reach the transport below.
func (t *roundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }
