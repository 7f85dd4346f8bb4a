// Package observe is what kretry's outside tests (transport/contract and
// the transport/outside_* rig) put around kretry to see what it does: a
// Recorder, given to kretry as transport.Config.Observer, keeps every event
// kretry reports; an InFlight, wrapped below kretry, counts its attempts
// still waiting for their answers, which a virtual clock must know before
// it moves time on.
package observe
