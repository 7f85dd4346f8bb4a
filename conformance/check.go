package conformance

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes/scheme"
)

// verdict compares what the caller got and what the server saw with what a correct
// transport produces. It returns "" when the scenario passes, else the first reason it
// does not, in a few words.
func (r *replay) verdict(obs observation) string {
	r.mu.Lock()
	problems := slices.Clone(r.problems)
	r.mu.Unlock()
	var caller string
	switch r.sc.Caller {
	case RawWatch:
		caller = r.checkWatch(obs)
	case Pager, List:
		caller = r.checkList(obs)
	case Informer:
		caller = r.checkInformer(obs)
	case Create:
		caller = checkStatus("Create", obs.err, r.sc.Code)
	}
	switch {
	case len(problems) > 0 && (obs.aborted || caller == ""):
		// The server saw the cause; what the caller got (if anything) follows from it.
		return problems[0]
	case caller != "":
		return caller
	case obs.timedOut:
		return "timed out"
	}
	return ""
}

// checkWatch checks a RawWatch caller's events.
func (r *replay) checkWatch(obs observation) string {
	exp := r.expected
	if exp.establishErr != 0 {
		return checkStatus("Watch", obs.err, exp.establishErr)
	}
	if obs.err != nil {
		return fmt.Sprintf("Watch() failed: %v", shortErr(obs.err))
	}
	got, want := obs.events, exp.events
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			switch {
			case obs.ended:
				return fmt.Sprintf("watch ended after %d of %d events; missing %s", len(got), len(want), want[i])
			case obs.timedOut:
				return fmt.Sprintf("timed out after %d of %d events; missing %s", len(got), len(want), want[i])
			}
			return fmt.Sprintf("got %d of %d events; missing %s", len(got), len(want), want[i])
		case i >= len(want):
			return fmt.Sprintf("extra event after all %d: %s", len(want), got[i])
		case got[i] != want[i]:
			return fmt.Sprintf("event %d is %s, want %s", i+1, got[i], want[i])
		}
	}
	switch {
	case exp.ends && !obs.ended:
		return "the watch stayed open after the server ended it"
	case !exp.ends && obs.ended:
		return "the result channel closed while the server kept the stream open"
	}
	return ""
}

// checkList checks a Pager or List caller's items, or the error it had to get.
func (r *replay) checkList(obs observation) string {
	if r.sc.Outcome == Deliver {
		return checkStatus("List", obs.err, r.sc.Code)
	}
	if obs.err != nil {
		return fmt.Sprintf("List failed: %v", shortErr(obs.err))
	}
	want, err := r.recordedItems()
	if err != nil {
		return err.Error()
	}
	if !slices.Equal(obs.items, want) {
		return fmt.Sprintf("got %d items %s, want %d %s", len(obs.items), names(obs.items), len(want), names(want))
	}
	return ""
}

// recordedItems are the items of every recorded successful LIST, in order. A LIST recorded
// as a resume asks for it (at resourceVersionMatch=Exact, or a query recorded before) is the
// same list again, not more items.
func (r *replay) recordedItems() ([]Event, error) {
	var items []Event
	for i, ex := range r.lists {
		if ex.Response.Status != http.StatusOK || r.recordedAgain(i) {
			continue
		}
		list, _, err := scheme.Codecs.UniversalDeserializer().Decode(ex.Response.Body(), nil, nil)
		if err != nil {
			return nil, fmt.Errorf("recorded LIST %s: %w", ex.Request.URL, err)
		}
		page, err := itemsOf(list)
		if err != nil {
			return nil, err
		}
		items = append(items, page...)
	}
	return items, nil
}

func names(items []Event) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = it.Name + "@" + it.ResourceVersion
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkInformer checks an Informer's notifications: the initial adds in any order, then
// every later event once and in order.
func (r *replay) checkInformer(obs observation) string {
	want := r.expectedNotes()
	got := obs.notes
	initial := 0
	for initial < len(want) && want[initial].initial {
		initial++
	}
	sortHead := func(notes []notification) []notification {
		notes = slices.Clone(notes)
		head := notes[:min(initial, len(notes))]
		slices.SortFunc(head, func(a, b notification) int { return strings.Compare(a.Name, b.Name) })
		return notes
	}
	got, want = sortHead(got), sortHead(want)
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			if obs.timedOut {
				return fmt.Sprintf("timed out after %d of %d notifications; missing %s", len(got), len(want), want[i])
			}
			return fmt.Sprintf("got %d of %d notifications; missing %s", len(got), len(want), want[i])
		case i >= len(want):
			return fmt.Sprintf("extra notification after all %d: %s", len(want), got[i])
		case got[i] != want[i]:
			return fmt.Sprintf("notification %d is %s, want %s", i+1, got[i], want[i])
		}
	}
	return ""
}

// recordedAgain reports whether recorded LIST i asks again for a list recorded before it: at
// resourceVersionMatch=Exact, or with the same query.
func (r *replay) recordedAgain(i int) bool {
	q := r.lists[i].Request.Query()
	if i > 0 && q.Get("resourceVersionMatch") == "Exact" {
		return true
	}
	for _, earlier := range r.lists[:i] {
		if sameQuery(earlier.Request.Query(), q) {
			return true
		}
	}
	return false
}

// checkStatus checks that a call failed with the server's Status of code, or, for code 0,
// with the connection error itself.
func checkStatus(call string, err error, code int32) string {
	if err == nil {
		return fmt.Sprintf("%s succeeded, want the server's %s", call, codeText(code))
	}
	var status apierrors.APIStatus
	got := int32(0)
	if errors.As(err, &status) {
		got = status.Status().Code
	}
	if got != code {
		if got == 0 {
			return fmt.Sprintf("%s failed with %q, not the server's %s", call, shortErr(err), codeText(code))
		}
		return fmt.Sprintf("%s got %d, want %s", call, got, codeText(code))
	}
	return ""
}

func codeText(code int32) string {
	if code == 0 {
		return "connection error"
	}
	return fmt.Sprintf("%d Status", code)
}

// replayedURL matches a URL of the replayed server in an error message.
var replayedURL = regexp.MustCompile(`(?i)"?(get|post) "?` + regexp.QuoteMeta(baseURL) + `[^\s"]*"?:? ?`)

// shortErr is err's text without the request URL that client-go or a transport put in.
func shortErr(err error) string {
	s := replayedURL.ReplaceAllString(err.Error(), "")
	if len(s) > 90 {
		s = s[:90] + "…"
	}
	return s
}
