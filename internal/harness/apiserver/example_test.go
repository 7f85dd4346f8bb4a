package apiserver_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kretry/kretry/internal/harness/apiserver"
)

// Start a cluster of two kube-apiservers, one in request-limit mode, and list as the limited user.
// (Not run by `go test`: it needs the binaries from `make apiserver`.)
func Example() {
	c, err := apiserver.Start(context.Background(), apiserver.Options{
		Servers: []apiserver.ServerOptions{{}, {ExtraFlags: apiserver.RequestLimitFlags}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	cs := kubernetes.NewForConfigOrDie(c.ConfigFor(c.Server(1).Addr(), apiserver.Limited))
	list, err := cs.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	fmt.Println(len(list.Items), err)
}
