// Package reflector keeps a cache.Store in step with a collection on the API server, like
// the part of client-go's cache.Reflector that matters, and nothing more.
//
// It is thin because kretry's transport (see the transport package) absorbs every
// transient failure of a LIST or a WATCH below it and resumes broken watch streams from
// their last resourceVersion. What is left for a reflector is:
//
//   - fetch the initial state: a LIST with client-go's pager (500 per page, one full LIST
//     when a continue token expires; the first one at RV "0", served from the watch cache),
//     or, with Config.WatchList, a streaming list ended by the k8s.io/initial-events-end
//     bookmark (a LIST instead: for good when the server refuses watch-lists, for that one
//     fetch when a watch-list misses otherwise, e.g. reaches its timeout before that
//     bookmark); then Replace the store with it;
//   - WATCH from there with bookmarks and a random 5–10 minute timeout, apply every event to
//     the store, move the resourceVersion (RV) with every event and bookmark, and re-watch
//     from the last RV when the watch ends at its timeout;
//   - on 410 Gone/Expired (an ERROR event, or the answer to a WATCH or a LIST), relist: at
//     the last RV first (resourceVersionMatch=NotOlderThan, said out loud so that paging
//     can stay on), at "" (most recent) if that is gone too. 410s in a row back off (1s
//     doubling to Config.MaxRelistBackoff, jittered); only a watch that delivered events
//     (ADDED, MODIFIED, DELETED; bookmarks do not count) resets the count, so a 410 storm
//     costs a bounded LIST rate;
//   - every Config.ResyncPeriod, counted from the end of the last successful fetch, call
//     store.Resync (no API request).
//
// Without kretry's transport it still works: a watch that breaks before its timeout, or a
// failed WATCH or LIST, is retried after a short jittered backoff (800ms doubling to 30s),
// the watch from its last RV, never by relisting. The first such failure is logged once,
// since it means the transport is not installed (or gave up).
//
// The life of a Reflector is one small state machine (state.go): a state says what to do
// next (fetch or watch) and after what delay; each step reports an outcome; one transition
// function, policy.next, turns the two into the next state.
package reflector
