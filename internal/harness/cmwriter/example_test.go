package cmwriter_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kretry/kretry/internal/harness/cmwriter"
)

// The writer against client-go's fake clientset: a few ticks create objects.
func Example() {
	cms := fake.NewClientset().CoreV1().ConfigMaps("demo")
	w := cmwriter.Start(cms, 1, time.Millisecond)
	for {
		list, _ := cms.List(context.Background(), metav1.ListOptions{})
		if len(list.Items) >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	w.Stop()
	writes, fails, _ := w.Stats()
	fmt.Println(writes >= 3, fails)
	// Output: true 0
}
