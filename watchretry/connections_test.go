package watchretry

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http/httptest"
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
