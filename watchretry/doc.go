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
// byte. An ERROR event the policy does not absorb (410 Expired, any 4xx) is
// delivered as the server sent it, and the stream then ends. A resume that
// gives up (its window spent, 401/403, another non-410 answer, another
// content type, or a wait that would pass the caller's timeoutSeconds) ends
// the stream as a clean close after the last whole frame, as the break
// would have without kretry, so client-go re-watches instead of relisting;
// a resume answered 410 is delivered as an ERROR event in the stream's own
// encoding.
//
// Most users reach this package through package transport, which sends it
// exactly the WATCH requests. New is for callers that route requests
// themselves: every request it is given must be a WATCH.
//
// The stream is one small state machine; see stream.go.
package watchretry
