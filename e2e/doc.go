// Package e2e holds the end-to-end suite (build tag e2e, package e2e_test): a real
// kube-apiserver v1.37.2 on etcd (internal/harness/apiserver), reached through a loopback fault proxy
// (internal/harness/faultproxy), with a writer changing ConfigMaps, and a stock client-go ConfigMap
// informer run twice per fault type: without kretry, and with
// cfg.Wrap(transport.Wrapper(transport.Config{})). One scenario (raw-watch-cuts) runs raw
// clientset Watches instead, the `kubectl get -w` pattern, stock and kretry side by side from
// the same LIST resourceVersion, checked event by event against an uncut reference watch.
// outage-40s (scenarios_outage_test.go) kills kube-apiserver and restarts it 40 s later on the
// same etcd, longer than kretry's window: kretry must give up without making client-go relist.
// cbor-cuts (cbor_test.go) runs the random cuts on CBOR watch streams (the CBORServingAndStorage
// gate on the server, client-go's CBOR gates on the client). TestProxyClients (proxy_test.go)
// runs kubectl, the Python client and client-node, straight at the apiserver and through
// kretry-proxy.
//
// Two counting RoundTrippers measure each run: one below kretry sees every request on the wire,
// one above it sees what the informer asked for. An "initial-state fetch" is a LIST or a
// sendInitialEvents watch (client-go v0.37 informers start with a streaming list). Every run
// must end with the informer's cache equal to the server's state; kretry runs must also show
// the number of initial-state fetches the fault warrants (one, or two after a 410).
//
// Run it with `make e2e` (builds the binaries first), or:
//
//	KRETRY_E2E=1 go test -tags e2e -race -count=1 -timeout 45m ./e2e/...
//
// TestFleetHA (fleet_ha_test.go) runs N node agents (pod informers by spec.nodeName) through
// a rolling upgrade of two or three kube-apiservers behind HAProxy, measures what each fleet
// costs the control plane, checks kretry's against stock's (fleet_ha_check_test.go) and traces
// each 410 kretry handed over (fleet_ha_trace_test.go) (make fleet-ha; docs/fleet.md).
// KRETRY_FLEETHA_SERVING_KEY=ecdsa-p256 gives the apiservers ECDSA serving certificates instead
// of kubeadm's default RSA-2048, to see what TLS handshakes cost them.
//
// The figures table is logged by TestFigures and written to .apiserver/e2e-figures.txt.
package e2e
