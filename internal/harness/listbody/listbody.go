// Package listbody encodes ConfigMap lists as kube-apiserver encodes them, in JSON or
// protobuf, for kretry's LIST tests: the same page is the same bytes every time.
package listbody

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// Protobuf is kube-apiserver's protobuf media type; any other content type encodes JSON.
const Protobuf = "application/vnd.kubernetes.protobuf"

// ResourceVersion is the list's resourceVersion.
const ResourceVersion = "42"

// ConfigMaps is the page [start, end) of a ConfigMapList in namespace "ns" at
// ResourceVersion, with continue token next ("" for none). Item i is named cm-%05d and
// carries 50 to 89 bytes of data.
func ConfigMaps(start, end int, next, contentType string) []byte {
	list := &corev1.ConfigMapList{
		TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: ResourceVersion, Continue: next},
	}
	for i := start; i < end; i++ {
		list.Items = append(list.Items, corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: "ns", ResourceVersion: strconv.Itoa(10 + i)},
			Data:       map[string]string{"payload": strings.Repeat("x", 50+i%40)},
		})
	}
	var buf bytes.Buffer
	var err error
	if contentType == Protobuf {
		err = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &buf)
	} else {
		err = scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion).Encode(list, &buf)
	}
	if err != nil {
		panic(err) // a ConfigMapList always encodes
	}
	return buf.Bytes()
}
