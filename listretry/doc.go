// Package listretry owns LIST bodies. A LIST is retried before its answer
// arrives (429, 5xx, connection failures, as package policy decides) and
// also while its body is read: the body is read into a bounded buffer
// before the response is handed over, so a body broken mid-read is simply
// asked for again with the identical query (same resourceVersion, limit
// and continue token). Past the bound the rest of the body streams through
// without that protection.
//
// An expired continue token (410) is the caller's: client-go's pager falls
// back to a full list on its own.
package listretry
