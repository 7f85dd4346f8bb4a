package transport_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// Credentials the storm below runs with; none may reach a log line, an
// error or a metric label.
const (
	secretToken    = "sha256~tokenPrefixXYZ.s3cr3t-bearer-token-value"
	tokenPrefix    = "sha256~tokenPrefixXYZ"
	secretUser     = "kretry-basic-user"
	secretPassword = "basic-p4ssw0rd-value"
	secretCN       = "kretry-client-cert-cn"
	secretSelector = "app=selector-secret"
)

// clientCert is a self-signed client certificate and its key, in PEM.
func clientCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: secretCN, Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// stormServer is a TLS API server that asks for client certificates and
// answers pod LISTs and WATCHes with a storm: LISTs get a 503, a body cut
// mid-read and a 429 before their answer, LISTs selecting "giveup" get 503
// forever; a watch breaks after its first event, its reopening gets a 503,
// then an ERROR 500 event, then a 410. It checks every request carries the
// credentials, so the test knows they were configured.
func stormServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var lists, watches, unauthenticated atomic.Int32
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			unauthenticated.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Query().Get("watch") == "true":
			switch watches.Add(1) {
			case 1:
				w.WriteHeader(http.StatusOK)
				fmt.Fprintln(w, `{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"6"}}}`)
				w.(http.Flusher).Flush()
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = conn.Close()
				}
			case 2:
				unavailable(w, "")
			case 3:
				w.WriteHeader(http.StatusOK)
				fmt.Fprintln(w, `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":500,"reason":"InternalError","message":"x"}}`)
			default:
				w.WriteHeader(http.StatusGone)
				fmt.Fprint(w, statusBody(410, metav1.StatusReasonExpired, "too old resource version", nil))
			}
		case strings.Contains(r.URL.Query().Get("labelSelector"), "giveup"):
			unavailable(w, "")
		default:
			body := podList(3)
			switch lists.Add(1) % 4 {
			case 1:
				unavailable(w, body)
			case 2:
				cutMidBody(w, body)
			case 3:
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprint(w, statusBody(429, metav1.StatusReasonTooManyRequests, "slow down", nil))
			default:
				fmt.Fprint(w, body)
			}
		}
	}))
	server.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	server.StartTLS()
	t.Cleanup(server.Close)
	return server, &unauthenticated
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) line(prefix, args string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fmt.Fprintf(&b.buf, "%s %s\n", prefix, args)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestNoSecretInLogsErrorsOrLabels(t *testing.T) {
	certPEM, keyPEM := clientCert(t)
	logs := &syncBuffer{}
	ctx := klog.NewContext(context.Background(), funcr.New(logs.line, funcr.Options{Verbosity: 4}))
	observed := &recorder{}
	var errs []string
	// client-go takes a bearer token or basic auth, not both: one storm each.
	for _, auth := range []rest.Config{{BearerToken: secretToken}, {Username: secretUser, Password: secretPassword}} {
		server, unauthenticated := stormServer(t)
		cfg := &auth
		cfg.Host = server.URL
		cfg.TLSClientConfig = rest.TLSClientConfig{CertData: certPEM, KeyData: keyPEM,
			CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})}
		cfg.Wrap(transport.Wrapper(transport.Config{
			Clock:               fakeclock.New(epoch),
			Rand:                func() float64 { return 0 },
			InternalErrorWindow: 5 * time.Second,
			Observer:            observed,
		}))
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pods := cs.CoreV1().Pods("ns")
		if _, err := pods.List(ctx, metav1.ListOptions{LabelSelector: secretSelector}); err != nil {
			t.Errorf("LIST through the storm: %v", err)
		}
		_, err = pods.List(ctx, metav1.ListOptions{LabelSelector: secretSelector + ",giveup"})
		if err == nil {
			t.Error("a LIST answered 503 forever succeeded")
		} else {
			errs = append(errs, err.Error())
		}
		timeout := int64(300)
		watcher, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: "5", TimeoutSeconds: &timeout, LabelSelector: secretSelector})
		if err != nil {
			t.Fatal(err)
		}
		for event := range watcher.ResultChan() {
			if status, ok := event.Object.(*metav1.Status); ok {
				errs = append(errs, status.Message)
			}
		}
		cs.CoreV1().RESTClient().(*rest.RESTClient).Client.CloseIdleConnections()
		if n := unauthenticated.Load(); n != 0 {
			t.Fatalf("%d requests came without the credentials", n)
		}
	}

	logged := logs.String()
	for _, want := range []string{"kretry: attempt", "kretry: retrying", "kretry: resuming watch", "kretry: gave up", `"resourceVersion"="6"`} {
		if !strings.Contains(logged, want) {
			t.Errorf("no %q in the logs:\n%s", want, logged)
		}
	}
	labels := strings.Join(observed.lines(), "\n")
	basic := base64.StdEncoding.EncodeToString([]byte(secretUser + ":" + secretPassword))
	secrets := []string{secretToken, tokenPrefix, "Bearer", secretUser, secretPassword, basic, secretCN, "selector-secret",
		string(keyPEM[40:80]), string(certPEM[40:80])}
	for where, text := range map[string]string{"logs": logged, "errors": strings.Join(errs, "\n"), "metric labels": labels} {
		for _, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("%q in the %s:\n%s", secret, where, text)
			}
		}
	}
}
