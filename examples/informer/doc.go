// Command informer runs a stock client-go SharedInformerFactory through kretry: one line,
// cfg.Wrap(transport.Wrapper(transport.Config{})), and the informer's watches are retried
// and resumed inside the transport, so it lists once and then only after a 410 Expired.
//
//	go run ./examples/informer                    # against an in-process demo server
//	go run ./examples/informer --kubeconfig ~/.kube/config --namespace kube-system
//
// It prints the cache size and resourceVersion once a second until interrupted (or
// --duration ends).
package main
