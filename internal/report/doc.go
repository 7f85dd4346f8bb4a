// Package report holds what kretry's measuring commands, kretry-demo and
// kretry-fleet, share in reporting their runs: byte counts for people, and
// drawing a figure with a plot module of their own, which lives in its own
// go.mod so that gonum/plot stays out of kretry's.
package report
