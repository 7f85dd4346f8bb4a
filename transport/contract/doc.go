// Package contract holds tests of package transport written from outside,
// against the written contract only (the project's DESIGN, docs/behaviour.md)
// and without reading the implementation: a real kubernetes.Clientset, or a
// raw http.Client where the contract speaks of bytes, through kretry to
// loopback servers whose every byte the tests write (HTTP/1.1 framing,
// cuts, HTTP/2), on a virtual clock. It has no code of its own.
package contract
