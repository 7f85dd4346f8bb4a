package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/internal/harness/fakeclock"
	"github.com/kretry/kretry/transport"
)

// listOnce lists the pods of ns once through cs and reports what came of it:
// how many LISTs the server saw for it and the error.
func listOnce(ctx context.Context, t *testing.T, cs kubernetes.Interface, lists *atomic.Int32) (int32, error) {
	t.Helper()
	before := lists.Load()
	_, err := cs.CoreV1().Pods("ns").List(ctx, metav1.ListOptions{})
	return lists.Load() - before, err
}

// TestDisableEnv: with KRETRY_DISABLE set when the clientset is built, a 503
// reaches the caller as the server sent it, after one request, and the
// Observer hears nothing; the variable is read when the transport is built,
// so changing it afterwards changes nothing for that clientset.
func TestDisableEnv(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, value := range []string{"1", "true", "TRUE", "t"} {
		t.Run("off="+value, func(t *testing.T) {
			t.Setenv(transport.DisableEnv, value)
			server, lists := apiServer(t, 1, unavailable)
			var heard recorder
			cs := clientset(t, server, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch), Observer: &heard}))
			t.Setenv(transport.DisableEnv, "") // too late: read at wrap time
			sent, err := listOnce(ctx, t, cs, lists)
			if !apierrors.IsServiceUnavailable(err) {
				t.Errorf("List err = %v, want the server's 503", err)
			}
			if sent != 1 {
				t.Errorf("%d LISTs, want 1 (no retry)", sent)
			}
			if events := heard.lines(); len(events) != 0 {
				t.Errorf("the Observer heard %q with kretry off", events)
			}
		})
	}
	for _, value := range []string{"", "0", "false", "off", "yes"} {
		t.Run("on="+value, func(t *testing.T) {
			t.Setenv(transport.DisableEnv, value)
			server, lists := apiServer(t, 1, unavailable)
			cs := clientset(t, server, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch)}))
			t.Setenv(transport.DisableEnv, "1") // too late: read at wrap time
			sent, err := listOnce(ctx, t, cs, lists)
			if err != nil || sent != 2 {
				t.Errorf("List: err %v after %d LISTs, want the 503 retried once", err, sent)
			}
		})
	}
}

// TestWithoutRetry: a call made under transport.WithoutRetry gets the 503
// after one request, unobserved, while the same clientset's other calls
// are still retried.
func TestWithoutRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server, lists := apiServer(t, 1, unavailable)
	var heard recorder
	cs := clientset(t, server, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch), Observer: &heard}))

	sent, err := listOnce(transport.WithoutRetry(ctx), t, cs, lists)
	if !apierrors.IsServiceUnavailable(err) || sent != 1 {
		t.Errorf("List under WithoutRetry: err %v after %d LISTs, want the server's 503 after 1", err, sent)
	}
	if events := heard.lines(); len(events) != 0 {
		t.Errorf("the Observer heard %q of a request under WithoutRetry", events)
	}

	server, lists = apiServer(t, 1, unavailable)
	cs = clientset(t, server, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch)}))
	if sent, err := listOnce(ctx, t, cs, lists); err != nil || sent != 2 {
		t.Errorf("List without it: err %v after %d LISTs, want the 503 retried once", err, sent)
	}
}

// TestOptOneClientOut: a rest.Config copied before Wrap builds a client
// kretry never sees; the wrapped original still retries.
func TestOptOneClientOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	server, lists := apiServer(t, 2, unavailable)
	cfg := &rest.Config{Host: server.URL}
	plain := rest.CopyConfig(cfg)
	wrapped := clientsetWith(t, cfg, transport.Wrapper(transport.Config{Clock: fakeclock.New(epoch)}))
	unwrapped := clientsetWith(t, plain, nil)

	if sent, err := listOnce(ctx, t, unwrapped, lists); !apierrors.IsServiceUnavailable(err) || sent != 1 {
		t.Errorf("the copy: err %v after %d LISTs, want the 503 after 1", err, sent)
	}
	if sent, err := listOnce(ctx, t, wrapped, lists); err != nil || sent != 2 {
		t.Errorf("the wrapped config: err %v after %d LISTs, want the 503 retried once", err, sent)
	}
}

// One call can opt out of kretry through its context: it is sent once and
// its answer, here a 503, reaches the caller as the server sent it. The
// other calls of the same clientset are retried as before.
func ExampleWithoutRetry() {
	var calls atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"ServiceUnavailable","code":503}`)
			return
		}
		fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"web-0"}}]}`)
	}))
	defer server.Close()

	cfg := &rest.Config{Host: server.URL}
	cfg.Wrap(transport.Wrapper(transport.Config{InitialBackoff: 10 * time.Millisecond}))
	clientset := kubernetes.NewForConfigOrDie(cfg)

	ctx := context.Background()
	_, err := clientset.CoreV1().Pods("default").List(transport.WithoutRetry(ctx), metav1.ListOptions{})
	fmt.Println("without retry:", apierrors.IsServiceUnavailable(err))
	pods, err := clientset.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	fmt.Println("with retry:", err, len(pods.Items))
	// Output:
	// without retry: true
	// with retry: <nil> 1
}

// TestCurrentState: what each value of KRETRY_DISABLE means, and the words
// a log line and a metric's reader get for it.
func TestCurrentState(t *testing.T) {
	tests := []struct {
		value string
		unset bool
		want  transport.State
	}{
		{unset: true, want: transport.State{On: true, Why: "KRETRY_DISABLE is not set"}},
		{value: "", want: transport.State{On: true, Why: "KRETRY_DISABLE is not set"}},
		{value: "1", want: transport.State{On: false, Value: "1", Why: "KRETRY_DISABLE=1"}},
		{value: "true", want: transport.State{On: false, Value: "true", Why: "KRETRY_DISABLE=true"}},
		{value: "T", want: transport.State{On: false, Value: "T", Why: "KRETRY_DISABLE=T"}},
		{value: "0", want: transport.State{On: true, Value: "0", Why: "KRETRY_DISABLE=0"}},
		{value: "False", want: transport.State{On: true, Value: "False", Why: "KRETRY_DISABLE=False"}},
		{value: "yes", want: transport.State{On: true, Value: "yes", Unrecognised: true, Why: `KRETRY_DISABLE="yes" is not true or false: ignored`}},
		{value: "off", want: transport.State{On: true, Value: "off", Unrecognised: true, Why: `KRETRY_DISABLE="off" is not true or false: ignored`}},
		{value: " 1", want: transport.State{On: true, Value: " 1", Unrecognised: true, Why: `KRETRY_DISABLE=" 1" is not true or false: ignored`}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.value), func(t *testing.T) {
			t.Setenv(transport.DisableEnv, tc.value)
			if tc.unset {
				os.Unsetenv(transport.DisableEnv) // t.Setenv restores it
			}
			if got := transport.CurrentState(); got != tc.want {
				t.Errorf("CurrentState() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestBuildLogsOneLine: every wrapper build logs one line at level 0 that
// says on or off and why; a value kretry cannot read is an error line
// naming it.
func TestBuildLogsOneLine(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	klog.SetLogger(funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{}))
	defer klog.ClearLogger()
	tests := []struct{ value, want string }{
		{"", `"level"=0 "msg"="kretry: on" "why"="KRETRY_DISABLE is not set"`},
		{"1", `"level"=0 "msg"="kretry: off: requests pass through untouched" "why"="KRETRY_DISABLE=1"`},
		{"yes", `"msg"="kretry: on: KRETRY_DISABLE=\"yes\" is not true or false: ignored" "error"=null "want"=`},
	}
	for _, tc := range tests {
		t.Setenv(transport.DisableEnv, tc.value)
		mu.Lock()
		lines = nil
		mu.Unlock()
		cfg := &rest.Config{Host: "http://127.0.0.1:1"}
		cfg.Wrap(transport.Wrapper(transport.Config{}))
		if _, err := kubernetes.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := append([]string(nil), lines...)
		mu.Unlock()
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
			t.Errorf("KRETRY_DISABLE=%q: build logged %q, want one line starting %s", tc.value, got, tc.want)
		}
	}
}

// CurrentState says what a transport built now does, and why: what the
// line each build logs says, for a program's own start line or a metric.
func ExampleCurrentState() {
	os.Setenv(transport.DisableEnv, "1")
	defer os.Unsetenv(transport.DisableEnv)
	state := transport.CurrentState()
	fmt.Println(state.On, state.Why)
	// Output:
	// false KRETRY_DISABLE=1
}
