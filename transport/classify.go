package transport

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
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
		strings.Contains(strings.ToLower(req.Header.Get("Connection")), "upgrade") {
		return kindPassThrough
	}
	path, ok := strings.CutPrefix(req.URL.Path, strings.TrimSuffix(apiPrefix, "/"))
	if !ok || (path != "" && path[0] != '/') {
		return kindPassThrough // outside the prefix, or "/k8s" matching "/k8sfoo"
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
	// The legacy /watch/ segment makes any read a watch, of a collection
	// or of one object; the legacy /proxy/ segment tunnels.
	watch := false
	if len(parts) > 0 {
		switch parts[0] {
		case "watch":
			watch, parts = true, parts[1:]
		case "proxy":
			return kindPassThrough
		}
	}
	if len(parts) > 2 && parts[0] == "namespaces" && !namespaceSubresources[parts[2]] {
		parts = parts[2:] // namespaces, name: what follows is a namespaced resource
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
		// The query's watch parameter only turns a collection read into a
		// watch; on one object the API server ignores it.
		if watchParam(req.URL.RawQuery) {
			return kindWatch
		}
		return kindList
	default:
		return kindGet
	}
}

// watchParam reads the watch query parameter as the API server does, with
// apimachinery's own conversion (runtime.Convert_Slice_string_To_bool):
// absent, "0", "f" and "false" (any case) are false; any other value, even
// an empty one or "yes", is true.
func watchParam(rawQuery string) bool {
	if !strings.Contains(rawQuery, "watch") {
		return false // spares parsing the query of the common LIST
	}
	// Like URL.Query, keep what parses and ignore the rest.
	values, _ := url.ParseQuery(rawQuery)
	watch, ok := values["watch"]
	if !ok {
		return false
	}
	var on bool
	if err := runtime.Convert_Slice_string_To_bool(&watch, &on, nil); err != nil {
		return false // the conversion never fails; the server would refuse the request
	}
	return on
}
