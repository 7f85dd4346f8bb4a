package watchretry

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
)

// TestHTTP1 pins which connections a 410's retry closes: one that carries
// HTTP/1.1 (plain, or TLS that did not negotiate h2), never one that
// negotiated HTTP/2 (other watches may ride it) or none reported.
func TestHTTP1(t *testing.T) {
	h2 := tlsPair(t, []string{"h2", "http/1.1"})
	h1 := tlsPair(t, []string{"http/1.1"})
	plain, peer := net.Pipe()
	t.Cleanup(func() { plain.Close(); peer.Close() })
	for _, tt := range []struct {
		name string
		conn net.Conn
		want bool
	}{
		{"no connection reported", nil, false},
		{"plain TCP (HTTP/1.1)", plain, true},
		{"TLS, http/1.1 negotiated", h1, true},
		{"TLS, h2 negotiated", h2, false},
	} {
		if got := http1(tt.conn); got != tt.want {
			t.Errorf("%s: http1 = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// tlsPair is the client side of a TLS handshake with a loopback server
// offering h2 and http/1.1, the client asking for protos.
func tlsPair(t *testing.T, protos []string) *tls.Conn {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: protos})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.Handshake(); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestRetireIdle: an HTTP/2 connection that carries no request after the
// 410's is closed, so the retry dials anew; one that still carries a
// request (another watch) is left open, for req.Close to retire.
func TestRetireIdle(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if r.URL.Path == "/hold" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	for _, tt := range []struct {
		name string
		busy bool
		want bool
	}{
		{"nothing else on it", false, true},
		{"another request on it", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := srv.Client()
			tr := client.Transport.(*http.Transport).Clone()
			client = &http.Client{Transport: tr}
			t.Cleanup(tr.CloseIdleConnections)
			get := func(path string) (*http.Response, net.Conn) {
				var conn net.Conn
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn }})
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if resp.ProtoMajor != 2 {
					t.Fatalf("precondition: HTTP/%d, want HTTP/2", resp.ProtoMajor)
				}
				return resp, conn
			}
			if tt.busy {
				held, _ := get("/hold")
				t.Cleanup(func() { held.Body.Close() })
			}
			resp, conn := get("/gone")
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := retireIdle(tr, conn); got != tt.want {
				t.Errorf("retireIdle = %v, want %v", got, tt.want)
			}
		})
	}
}
