package watchretry

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"reflect"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// maxMarked bounds how many connections a transport remembers asking to
// retire.
const maxMarked = 64

// marks are the connections a transport's watches have asked to retire,
// after a 410 came over them from an apiserver that lacked the resume
// point. A request with Connection: close (req.Close) is the one way a
// RoundTripper has to get a new connection: Go's HTTP/2 client stops
// picking a connection for new requests once a request on it carries it
// (its open streams go on), and the next request dials anew, which a load
// balancer routes again. golang.org/x/net/http2, client-go's, picks the
// connection before it looks at req.Close, so the request that asks lands
// on the old connection and only retires it; the one after it dials.
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

// http1 reports whether conn carries HTTP/1.1, one request at a time: not
// a TLS connection that negotiated h2 (client-go speaks HTTP/2 only over
// TLS). Closing it after its answer was read ends nobody else's request.
func http1(conn net.Conn) bool {
	if connKey(conn) == nil {
		return false
	}
	if tlsConn, ok := conn.(*tls.Conn); ok {
		return tlsConn.ConnectionState().NegotiatedProtocol != "h2"
	}
	return true
}

// retireIdle closes the idle connections of next (net/http's and
// golang.org/x/net/http2's pools close a connection only when it carries no
// request) and reports whether conn was among them: an HTTP/2 connection
// whose only request was the 410's, its stream closed, is then retired, and
// the retry dials anew. The other idle connections it closes are dialed
// again when needed.
func retireIdle(next http.RoundTripper, conn net.Conn) bool {
	tlsConn, ok := conn.(*tls.Conn)
	if !ok {
		return false
	}
	utilnet.CloseIdleConnectionsFor(next)
	// A write of nothing sends nothing; after Close it fails with
	// net.ErrClosed, crypto/tls checking that before anything else.
	_, err := tlsConn.Write(nil)
	return errors.Is(err, net.ErrClosed)
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
