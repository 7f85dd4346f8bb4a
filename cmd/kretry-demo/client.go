package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// countingTransport counts, on the client side, what reached the server: every attempt
// (it sits below kretry), response body bytes, and initial-state fetches. The demo server
// counts the same on its side; these are for a real cluster.
type countingTransport struct {
	next                     http.RoundTripper
	requests, fetches, bytes atomic.Int64
}

// RoundTrip counts the request and wraps the response body to count its bytes.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	query := req.URL.Query()
	watching := query.Get("watch") == "true" || query.Get("watch") == "1"
	isCollection := strings.HasSuffix(req.URL.Path, "/configmaps")
	if resp.StatusCode == http.StatusOK && isCollection &&
		(watching && query.Get("sendInitialEvents") == "true" || !watching && query.Get("continue") == "") {
		t.fetches.Add(1)
	}
	resp.Body = &countingBody{ReadCloser: resp.Body, bytes: &t.bytes}
	return resp, nil
}

type countingBody struct {
	io.ReadCloser
	bytes *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.bytes.Add(int64(n))
	return n, err
}

// loadKubeconfig reads a kubeconfig the way kubectl does; namespace "" means the context's
// namespace, "all" every namespace.
func loadKubeconfig(path, namespace string) (*rest.Config, string, error) {
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	switch namespace {
	case "":
		if namespace, _, err = loader.Namespace(); err != nil {
			return nil, "", err
		}
	case "all":
		namespace = ""
	}
	return cfg, namespace, nil
}

func namespaceLabel(namespace string) string {
	if namespace == "" {
		return "all namespaces"
	}
	return "namespace " + namespace
}
