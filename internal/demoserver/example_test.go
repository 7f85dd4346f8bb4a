package demoserver_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kretry/kretry/internal/demoserver"
)

// A demo server is an API server for client-go: start it, take its rest.Config, and use
// any client. Here the writer is off so that the output is fixed; the demo runs it with a
// writer and a fault rate.
func Example() {
	server := demoserver.Start(demoserver.Config{Objects: 3, WriteInterval: -1})
	defer server.Close()

	clientset := kubernetes.NewForConfigOrDie(server.RESTConfig("example"))
	list, err := clientset.CoreV1().ConfigMaps(server.Namespace()).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	for _, cm := range list.Items {
		fmt.Println(cm.Namespace, cm.Name, cm.ResourceVersion)
	}
	fmt.Println("list at", list.ResourceVersion, "=", server.State().ResourceVersion)

	st := server.Stats("example")
	fmt.Println("requests:", st.Requests, "initial-state fetches:", st.InitialStateFetches())
	// Output:
	// demo cm-00000 2
	// demo cm-00001 3
	// demo cm-00002 4
	// list at 4 = 4
	// requests: 1 initial-state fetches: 1
}
