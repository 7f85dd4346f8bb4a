// Package memserver is an http.RoundTripper that answers every request with
// one body held in memory, for kretry's LIST benchmarks: the body reads as a
// network body would (no WriterTo shortcut), with or without a
// Content-Length.
package memserver

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// Server answers every request with Body.
type Server struct {
	// Body is what every response carries.
	Body []byte
	// Chunked sends no Content-Length, as a chunked HTTP/1.1 body.
	Chunked bool
}

// RoundTrip answers req with a 200 and Body.
func (s Server) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(struct{ io.Reader }{bytes.NewReader(s.Body)}),
		ContentLength: int64(len(s.Body)),
		Request:       req,
	}
	if s.Chunked {
		resp.ContentLength = -1
	} else {
		resp.Header.Set("Content-Length", strconv.Itoa(len(s.Body)))
	}
	return resp, nil
}
