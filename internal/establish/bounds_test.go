package establish

import (
	"net/http"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/policy"
)

// TestWithTimeout: an attempt asks for what remains of the caller's
// timeoutSeconds, rounded up and never 0; a request without one is left as
// it is, and so is one that already asks for it.
func TestWithTimeout(t *testing.T) {
	tests := []struct {
		query     string
		remaining time.Duration
		want      string
	}{
		{"watch=true&timeoutSeconds=6", 3900 * time.Millisecond, "timeoutSeconds=4&watch=true"},
		{"watch=true&timeoutSeconds=6", 6 * time.Second, "watch=true&timeoutSeconds=6"},
		{"watch=true&timeoutSeconds=6", 100 * time.Millisecond, "timeoutSeconds=1&watch=true"},
		{"watch=true", 3 * time.Second, "watch=true"},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods?"+tt.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := withTimeout(req, tt.remaining).URL.RawQuery; got != tt.want {
			t.Errorf("%s with %v left: %s, want %s", tt.query, tt.remaining, got, tt.want)
		}
		if req.URL.RawQuery != tt.query {
			t.Errorf("the request was modified: %s", req.URL.RawQuery)
		}
	}
}

// TestNoAnswerIsAFailureWithoutAnswer: an attempt unanswered past the answer
// timeout is retried like a refused connection, and the deadline's
// cancellation is not (the watch is over).
func TestNoAnswerIsAFailureWithoutAnswer(t *testing.T) {
	if f := policy.Unanswered(&noAnswerError{after: 20 * time.Second}); f.Kind != policy.NoAnswer {
		t.Errorf("no answer is %v, want a failure without an answer", f.Kind)
	}
	for _, err := range []error{errDeadline, errSearchOver} {
		if f := policy.Unanswered(err); f.Kind != policy.Final {
			t.Errorf("%v is %v, want final (the loop stops on it)", err, f.Kind)
		}
	}
}
