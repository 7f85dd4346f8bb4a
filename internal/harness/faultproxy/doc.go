// Package faultproxy is a loopback TCP proxy that injects connection faults between a client
// and one or more backends (kube-apiservers in the e2e suite).
//
// It only copies bytes, so TLS passes through untouched: the client still verifies the
// backend's certificate. Faults are decided per connection when it is accepted, from a [Rule]:
//   - cut after N bytes of the response direction (backend to client), exactly;
//   - cut after a random number of response bytes, or after a random time (a rate of cuts per
//     minute), both drawn from a seeded random source in accept order;
//   - stall: stop forwarding for a while after N response bytes, or on demand with [Proxy.Stall];
//   - refuse new connections ([Proxy.Refuse] closes the listener: clients get ECONNREFUSED);
//   - route each new connection to the first backend that accepts it (failover), or round-robin,
//     with backends marked down by [Proxy.SetDown].
//
// A cut closes both sides; with Rule.Reset the client side gets an RST instead of a FIN.
package faultproxy
