package proxy

import (
	"io"
	"mime"
	"net/http"
)

// newlineAhead is a transport wrapper, above kretry, that sends the newline ending each event
// of a JSON watch stream together with the event.
//
// kretry hands over each whole event as soon as it has it, with the newline after it when
// that newline came in the same read; one that arrives later (the server's write split at the
// brace) travels with the next event. client-go decodes JSON objects and does not mind;
// line-oriented clients do: the Python client's watch.stream (iter_resp_lines) and
// client-node's Watch (readline) see an event only once its newline came, so they would wait
// for the next event, and for the last one of a quiet watch forever. The bytes the client gets
// are the same, only sooner; when kretry already sent the newline this wrapper changes
// nothing but the scan.
func newlineAhead(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusOK || !classify(r).isWatch() {
			return resp, err
		}
		if mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mediaType == "application/json" {
			resp.Body = &lineBody{ReadCloser: resp.Body}
		}
		return resp, nil
	})
}

// lineBody is a JSON watch stream whose events are followed by their newline at once. It
// tracks the JSON nesting of the bytes it passes (strings and escapes included) to know where
// an event ends, so that a newline is never put inside one, however the event is split
// across reads.
type lineBody struct {
	io.ReadCloser
	depth    int
	inString bool
	escaped  bool
	owed     bool  // an event just ended without its newline: send one on the next Read
	sent     bool  // a newline was sent ahead: drop the stream's own if it comes next
	err      error // held back until the owed newline is sent
}

// Read returns the stream's bytes with a newline after every event that ends a read.
func (b *lineBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.owed {
		b.owed, b.sent = false, true
		p[0] = '\n'
		return 1, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	for {
		n, err := b.ReadCloser.Read(p)
		if b.sent && n > 0 {
			b.sent = false
			if p[0] == '\n' {
				n = copy(p, p[1:n])
			}
		}
		if b.endsEvent(p[:n]) {
			b.owed = true
			b.err = err
			return n, nil
		}
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// endsEvent advances the JSON nesting over data and reports whether data ends exactly where a
// top-level value (an event) closes.
func (b *lineBody) endsEvent(data []byte) bool {
	ended := false
	for _, c := range data {
		ended = false
		switch {
		case b.inString:
			switch {
			case b.escaped:
				b.escaped = false
			case c == '\\':
				b.escaped = true
			case c == '"':
				b.inString = false
			}
		case c == '"':
			b.inString = true
		case c == '{' || c == '[':
			b.depth++
		case c == '}' || c == ']':
			b.depth = max(b.depth-1, 0)
			ended = b.depth == 0
		}
	}
	return ended
}
