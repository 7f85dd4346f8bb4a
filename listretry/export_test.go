package listretry

import "io"

// Held returns how many bytes of memory a LIST body returned by the
// RoundTripper holds (its segments' capacity; for a streamed body, the
// head's), or -1 if it holds none: the body streams from the connection as
// it came.
func Held(body io.ReadCloser) int {
	switch b := body.(type) {
	case *bufferedBody:
		return b.held.capacity()
	case *partialBody:
		return b.held
	case *streamBody:
		return cap(b.head)
	}
	return -1
}
