package listbody_test

import (
	"fmt"

	"github.com/kretry/kretry/internal/harness/listbody"
)

func Example() {
	fmt.Println(string(listbody.ConfigMaps(0, 1, "c1", "application/json")))
	// Output:
	// {"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"c1"},"items":[{"metadata":{"name":"cm-00000","namespace":"ns","resourceVersion":"10"},"data":{"payload":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}]}
}
