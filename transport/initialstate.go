package transport

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// InitialStateObserver is an Observer that also hears every initial-state
// fetch a caller sends through kretry: a LIST (its first page) or a
// watch-list (a WATCH with sendInitialEvents=true, the streaming list
// client-go's informers start with). Both cost the server a whole
// collection, so, counted together, they answer "are my clients still
// relisting despite kretry?". A Config.Observer that implements it is told;
// package github.com/kretry/kretry/metrics does.
type InitialStateObserver interface {
	// ObserveInitialState is called once per such request, as the caller
	// sends it, before any attempt: kretry's own retries and resumes of it
	// are not initial-state fetches.
	ObserveInitialState(InitialStateEvent)
}

// InitialStateEvent is one initial-state fetch a caller sent.
type InitialStateEvent struct {
	// Verb is VerbList for a LIST, VerbWatch for a watch-list.
	Verb Verb
}

// ObserveInitialState tells each observer that hears initial-state fetches.
func (m multiObserver) ObserveInitialState(e InitialStateEvent) {
	for _, o := range m {
		if io, ok := o.(InitialStateObserver); ok {
			io.ObserveInitialState(e)
		}
	}
}

// observeInitialState tells observer if req, of kind k, is an initial-state
// fetch: a LIST without a continue token (a later page is the same fetch),
// or a watch with sendInitialEvents=true.
func observeInitialState(observer InitialStateObserver, req *http.Request, k kind) {
	if observer == nil {
		return
	}
	switch k {
	case kindList:
		if !strings.Contains(req.URL.RawQuery, "continue=") || req.URL.Query().Get("continue") == "" {
			observer.ObserveInitialState(InitialStateEvent{Verb: VerbList})
		}
	case kindWatch:
		if boolQueryParam(req.URL.RawQuery, "sendInitialEvents") {
			observer.ObserveInitialState(InitialStateEvent{Verb: VerbWatch})
		}
	}
}

// boolQueryParam reads a boolean query parameter as kube-apiserver does
// (apimachinery's runtime.Convert_Slice_string_To_bool): absent, "0", "f"
// and "false" (any case) are false, any other value is true.
func boolQueryParam(rawQuery, name string) bool {
	if !strings.Contains(rawQuery, name) {
		return false
	}
	values, _ := url.ParseQuery(rawQuery)
	value, ok := values[name]
	if !ok {
		return false
	}
	var on bool
	if err := runtime.Convert_Slice_string_To_bool(&value, &on, nil); err != nil {
		return false
	}
	return on
}
