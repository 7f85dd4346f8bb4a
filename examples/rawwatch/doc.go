// Command rawwatch is `kubectl get configmaps -w` on kretry: a LIST, then one
// clientset...Watch from the list's resourceVersion, printing every change. Without kretry
// the result channel just closes on the first torn connection, 503 or InternalError event,
// and a raw watcher has to notice and start over; with it the channel stays open, the
// transport resumes the stream from the last resourceVersion, and no change is lost or
// repeated. Only a 410 Expired (the server no longer has the history) reaches the caller;
// then this example lists and watches again, as kubectl would have to.
//
//	go run ./examples/rawwatch                    # against an in-process demo server
//	go run ./examples/rawwatch --kubeconfig ~/.kube/config --namespace kube-system
package main
