package demoserver

import (
	"encoding/json"
	"net/http"
	"runtime"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Discovery is served in the legacy JSON form only; clients that ask for aggregated
// discovery list the plain type too and fall back to it.

func serveVersion(w http.ResponseWriter) {
	writeJSON(w, version.Info{
		Major:      "1",
		Minor:      "37",
		GitVersion: "v1.37.2-kretry-demo",
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	})
}

func serveAPIVersions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
		},
	})
}

func serveAPIResources(w http.ResponseWriter) {
	writeJSON(w, metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{
			Name:         "configmaps",
			SingularName: "configmap",
			Namespaced:   true,
			Kind:         "ConfigMap",
			Verbs:        metav1.Verbs{"get", "list", "watch"},
			ShortNames:   []string{"cm"},
		}},
	})
}

func serveAPIGroups(w http.ResponseWriter) {
	writeJSON(w, metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{},
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", mediaTypeJSON)
	_, _ = w.Write(body)
}
