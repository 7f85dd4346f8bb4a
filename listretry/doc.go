// Package listretry owns LIST bodies. A LIST is retried before its answer
// arrives (429, 5xx, connection failures, as package policy decides) and
// also while its body is read.
//
// A JSON or protobuf list of a built-in kind is streamed: the head of the
// body is held back only until the list's own metadata.resourceVersion is
// known (JSON: the "metadata" object, up to the "items" key that follows
// it; protobuf: the ListMeta, which comes first), then bytes reach the
// caller as they arrive, with a running CRC-32 and a count of what was
// delivered. A body that breaks mid-read is asked for again at that exact
// resourceVersion (resourceVersion=RV&resourceVersionMatch=Exact, every
// other parameter kept; a page asked for with a continue token is asked
// for again with that token; a limit that produced no continue is
// dropped), the new answer is read past the delivered bytes while checking
// they hash the same, and the body goes on from there. kube-apiserver
// serves the same list at the same resourceVersion byte for byte until it
// is compacted. If it does not (the prefix differs, a 410, another content
// type, the window or the caller's deadline spent), the caller gets the
// break as the very error it was, after exactly the bytes delivered:
// never a spliced body. Such a resume does not spend the retry budget (it
// replaces the relist client-go would make) but is bounded by the
// InternalErrorWindow; new bytes past the resume point end a failure run.
//
// A body that is not the same when asked for again, or names its
// resourceVersion too late to stream, is held whole before the response
// is handed over, up to Config.BufferSize, and asked for again with the
// identical query when it breaks: CBOR (map order is shuffled per
// response), as=Table (cells depend on the time), custom resources in
// JSON (keys sorted, metadata last), a body whose Content-Encoding the
// caller decodes itself, and every body with Config.Hold (single-object
// GETs). A held body that declares a larger Content-Length is not buffered
// at all, and one of unknown length that passes the bound streams on from
// there unprotected. Any read error after a 200 is a break, except the
// caller's own context ending.
//
// Most users reach this package through package transport, which sends it
// the LIST requests (and single-object GETs with Config.RetryGets). New is
// for callers that route requests themselves: every request it is given
// must be an idempotent GET.
//
// An expired continue token (410) is the caller's: client-go's pager falls
// back to a full list on its own.
package listretry
