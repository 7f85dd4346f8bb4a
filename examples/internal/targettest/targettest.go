package targettest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kretry/kretry/examples/internal/target"
	"github.com/kretry/kretry/internal/demoserver"
)

// StartServer starts a demo server that is closed when the test ends.
func StartServer(t testing.TB, cfg demoserver.Config) *demoserver.Server {
	server := demoserver.Start(cfg)
	t.Cleanup(server.Close)
	return server
}

// RunFor calls run against server as userAgent for d, failing the test on an error, and
// returns its summary and what it printed.
func RunFor[S any](t testing.TB, d time.Duration, server *demoserver.Server, userAgent string, run target.RunFunc[S]) (S, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var out bytes.Buffer
	got, err := run(ctx, server.RESTConfig(userAgent), server.Namespace(), &out)
	if err != nil {
		t.Fatal(err)
	}
	return got, out.String()
}

// Running is a run in the background; see Go.
type Running[S any] struct {
	cancel context.CancelFunc
	done   chan S
	out    bytes.Buffer
}

// Go calls run against server as userAgent in the background, until Stop (or the end
// of the test). An error from run fails the test.
func Go[S any](t testing.TB, server *demoserver.Server, userAgent string, run target.RunFunc[S]) *Running[S] {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	r := &Running[S]{cancel: cancel, done: make(chan S, 1)}
	go func() {
		got, err := run(ctx, server.RESTConfig(userAgent), server.Namespace(), &r.out)
		if err != nil {
			t.Error(err)
		}
		r.done <- got
	}()
	return r
}

// Stop ends the run and returns its summary and what it printed. It must be called at
// most once.
func (r *Running[S]) Stop() (S, string) {
	r.cancel()
	got := <-r.done
	return got, r.out.String()
}

// WaitFor polls ok every 10ms and fails the test with message if it is not true within
// 30s.
func WaitFor(t testing.TB, message string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(message)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Settle lets the server inject faults for d, then stops its faults and its writer and
// waits until userAgent's watch has caught up with the last change, failing the test
// with "<watch> did not catch up within 30s" if it does not.
func Settle(t testing.TB, server *demoserver.Server, userAgent string, d time.Duration, watch string) {
	t.Helper()
	time.Sleep(d) // let faults happen; nothing after this depends on how many
	server.StopFaults()
	server.StopWriter()
	// A bookmark is sent only to a watch that has every change; the second one counted
	// after the writer stopped was computed after its last change.
	bookmarks := server.Stats(userAgent).Bookmarks
	WaitFor(t, fmt.Sprintf("%s did not catch up within 30s", watch), func() bool {
		return server.Stats(userAgent).Bookmarks >= bookmarks+2
	})
}
