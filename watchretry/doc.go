// Package watchretry owns watch streams and their resumption.
//
// For every WATCH request it is given, it opens the watch with retries (as
// package policy decides) and hands the caller a response whose Body is a
// resuming stream: when the connection breaks, the server closes early, or
// the server sends a 429 or 5xx ERROR event, the stream waits as the policy
// says, reopens the watch at the last resourceVersion the caller received,
// and splices the new stream onto the old one. The caller (client-go's
// watch decoder, an informer, a raw watcher) sees one unbroken stream.
//
// Only whole frames reach the caller: a frame torn by a break is dropped and
// read again after the resume. Everything else reaches the caller byte for
// byte, a frame's separator with it or on the very next Read. An ERROR event
// the policy does not absorb (410 Expired, any 4xx, and the last ERROR 5xx
// once a server answering the watch has sent them for a whole window) is
// delivered as the server sent it, and the stream then ends. A resume that
// gives up (its window spent on failures to reopen, 401/403, another
// non-410 answer, another content type, or the caller's timeoutSeconds)
// ends the stream as a clean close after the last whole frame, as the break
// would have without kretry, so client-go re-watches instead of relisting;
// a resume answered 410 is delivered as an ERROR event in the stream's own
// encoding, unless it answered a resume after a lost connection: behind a
// load balancer that may be a freshly restarted apiserver whose cache
// starts past the resume point, and the resume is first retried on a new
// connection, a few times within a few seconds.
//
// The caller's timeoutSeconds bounds every request sent for the watch:
// each attempt asks for what remains of it, one still unanswered at its end
// is cancelled, and one unanswered for 20 s is a failure like a refused
// connection.
//
// Most users reach this package through package transport, which sends it
// exactly the WATCH requests. New is for callers that route requests
// themselves: every request it is given must be a WATCH.
//
// The stream is one state machine: machine.go holds its states, events and
// next(machine, event), the one transition function, free of I/O; stream.go
// does the I/O.
package watchretry
