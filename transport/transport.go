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
	p := cfg.policy()
	initial, _ := cfg.Observer.(InitialStateObserver)
	list := listretry.New(next, listretry.Config{BufferSize: cfg.ListBufferSize})
	share(list, establish.Shared{Policy: p, Hooks: cfg.listHooks(), GiveUpError: bodyGiveUp})
	// The same LIST retries, reported as gets, and every body held whole: a
	// single object has no list resourceVersion to resume at.
	get := listretry.New(next, listretry.Config{BufferSize: cfg.ListBufferSize, Hold: true})
	share(get, establish.Shared{Policy: p, Hooks: cfg.hooks(VerbGet)})
	watch := watchretry.New(next, watchretry.Config{
		MaxFrameSize:     cfg.MaxFrameSize,
		StallTimeout:     cfg.stallTimeout(),
		MaxInvalidFrames: cfg.MaxInvalidFrames,
	})
	share(watch, establish.Shared{Policy: p, Hooks: cfg.hooks(VerbWatch)})
	return &roundTripper{
		next:      next,
		initial:   initial,
		apiPrefix: cfg.APIPrefix,
		retryGets: cfg.RetryGets,
		list:      list,
		get:       get,
		watch:     watch,
	}
}

// share gives a RoundTripper of watchretry or listretry the transport's
// policy and hooks.
func share(rt http.RoundTripper, shared establish.Shared) { rt.(establish.Sharer).Share(shared) }

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
		return done(t.watch.RoundTrip(req))
	case kindList:
		return done(t.list.RoundTrip(req))
	case kindGet:
		if t.retryGets {
			return done(t.get.RoundTrip(req))
		}
	}
	return t.next.RoundTrip(req)
}

// done hands a retried request's result to the caller.
func done(resp *http.Response, err error) (*http.Response, error) {
	return resp, publicError(err)
}

// WrappedRoundTripper lets client-go's utilnet helpers (CloseIdleConnectionsFor)
// reach the transport below.
func (t *roundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }
