package proxy

import (
	"io"
	"strings"
	"testing"
)

// chunkReader returns one chunk per Read, then io.EOF, and counts the Reads.
type chunkReader struct {
	chunks []string
	reads  int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	r.reads++
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if r.chunks[0] = r.chunks[0][n:]; r.chunks[0] == "" {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

func (r *chunkReader) Close() error { return nil }

func TestLineBody(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string // as kretry hands them over
		want   []string // what each Read of lineBody returns
	}{
		{
			name:   "newline sent with its event",
			chunks: []string{`{"a":1}`, "\n" + `{"b":2}`, "\n"},
			want:   []string{`{"a":1}`, "\n", `{"b":2}`, "\n"},
		},
		{
			name:   "event split across reads",
			chunks: []string{`{"a":{"b":1}`, `}`, "\n"},
			want:   []string{`{"a":{"b":1}`, `}`, "\n"},
		},
		{
			name:   "braces and quotes inside strings",
			chunks: []string{`{"a":"}\"{"}`, "\n" + `{"b":"\\"}`, "\n"},
			want:   []string{`{"a":"}\"{"}`, "\n", `{"b":"\\"}`, "\n"},
		},
		{
			name:   "newline already with its event",
			chunks: []string{`{"a":1}` + "\n", `{"b":2}` + "\n"},
			want:   []string{`{"a":1}` + "\n", `{"b":2}` + "\n"},
		},
		{
			name:   "two events in one read",
			chunks: []string{`{"a":1}` + "\n" + `{"b":2}`, "\n"},
			want:   []string{`{"a":1}` + "\n" + `{"b":2}`, "\n"},
		},
		{
			name:   "stream ends after an event without its newline",
			chunks: []string{`{"a":1}`},
			want:   []string{`{"a":1}`, "\n"},
		},
		{
			name:   "other separator after an event",
			chunks: []string{`{"a":1}`, "\r\n" + `{"b":2}`},
			want:   []string{`{"a":1}`, "\n", "\r\n" + `{"b":2}`, "\n"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &chunkReader{chunks: tc.chunks}
			body := &lineBody{ReadCloser: src}
			buf := make([]byte, 64)
			var got []string
			for {
				readsBefore := src.reads
				n, err := body.Read(buf)
				if n > 0 {
					got = append(got, string(buf[:n]))
					if buf[n-1] == '\n' && n == 1 && src.reads != readsBefore {
						t.Errorf("the newline after read %d needed a read from the stream", len(got)-1)
					}
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("reads %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLineBodySmallReads: one byte at a time, the output is the input.
func TestLineBodySmallReads(t *testing.T) {
	in := `{"type":"ADDED","object":{"metadata":{"name":"a}b"}}}` + "\n" + `{"type":"DELETED","object":{}}` + "\n"
	body := &lineBody{ReadCloser: &chunkReader{chunks: []string{in}}}
	var out strings.Builder
	buf := make([]byte, 1)
	for {
		n, err := body.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if out.String() != in {
		t.Errorf("got %q, want %q", out.String(), in)
	}
}
