// Package listretry owns LIST bodies. A LIST is retried before its answer
// arrives (429, 5xx, connection failures, as package policy decides) and
// also while its body is read: the body is read into a bounded buffer
// before the response is handed over, so a body broken mid-read is simply
// asked for again with the identical query (same resourceVersion, limit
// and continue token); any read error after a 200 counts, except the
// caller's own context ending. At most the bound is ever held: a body that
// declares a larger Content-Length is not buffered at all, and one of
// unknown length that passes the bound streams on from there unprotected.
//
// Most users reach this package through package transport, which sends it
// the LIST requests (and single-object GETs with Config.RetryGets). New is
// for callers that route requests themselves: every request it is given
// must be an idempotent GET.
//
// An expired continue token (410) is the caller's: client-go's pager falls
// back to a full list on its own.
package listretry
