package reflector_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kretry/kretry/reflector"
)

// A Reflector keeps a cache.Store in step with what a ListerWatcher lists and watches. In
// real code the ListerWatcher comes from cache.NewListWatchFromClient, on a client whose
// rest.Config is wrapped with kretry's transport; here it is a fake.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	configMap := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, ResourceVersion: rv}}
	}
	events := watch.NewFake()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			fmt.Printf("LIST resourceVersion=%q limit=%d\n", opts.ResourceVersion, opts.Limit)
			return &corev1.ConfigMapList{
				ListMeta: metav1.ListMeta{ResourceVersion: "10"},
				Items:    []corev1.ConfigMap{*configMap("a", "9"), *configMap("b", "10")},
			}, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			fmt.Printf("WATCH resourceVersion=%q bookmarks=%v\n", opts.ResourceVersion, opts.AllowWatchBookmarks)
			go func() {
				events.Modify(configMap("a", "11"))
				events.Delete(configMap("b", "12"))
				events.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "13"}})
				cancel() // the reflector has taken the last event: stop it
			}()
			return events, nil
		},
	}

	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	r := reflector.New(lw, &corev1.ConfigMap{}, store, reflector.Config{})
	err := r.Run(ctx)

	fmt.Println("Run:", err)
	fmt.Println("keys:", store.ListKeys())
	a, _, _ := store.GetByKey("demo/a")
	fmt.Println("demo/a at", a.(*corev1.ConfigMap).ResourceVersion)
	fmt.Println("synced to", r.LastSyncResourceVersion())
	fmt.Printf("%+v\n", r.Stats())
	// Output:
	// LIST resourceVersion="0" limit=500
	// WATCH resourceVersion="10" bookmarks=true
	// Run: context canceled
	// keys: [demo/a]
	// demo/a at 11
	// synced to 13
	// {Lists:1 Watches:1 Relists410:0 Resyncs:0 TransientFailures:0}
}
