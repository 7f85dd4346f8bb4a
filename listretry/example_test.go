package listretry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/kretry/kretry/listretry"
)

// cutOnce is a RoundTripper whose first answer breaks halfway through its
// body, as when an API server restarts mid-LIST.
type cutOnce struct {
	next http.RoundTripper
	cut  bool
}

func (c *cutOnce) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil && !c.cut {
		c.cut = true
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(io.LimitReader(resp.Body, 100), errReader{}), resp.Body}
	}
	return resp, err
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// A LIST whose body breaks mid-read is asked for again at the exact
// resourceVersion the body carried; the caller reads the whole body, once,
// as if nothing happened.
func ExampleNew() {
	const list = `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[` +
		`{"metadata":{"name":"a"}},{"metadata":{"name":"b"}},{"metadata":{"name":"c"}}]}`
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("server asked for", r.URL.RequestURI())
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, list)
	}))
	defer server.Close()

	lists := listretry.New(&cutOnce{next: http.DefaultTransport}, listretry.Config{})
	req, _ := http.NewRequest(http.MethodGet, server.URL+"/api/v1/pods?limit=500&resourceVersion=0", nil)
	resp, err := lists.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), err)
	// Output:
	// server asked for /api/v1/pods?limit=500&resourceVersion=0
	// server asked for /api/v1/pods?resourceVersion=42&resourceVersionMatch=Exact
	// 200 {"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}},{"metadata":{"name":"c"}}]} <nil>
}
