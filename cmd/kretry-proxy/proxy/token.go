package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// tokenFile is a bearer token kept in a file that is replaced as it rotates, as the kubelet
// replaces a pod's projected service-account token. It is read again as soon as the file
// changes (another file, size or modification time), which one stat per request tells; a
// file that is missing or empty for a moment keeps the last token. client-go's own
// BearerTokenFile reads at most once a minute, and sets the header above WrapTransport, so
// that a watch kretry resumes would still carry the token it was opened with.
type tokenFile struct {
	path string

	mu    sync.Mutex
	token string
	read  os.FileInfo // the file token was read from
}

// current returns the token in the file as it is now, reading it only when it changed.
func (f *tokenFile) current() (string, error) {
	info, statErr := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if statErr == nil && f.read != nil && os.SameFile(info, f.read) &&
		info.Size() == f.read.Size() && info.ModTime().Equal(f.read.ModTime()) {
		return f.token, nil
	}
	err := statErr
	if err == nil {
		var b []byte
		if b, err = os.ReadFile(f.path); err == nil {
			if token := strings.TrimSpace(string(b)); token != "" {
				f.token, f.read = token, info
				return token, nil
			}
			err = errors.New("the file is empty")
		}
	}
	if f.token != "" {
		return f.token, nil // being replaced: the next request reads it again
	}
	return "", fmt.Errorf("kretry-proxy: bearer token file %s: %w", f.path, err)
}

// wrap sets the token on every request without an Authorization header.
func (f *tokenFile) wrap(next http.RoundTripper) http.RoundTripper {
	return &tokenRoundTripper{file: f, next: next}
}

// tokenRoundTripper is the transport wrapper of a tokenFile.
type tokenRoundTripper struct {
	file *tokenFile
	next http.RoundTripper
}

func (t *tokenRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return t.next.RoundTrip(req)
	}
	token, err := t.file.current()
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	req = utilnet.CloneRequest(req) // a RoundTripper must not modify its caller's request
	req.Header.Set("Authorization", "Bearer "+token)
	return t.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go find the transport beneath (utilnet.RoundTripperWrapper).
func (t *tokenRoundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }
