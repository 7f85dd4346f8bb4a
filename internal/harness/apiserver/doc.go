// Package apiserver runs a real kube-apiserver v1.37.2 on a real etcd on loopback, for
// recording fixtures and for end-to-end tests.
//
// [Start] launches one etcd (--unsafe-no-fsync, free loopback ports, data in a temporary
// directory) and one or more kube-apiservers against it. Each server has its own serving
// certificate, as kubeadm gives each control-plane node its own, all issued by a CA generated for
// the cluster, so a client that trusts [Cluster.CAData] verifies TLS whichever server (or proxy
// in front of it) it reaches.
// Two users are configured with a static token file: [Admin] (in system:masters, exempt from
// request limits) and [Limited] (not in system:masters, so 429s apply to it).
// [Cluster.Config] hands back a *rest.Config for either.
//
// Each process runs in its own process group and is killed by the process group ID this package
// started, never by name. [Cluster.Close] stops everything; [StartT] registers it with
// t.Cleanup. Children also get SIGKILL when the test binary dies (Pdeathsig) or is interrupted.
//
// The binaries come from `make apiserver` (tools/apiserver/build.sh) and are looked up in
// $KRETRY_APISERVER_BIN or <repo>/.apiserver/bin. Without them [StartT] skips the test, unless
// KRETRY_E2E is set, in which case it fails.
package apiserver
