package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"

	"k8s.io/client-go/rest"

	"github.com/kretry/kretry/cmd/kretry-proxy/proxy"
)

// A proxy in front of an API server (here a stand-in that answers one LIST), serving on a
// free loopback port; a client without credentials asks it, and a request naming another
// host is refused.
func ExampleNew() {
	apiServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]} (asked with %q)`, r.Header.Get("Authorization"))
	}))
	defer apiServer.Close()

	srv, err := proxy.New(&rest.Config{Host: apiServer.URL, BearerToken: "secret"}, proxy.Options{})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	resp, err := http.Get("http://" + ln.Addr().String() + "/api/v1/namespaces/default/configmaps")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, string(body))

	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/api/v1/namespaces/default/configmaps", nil)
	req.Host = "attacker.example"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// 200 OK {"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]} (asked with "Bearer secret")
	// 403 Forbidden
}
