package main

import (
	"bytes"
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/kretry/kretry/internal/harness/apiserver"
	"github.com/kretry/kretry/internal/harness/fixture"
)

// exactScenarios record the LISTs a resumed LIST body asks for: the same list again at the
// exact resourceVersion its first answer carried, after a write, next to that first answer.
// Recording fails if the two are not byte-identical, which is what a resume relies on.
var exactScenarios = []scenario{
	{"list-exact", "Paged LIST (limit=3) of 7 ConfigMaps, JSON, each page asked for twice as a resumed body asks for it: page 1 again at resourceVersion=<its RV>&resourceVersionMatch=Exact with its limit, after a write; pages 2 and 3 again with their continue tokens. Each second answer is byte-identical to the first.",
		listExact(JSON)},
	{"list-exact-protobuf", "Same as list-exact with client-go's default Accept (protobuf).",
		listExact(Protobuf)},
	{"list-rv0-exact", "LIST at resourceVersion=0&limit=500 of 7 ConfigMaps, JSON (served whole from the watch cache: no continue), then, after a write, the same list at resourceVersion=<its RV>&resourceVersionMatch=Exact without the limit it ignored: byte-identical.",
		listRV0Exact},
}

func init() {
	// Before the restart scenario, with the other LISTs.
	for i, s := range scenarios {
		if s.name == "watch-expired-after-restart" {
			scenarios = append(scenarios[:i], append(exactScenarios, scenarios[i:]...)...)
			return
		}
	}
	scenarios = append(scenarios, exactScenarios...)
}

// writes names the ConfigMaps twice writes.
var writes int

// twice makes a LIST, writes a ConfigMap, makes the LIST again with again's options, and
// checks the two bodies are the same bytes. It returns the first answer's list metadata.
func twice(ctx context.Context, e *env, cs *kubernetes.Clientset, ns string, opts metav1.ListOptions,
	again func(metav1.ListMeta) metav1.ListOptions) (metav1.ListMeta, error) {
	first := rawList(ctx, cs, ns, opts)
	body, err := first.Raw()
	if err != nil {
		return metav1.ListMeta{}, err
	}
	obj, err := first.Get()
	if err != nil {
		return metav1.ListMeta{}, err
	}
	meta, err := listMetaOf(obj)
	if err != nil {
		return metav1.ListMeta{}, err
	}
	writes++
	if _, err := e.admin(serverDefault).CoreV1().ConfigMaps(ns).Create(ctx,
		configMap(fmt.Sprintf("written-%d", writes), "v1"), metav1.CreateOptions{}); err != nil {
		return metav1.ListMeta{}, err
	}
	second, err := rawList(ctx, cs, ns, again(meta)).Raw()
	if err != nil {
		return metav1.ListMeta{}, err
	}
	if !bytes.Equal(body, second) {
		return metav1.ListMeta{}, fmt.Errorf("LIST %+v asked again is not byte-identical (%d and %d bytes)", opts, len(body), len(second))
	}
	return meta, nil
}

// seededList is a fresh namespace of 7 ConfigMaps on the default server, and a recorded
// clientset asking for encoding.
func (e *env) seededList(ctx context.Context, name, encoding string) (string, *kubernetes.Clientset, *fixture.Recorder, error) {
	ns, err := e.namespace(ctx, name)
	if err == nil {
		_, err = e.seed(ctx, serverDefault, ns, "cm", 7)
	}
	rec := &fixture.Recorder{}
	return ns, e.recorded(serverDefault, apiserver.Admin, encoding, rec), rec, err
}

func listExact(encoding string) func(context.Context, *env) (*fixture.File, error) {
	return func(ctx context.Context, e *env) (*fixture.File, error) {
		ns, cs, rec, err := e.seededList(ctx, "list-exact"+suffix(encoding), encoding)
		if err != nil {
			return nil, err
		}
		opts := metav1.ListOptions{Limit: 3}
		for page := 1; ; page++ {
			meta, err := twice(ctx, e, cs, ns, opts, func(meta metav1.ListMeta) metav1.ListOptions {
				if opts.Continue != "" {
					return opts
				}
				return metav1.ListOptions{Limit: opts.Limit, ResourceVersion: meta.ResourceVersion,
					ResourceVersionMatch: metav1.ResourceVersionMatchExact}
			})
			if err != nil {
				return nil, fmt.Errorf("page %d: %w", page, err)
			}
			if meta.Continue == "" {
				break
			}
			opts.Continue = meta.Continue
		}
		return &fixture.File{Exchanges: rec.Exchanges()}, nil
	}
}

func listRV0Exact(ctx context.Context, e *env) (*fixture.File, error) {
	ns, cs, rec, err := e.seededList(ctx, "list-rv0-exact", JSON)
	if err != nil {
		return nil, err
	}
	meta, err := twice(ctx, e, cs, ns, metav1.ListOptions{ResourceVersion: "0", Limit: 500}, func(meta metav1.ListMeta) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: meta.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}
	})
	if err != nil {
		return nil, err
	}
	if meta.Continue != "" {
		return nil, fmt.Errorf("resourceVersion=0&limit=500 answered a page (continue %q), want the whole list", meta.Continue)
	}
	return &fixture.File{Exchanges: rec.Exchanges()}, nil
}

// listMetaOf is a decoded list's metadata.
func listMetaOf(obj runtime.Object) (metav1.ListMeta, error) {
	m, err := apimeta.ListAccessor(obj)
	if err != nil {
		return metav1.ListMeta{}, err
	}
	return metav1.ListMeta{ResourceVersion: m.GetResourceVersion(), Continue: m.GetContinue()}, nil
}
