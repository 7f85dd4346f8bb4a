package listbody_test

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kretry/kretry/internal/harness/listbody"
)

// The exact JSON differs between apimachinery minors (v0.33 writes "creationTimestamp":null,
// later ones leave it out), so the example prints what every minor agrees on.
func Example() {
	var list corev1.ConfigMapList
	if err := json.Unmarshal(listbody.ConfigMaps(0, 2, "c1", "application/json"), &list); err != nil {
		panic(err)
	}
	fmt.Println("resourceVersion", list.ResourceVersion, "continue", list.Continue)
	for _, cm := range list.Items {
		fmt.Println(cm.Namespace, cm.Name, cm.ResourceVersion, len(cm.Data["payload"]))
	}
	// Output:
	// resourceVersion 42 continue c1
	// ns cm-00000 10 50
	// ns cm-00001 11 51
}
