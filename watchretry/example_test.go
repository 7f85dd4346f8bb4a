package watchretry_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/jarcoal/httpmock"

	"github.com/kretry/kretry/watchretry"
)

// A watch whose connection breaks after the first event is resumed from
// that event's resourceVersion; the reader sees one unbroken stream.
func Example() {
	first := `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"101"}}}` + "\n"
	second := `{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"102"}}}` + "\n"

	server := httpmock.NewMockTransport()
	server.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
		fmt.Println("GET", req.URL.Query().Get("resourceVersion"))
		body := io.MultiReader(strings.NewReader(first), strings.NewReader(second[:30]), errorReader{io.ErrUnexpectedEOF})
		if req.URL.Query().Get("resourceVersion") == "101" {
			body = strings.NewReader(second) // then a clean end
		}
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(body)}, nil
	})

	req, _ := http.NewRequest(http.MethodGet, "https://apiserver/api/v1/configmaps?watch=true&resourceVersion=100", nil)
	resp, err := watchretry.New(server, watchretry.Config{}).RoundTrip(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len(first)+len(second))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		panic(err)
	}
	fmt.Print(string(buf))
	// Output:
	// GET 100
	// GET 101
	// {"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"101"}}}
	// {"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","resourceVersion":"102"}}}
}

type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) { return 0, r.err }
