package status_test

import (
	"fmt"

	"github.com/kretry/kretry/internal/status"
)

// Parse finds the Status in an API server's JSON error body, and RetryAfter
// reads the wait it names; a text/plain body is not a Status.
func Example() {
	body := []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure",` +
		`"message":"storage is (re)initializing","reason":"TooManyRequests",` +
		`"details":{"retryAfterSeconds":3},"code":429}`)
	st, ok := status.Parse("application/json", body)
	fmt.Println(ok, st.Code, st.Reason)
	fmt.Println(status.RetryAfter(st))

	_, ok = status.Parse("text/plain; charset=utf-8", []byte("Too many requests, please try again later.\n"))
	fmt.Println(ok)
	// Output:
	// true 429 TooManyRequests
	// 3s true
	// false
}
