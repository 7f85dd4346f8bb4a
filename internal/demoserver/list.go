package demoserver

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// continueToken is the opaque `continue` value: the snapshot RV of the first page and the
// last name served.
type continueToken struct {
	ResourceVersion uint64 `json:"rv"`
	After           string `json:"start"`
}

func (t continueToken) encode() string {
	raw, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(raw, &t)
	}
	if err != nil || t.ResourceVersion == 0 {
		return t, fmt.Errorf("invalid continue token")
	}
	return t, nil
}

// expiredContinueMessage is kube-apiserver's message for a continue token older than
// the compaction floor.
const expiredContinueMessage = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter, or use the continue token in this response to " +
	"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
	"objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."

// serveList answers a LIST with the apiserver's resourceVersion semantics: "" is the
// current state (paged when limit is set), "0" is any state (limit ignored, as the watch
// cache does), a specific RV with resourceVersionMatch=Exact is that snapshot (410 if
// compacted), otherwise not older than it.
func (s *Server) serveList(w *countingWriter, cd codec, c *client, query url.Values) {
	if query.Get("labelSelector") != "" || query.Get("fieldSelector") != "" {
		writeStatus(w, cd, apierrors.NewBadRequest("the demo server does not support selectors"))
		return
	}
	limit, err := strconv.ParseInt(query.Get("limit"), 10, 64)
	if err != nil || limit < 0 {
		limit = 0
	}
	current, floor := s.floor(c)
	snapshotRV := current
	after := ""
	resourceVersion := query.Get("resourceVersion")

	if token := query.Get("continue"); token != "" {
		if resourceVersion != "" {
			writeStatus(w, cd, apierrors.NewBadRequest("specifying resource version is not allowed when using continue"))
			return
		}
		t, err := decodeContinue(token)
		if err != nil {
			writeStatus(w, cd, apierrors.NewBadRequest(err.Error()))
			return
		}
		if t.ResourceVersion < floor {
			c.stats.expired.Add(1)
			writeStatus(w, cd, apierrors.NewResourceExpired(expiredContinueMessage))
			return
		}
		snapshotRV, after = t.ResourceVersion, t.After
	} else {
		switch resourceVersion {
		case "":
		case "0":
			limit = 0
		default:
			rv, err := strconv.ParseUint(resourceVersion, 10, 64)
			if err != nil {
				writeStatus(w, cd, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", resourceVersion)))
				return
			}
			if rv > current {
				writeStatus(w, cd, apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, current), 1))
				return
			}
			if query.Get("resourceVersionMatch") == string(metav1.ResourceVersionMatchExact) {
				if rv < floor {
					c.stats.expired.Add(1)
					writeStatus(w, cd, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, floor)))
					return
				}
				snapshotRV = rv
			}
		}
	}

	objects := s.store.snapshot(snapshotRV)
	if after != "" {
		objects = objects[sort.Search(len(objects), func(i int) bool { return objects[i].Name > after }):]
	}
	list := &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(snapshotRV, 10)}}
	if limit > 0 && int64(len(objects)) > limit {
		remaining := int64(len(objects)) - limit
		objects = objects[:limit]
		list.Continue = continueToken{ResourceVersion: snapshotRV, After: objects[len(objects)-1].Name}.encode()
		list.RemainingItemCount = &remaining
	}
	list.Items = make([]corev1.ConfigMap, len(objects))
	for i, obj := range objects {
		list.Items[i] = *obj
		list.Items[i].TypeMeta = metav1.TypeMeta{} // list items carry no kind, as from kube-apiserver
	}
	if query.Get("continue") == "" {
		c.stats.lists.Add(1)
	} else {
		c.stats.listPages.Add(1)
	}
	cd.writeObject(w, http.StatusOK, list)
	c.stats.fetchBytes.Add(w.written)
}
