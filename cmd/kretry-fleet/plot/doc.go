// Command plot draws kretry-fleet's request rates as a PNG: one panel per
// scenario (restart, lbdrop), requests per second arriving at the server
// over time from the fault, one line per kind of client.
//
//	go run . -in fleet.json -out ../../../docs/fleet.png
//
// It is a module of its own so that gonum/plot and its fonts stay out of
// kretry's go.mod; kretry-fleet -plot runs it with go run.
package main
