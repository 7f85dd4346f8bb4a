// Package target gives the examples something to talk to: the cluster of a kubeconfig
// when one is named, else an in-process demo server that keeps changing its ConfigMaps
// and injecting faults, so that an example shows kretry at work with no cluster at all.
//
// Main is the main function the examples share: flags, an interruptible context, the
// target, and an error exit. Package targettest holds what their tests share.
package target
