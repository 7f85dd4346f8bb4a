// Command reflector keeps a cache.Store of ConfigMaps in step with kretry's thin reflector,
// on a client whose rest.Config is wrapped with kretry's transport. The transport absorbs
// every transient failure, so all the reflector does is list, watch, and relist after a
// 410 Expired.
//
//	go run ./examples/reflector                   # against an in-process demo server
//	go run ./examples/reflector --kubeconfig ~/.kube/config --namespace kube-system
package main
