package watchretry_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// TestSeparatorNotHeldBack: an event and its newline written together, read
// with a slice that ends at the event's closing brace: the newline comes on
// the next Read, not with the next event. Fails before: the next Read
// blocked until another event arrived, and a line reader ran one behind.
func TestSeparatorNotHeldBack(t *testing.T) {
	cm := configMap("a", "101")
	cm.Data = map[string]string{"key": strings.Repeat("x", 8<<10)} // larger than a small read
	ev := event(t, jsonStream, watch.Added, cm)
	srv := newServer(t, jsonStream, reply{body: ev, hold: true})
	resp, _ := rawWatch(t, srv, "resourceVersion=100", nil)
	p := make([]byte, len(ev)-1) // ends at the closing brace
	if n, err := io.ReadFull(resp.Body, p); err != nil || n != len(p) {
		t.Fatalf("read %d, %v", n, err)
	}
	type result struct {
		data string
		err  error
	}
	next := make(chan result, 1)
	go func() {
		buf := make([]byte, 16<<10)
		n, err := resp.Body.Read(buf)
		next <- result{string(buf[:n]), err}
	}()
	select {
	case r := <-next:
		if r.data != "\n" || r.err != nil {
			t.Fatalf("next Read = %q, %v; want the newline", r.data, r.err)
		}
	case <-time.After(10 * time.Second):
		resp.Body.Close()
		<-next
		t.Fatal("the newline was held back until the next event")
	}
}

// TestLateSeparatorReadInPieces: an event's separator of several bytes
// arrives after the event was delivered, and the caller reads it with a
// slice shorter than it: every byte reaches the caller, in order. Fails
// before: the part that did not fit was dropped, and the caller read
// "}\r{" for "}\r\n{".
func TestLateSeparatorReadInPieces(t *testing.T) {
	first := event(t, jsonStream, watch.Added, configMap("a", "101"))
	second := event(t, jsonStream, watch.Modified, configMap("a", "102"))
	frame := first[:len(first)-1] // without its newline
	const separator = " \r\n"
	// The stream then ends early, and its resume is refused: a clean end.
	srv := newServer(t, jsonStream, reply{chunks: [][]byte{frame, []byte(separator), second}},
		reply{status: http.StatusForbidden, contentType: "application/json", body: []byte(`{}`)})
	resp, _ := rawWatch(t, srv, "resourceVersion=100", nil)
	p := make([]byte, len(frame))
	n, err := resp.Body.Read(p) // the event, ending at its closing brace
	got := p[:n]
	for err == nil {
		one := make([]byte, 1)
		n, err = resp.Body.Read(one)
		got = append(got, one[:n]...)
	}
	if want := string(frame) + separator + string(second); string(got) != want || err != io.EOF {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
}
