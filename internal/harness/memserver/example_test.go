package memserver_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/kretry/kretry/internal/harness/memserver"
)

func Example() {
	rt := memserver.Server{Body: []byte(`{"kind":"PodList"}`), Chunked: true}
	req, _ := http.NewRequest(http.MethodGet, "http://k8s.test/api/v1/pods", nil)
	resp, _ := rt.RoundTrip(req)
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, resp.ContentLength, string(body))
	// Output: 200 -1 {"kind":"PodList"}
}
