package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// wireCounter sits below kretry and counts, on the client side, what reached the server:
// every attempt, response body bytes, and initial-state fetches with their bytes. The demo
// server counts the same on its side; these are for a real cluster.
type wireCounter struct {
	next                                 http.RoundTripper
	requests, fetches, bytes, fetchBytes atomic.Int64
	name                                 string    // the client's, for the log
	log                                  io.Writer // with -v: every request and its answer
}

// RoundTrip counts the request and wraps the response body to count its bytes.
func (t *wireCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	resp, err := t.next.RoundTrip(req)
	if t.log != nil {
		answer := fmt.Sprint(err)
		if err == nil {
			answer = resp.Status
		}
		fmt.Fprintf(t.log, "%s %s: %s %s?%s: %s\n", time.Now().Format("15:04:05.000"), t.name, req.Method, req.URL.Path, req.URL.RawQuery, answer)
	}
	if err != nil {
		return resp, err
	}
	body := &countingBody{ReadCloser: resp.Body, counters: []*atomic.Int64{&t.bytes}}
	query := req.URL.Query()
	watching := isWatch(req)
	isCollection := strings.HasSuffix(req.URL.Path, "/configmaps")
	if resp.StatusCode == http.StatusOK && isCollection && !watching {
		if query.Get("continue") == "" {
			t.fetches.Add(1)
		}
		body.counters = append(body.counters, &t.fetchBytes)
	}
	if resp.StatusCode == http.StatusOK && isCollection && watching && query.Get("sendInitialEvents") == "true" {
		t.fetches.Add(1)
		body.initialState = &t.fetchBytes
		body.initialEventsEnd = marker{text: []byte(metav1.InitialEventsAnnotationKey)}
	}
	resp.Body = body
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	counters []*atomic.Int64
	// initialState, for a watch-list, counts the bytes up to the k8s.io/initial-events-end
	// annotation key of its last bookmark (plain bytes in JSON and protobuf alike; the few
	// bytes after it are left out).
	initialState     *atomic.Int64
	initialEventsEnd marker
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	for _, c := range b.counters {
		c.Add(int64(n))
	}
	if b.initialState != nil && n > 0 {
		b.initialState.Add(int64(n))
		if b.initialEventsEnd.in(p[:n]) {
			b.initialState = nil
		}
	}
	return n, err
}

// marker finds a byte string in a stream read in pieces.
type marker struct {
	text []byte
	tail []byte // the last len(text)-1 bytes read, for a text cut between two reads
}

// in reports whether the text occurs in the stream read so far, ending in p.
func (m *marker) in(p []byte) bool {
	window := append(m.tail, p...)
	if bytes.Contains(window, m.text) {
		m.tail = nil
		return true
	}
	m.tail = append(m.tail[:0], window[max(0, len(window)-len(m.text)+1):]...)
	return false
}

// watchEnds sits above kretry, where client-go reads, and counts the watch streams that
// ended under the caller: an ERROR event (the server ends the stream after one; the
// caller may close it before reading the end), or a read error or EOF before the caller
// closed the body and before the timeoutSeconds it asked for ran out.
type watchEnds struct {
	next http.RoundTripper

	mu    sync.Mutex
	ended []time.Time
}

// RoundTrip wraps the body of every watch answered 200.
func (w *watchEnds) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || !isWatch(req) {
		return resp, err
	}
	body := &watchBody{ReadCloser: resp.Body, ends: w,
		jsonError: marker{text: []byte(`"type":"ERROR"`)}, protobufError: marker{text: []byte("\x0a\x05ERROR")}}
	if seconds, err := strconv.Atoi(req.URL.Query().Get("timeoutSeconds")); err == nil && seconds > 0 {
		// A stream that ends within a second of its timeout ended as asked.
		body.intendedEnd = time.Now().Add(time.Duration(seconds-1) * time.Second)
	}
	resp.Body = body
	return resp, nil
}

// count returns how many watches ended so far.
func (w *watchEnds) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ended)
}

type watchBody struct {
	io.ReadCloser
	ends        *watchEnds
	intendedEnd time.Time // zero: no timeout asked for
	closed      atomic.Bool
	once        sync.Once
	// The event type ERROR as JSON and as protobuf (WatchEvent field 1, a 5-byte string).
	jsonError, protobufError marker
}

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	errorEvent := n > 0 && (b.jsonError.in(p[:n]) || b.protobufError.in(p[:n]))
	if errorEvent || err != nil && !b.closed.Load() && (b.intendedEnd.IsZero() || time.Now().Before(b.intendedEnd)) {
		b.once.Do(func() {
			b.ends.mu.Lock()
			defer b.ends.mu.Unlock()
			b.ends.ended = append(b.ends.ended, time.Now())
		})
	}
	return n, err
}

func (b *watchBody) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

// isWatch reads the watch parameter as kube-apiserver does: false only for "0"/"false".
func isWatch(req *http.Request) bool {
	query := req.URL.Query()
	if !query.Has("watch") {
		return false
	}
	v := query.Get("watch")
	return v != "0" && v != "false"
}

// loadKubeconfig reads a kubeconfig the way kubectl does; namespace "" means the context's
// namespace, "all" every namespace.
func loadKubeconfig(path, namespace string) (*rest.Config, string, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	switch namespace {
	case "":
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, "", err
		}
	case "all":
		namespace = ""
	}
	return cfg, namespace, nil
}

func namespaceLabel(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}
