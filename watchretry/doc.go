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
// byte. 410 Expired and every error the policy does not absorb are
// delivered as the server sent them, and the stream then ends.
//
// The stream is one small state machine; see stream.go.
package watchretry
