package watchretry

import (
	"crypto/sha256"
	"crypto/tls"
	"net"
	"reflect"
	"sync"
)

// maxMarked bounds how many connections a transport remembers asking to
// retire.
const maxMarked = 64

// marks are the HTTP/2 connections a transport's watches have asked to
// retire, after a 410 came over them from an apiserver that lacked the
// resume point. A request with Connection: close (req.Close) is the one way
// a RoundTripper has to get a new connection that touches no other: Go's
// HTTP/2 client stops picking a connection for new requests once a request
// on it carries it (its open streams go on), and the next request dials
// anew, which a load balancer routes again. golang.org/x/net/http2,
// client-go's, picks the connection before it looks at req.Close, so the
// request that asks lands on the old connection and only retires it; the
// one after it dials. (Over HTTP/1.1 every resume asks for its connection
// to be closed after it: see stream.reopen.)
//
// One process runs many watches over one connection: when they all meet
// the fresh apiserver, one of them retiring the connection is enough, and
// every further req.Close would retire the next connection too, each
// dialed for nothing. So a connection is asked to retire once; the other
// watches retry without req.Close and ride the connection its retirement
// dialed. The connections the 410 retries open are thus bounded by the
// connections that answered 410s, not by the watches.
type marks struct {
	mu     sync.Mutex
	marked []net.Conn // oldest first, at most maxMarked
}

// mark reports whether a resume after a 410 that came over conn must ask
// for a new connection (req.Close), and remembers that conn was asked to
// retire. A nil conn (a transport below that reports none) always asks.
func (m *marks) mark(conn net.Conn) bool {
	if connKey(conn) == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.marked {
		if c == conn {
			return false
		}
	}
	if len(m.marked) == maxMarked {
		m.marked = append(m.marked[:0], m.marked[1:]...)
	}
	m.marked = append(m.marked, conn)
	return true
}

// connKey is conn as a comparable identity, or nil when there is none (no
// connection reported, or one whose type cannot be compared).
func connKey(conn net.Conn) any {
	if conn == nil || !reflect.TypeOf(conn).Comparable() {
		return nil
	}
	return conn
}

// apiserver identifies the apiserver that answered over a TLS connection
// by a digest of its serving certificate, or returns nil when there is
// none. Each apiserver of an HA control plane set up by kubeadm has its own
// serving certificate, and a balancer that passes TLS through shows the
// client the certificate of the apiserver it reached; behind a balancer
// that ends TLS itself, or apiservers sharing one certificate, every answer
// has the same identity and tells the apiservers apart no more than none.
func apiserver(state *tls.ConnectionState) any {
	if state == nil || len(state.PeerCertificates) == 0 {
		return nil
	}
	return sha256.Sum256(state.PeerCertificates[0].Raw)
}
