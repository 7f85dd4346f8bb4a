package transport

import (
	"net/http"
	"strings"
)

// kind is what a request is, as far as retrying goes.
type kind uint8

const (
	// kindPassThrough requests reach the next RoundTripper untouched and are
	// never retried.
	kindPassThrough kind = iota
	// kindGet is a GET of one object (or a subresource of one, or discovery).
	kindGet
	// kindList is a GET of a collection.
	kindList
	// kindWatch is a watch of a collection or an object.
	kindWatch
)

func (k kind) String() string {
	return [...]string{"pass-through", "get", "list", "watch"}[k]
}

// streamingSubresources are never retried: they stream or tunnel something
// other than API objects, and a retry could repeat a side effect.
var streamingSubresources = map[string]bool{
	"log": true, "exec": true, "attach": true, "portforward": true, "proxy": true,
}

// namespaceSubresources are the subresources of a Namespace object, which
// share the path position a namespaced resource takes after
// /namespaces/{name}/ (the API server's own RequestInfo makes the same cut).
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// classify tells what req is. apiPrefix is stripped from the path first.
// Only GET is ever retried; requests asking for a protocol upgrade and
// paths outside /api and /apis pass through.
func classify(req *http.Request, apiPrefix string) kind {
	if req.Method != http.MethodGet || req.Header.Get("Upgrade") != "" ||
		strings.EqualFold(req.Header.Get("Connection"), "upgrade") {
		return kindPassThrough
	}
	path, ok := strings.CutPrefix(req.URL.Path, strings.TrimSuffix(apiPrefix, "/"))
	if !ok {
		return kindPassThrough
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api, version
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:] // apis, group, version
	default:
		return kindPassThrough
	}
	watch := false
	if len(parts) > 0 && parts[0] == "watch" {
		watch, parts = true, parts[1:]
	}
	if values, ok := req.URL.Query()["watch"]; ok && len(values) > 0 {
		switch strings.ToLower(values[0]) {
		case "false", "0":
		default:
			watch = true
		}
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && (len(parts) == 2 || !namespaceSubresources[parts[2]]) {
		if len(parts) > 2 {
			parts = parts[2:] // namespaces, name: what follows is a namespaced resource
		}
	}
	switch {
	case len(parts) == 0:
		if watch {
			return kindPassThrough
		}
		return kindGet // discovery: /api/v1, /apis/apps/v1
	case len(parts) >= 3 && streamingSubresources[parts[2]]:
		return kindPassThrough
	case watch:
		return kindWatch
	case len(parts) == 1:
		return kindList
	default:
		return kindGet
	}
}
