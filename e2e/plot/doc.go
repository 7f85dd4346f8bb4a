// Command plot draws the e2e soak's samples (TestSoak, make soak) as a PNG: one panel per
// series (resident memory and live Go heap, goroutines, file descriptors, sockets and
// connections through the fault proxy) over the run.
//
//	go run . -in ../../.apiserver/soak.json -out soak.png
//
// With -fleet-ha it draws TestFleetHA's JSON instead (make fleet-ha): per apiserver count and
// pace, the requests per second through the balancer and the apiservers' CPU over the rolling
// upgrade, stock beside kretry.
//
//	go run . -fleet-ha -in ../../docs/fleet-ha.json -out ../../docs/fleet-ha.png
//
// It is a module of its own so that gonum/plot and its fonts stay out of kretry's go.mod;
// TestSoak runs it with go run when KRETRY_SOAK_PLOT names the PNG.
package main
