package reflector

// The two optional interfaces below are the ones client-go's own Reflector looks for. They are
// declared here, with the same method sets, so that the reflector builds on every client-go
// minor kretry supports: cache.ReflectorBookmarkStore appeared in v0.36 and
// watchlist.DoesClientNotSupportWatchListSemantics in v0.35. A store or ListerWatcher written
// against those newer names satisfies these as well, since Go interfaces match by method set.

// bookmarkStore is a store that wants to hear of bookmarks (cache.ReflectorBookmarkStore).
type bookmarkStore interface {
	Bookmark(resourceVersion string) error
}

// watchListUnsupported is a ListerWatcher that can say it does not support the streaming list
// (client-go's fake clientsets do, from v0.35 on).
type watchListUnsupported interface {
	IsWatchListSemanticsUnSupported() bool
}

// supportsWatchList reports whether lw may be asked for a streaming list: it may unless it
// says otherwise, as client-go's watchlist.DoesClientNotSupportWatchListSemantics decides.
func supportsWatchList(lw any) bool {
	u, ok := lw.(watchListUnsupported)
	return !ok || !u.IsWatchListSemanticsUnSupported()
}
