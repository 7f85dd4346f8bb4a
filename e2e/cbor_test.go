//go:build e2e

package e2e_test

import (
	"fmt"
	"mime"
	"net/http"
	"sync"
	"testing"
	"time"

	clientfeatures "k8s.io/client-go/features"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/faultproxy"
)

// TestRandomCutsCBOR is random-cuts in CBOR: serverC runs with CBORServingAndStorage, the
// client has client-go's ClientsAllowCBOR and ClientsPreferCBOR gates on (what
// KUBE_FEATURE_ClientsAllowCBOR=true and KUBE_FEATURE_ClientsPreferCBOR=true do, set for the
// test only) and asks for application/cbor (a typed clientset otherwise asks built-in types
// for protobuf whatever the gates say), so every watch is an application/cbor-seq stream.
func TestRandomCutsCBOR(t *testing.T) {
	sharedCluster(t)
	preferCBOR(t)
	stockAndKretry(t, func(t *testing.T, withKretry bool) figure {
		ns := namespace(t, serverC, "cbor", 40)
		p := newProxy(t, 7, serverC)
		p.SetRule(faultproxy.Rule{CutsPerMinute: 30})
		w := startWriter(t, serverC, ns, 7, 100*time.Millisecond)
		c := newClient(p.Addr(), apiserver.Admin, withKretry)
		c.cfg.ContentType = "application/cbor"
		types := &watchContentTypes{}
		c.cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { types.next = rt; return types })
		inf := startInformer(t, c, ns)
		time.Sleep(30 * time.Second)
		p.SetRule(faultproxy.Rule{})
		f := finish(t, "cbor-cuts", c, inf, w, serverC, ns, fmt.Sprintf("%d cuts in 30s; the caller saw %d watch responses, all application/cbor-seq",
			p.Stats().Cuts, types.total()))
		if n := types.count("application/cbor-seq"); n == 0 || n != types.total() {
			t.Errorf("watches answered %s; want application/cbor-seq only", types)
		}
		wantFetches(t, withKretry, f, 1, "every cut of a CBOR watch is resumable from the last RV")
		return f
	})
}

// preferCBOR turns client-go's ClientsAllowCBOR and ClientsPreferCBOR gates on for the test.
func preferCBOR(t *testing.T) {
	prev := clientfeatures.FeatureGates()
	clientfeatures.ReplaceFeatureGates(cborGates{Gates: prev})
	t.Cleanup(func() { clientfeatures.ReplaceFeatureGates(prev) })
}

// cborGates turns on client-go's two CBOR gates.
type cborGates struct{ clientfeatures.Gates }

func (g cborGates) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.ClientsAllowCBOR || f == clientfeatures.ClientsPreferCBOR {
		return true
	}
	return g.Gates.Enabled(f)
}

// watchContentTypes counts the media types of the watch responses the caller gets.
type watchContentTypes struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string]int
}

func (w *watchContentTypes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusOK && req.URL.Query().Get("watch") == "true" {
		mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		w.mu.Lock()
		if w.seen == nil {
			w.seen = map[string]int{}
		}
		w.seen[mediaType]++
		w.mu.Unlock()
	}
	return resp, err
}

func (w *watchContentTypes) count(mediaType string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[mediaType]
}

func (w *watchContentTypes) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.seen {
		n += c
	}
	return n
}

func (w *watchContentTypes) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprint(w.seen)
}
