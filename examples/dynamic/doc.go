// Command dynamic keeps a map of ConfigMaps up to date with the dynamic client (the client
// behind kubectl, Helm and CRD controllers, which speaks JSON): a paged LIST, then a watch
// from the list's resourceVersion. Its rest.Config is wrapped with kretry, so the LIST pages
// are retried and the watch is resumed inside the transport; the loop below only has to
// handle a 410 Expired, by listing again.
//
//	go run ./examples/dynamic                     # against an in-process demo server
//	go run ./examples/dynamic --kubeconfig ~/.kube/config --namespace kube-system
package main
