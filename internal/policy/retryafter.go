package policy

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter reads a Retry-After header value: delay-seconds or an
// HTTP-date (RFC 9110 §10.2.3). It reports false for an absent, junk, zero,
// negative or past value, so the caller falls back to its backoff. Values
// too large for a Duration saturate; the policy caps them.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if value[0] >= '0' && value[0] <= '9' {
		seconds, err := strconv.ParseInt(value, 10, 64)
		var numErr *strconv.NumError
		switch {
		case errors.As(err, &numErr) && numErr.Err == strconv.ErrRange:
			return maxDuration, true
		case err != nil:
			return 0, false
		}
		return SecondsToDuration(seconds)
	}
	when, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	wait := when.Sub(now)
	if wait <= 0 {
		return 0, false
	}
	return wait, true
}

const maxDuration = time.Duration(1<<63 - 1)

// SecondsToDuration converts a server-named number of seconds (Retry-After,
// Status details.retryAfterSeconds) to a wait, saturating instead of
// overflowing; it reports false for zero or negative values.
func SecondsToDuration(seconds int64) (time.Duration, bool) {
	if seconds <= 0 {
		return 0, false
	}
	if seconds > int64(maxDuration/time.Second) {
		return maxDuration, true
	}
	return time.Duration(seconds) * time.Second, true
}
