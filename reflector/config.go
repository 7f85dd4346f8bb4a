package reflector

import (
	"math/rand/v2"
	"time"

	"k8s.io/utils/clock"
)

const (
	defaultPageSize         = 500
	defaultMinWatchTimeout  = 5 * time.Minute
	defaultMaxRelistBackoff = 60 * time.Second

	// relistBackoffBase is the wait before the second relist in a row caused by a 410; it
	// doubles with each further one up to Config.MaxRelistBackoff.
	relistBackoffBase = time.Second
	// Waits after a failure the kretry transport would have absorbed (client-go's numbers).
	transientBackoffBase = 800 * time.Millisecond
	transientBackoffMax  = 30 * time.Second
)

// Config tunes a Reflector. The zero value is the recommended setup.
type Config struct {
	// ResyncPeriod is how often store.Resync is called (no API request is made). The
	// schedule restarts at the end of every successful initial-state fetch, so a relist
	// postpones the next resync. 0 means never.
	ResyncPeriod time.Duration

	// PageSize is the LIST page size (the limit parameter). 0 means 500; a negative value
	// turns paging off.
	PageSize int64

	// MinWatchTimeout bounds each WATCH: its timeoutSeconds is drawn at random in
	// [MinWatchTimeout, 2*MinWatchTimeout) so that reflectors do not re-watch in step.
	// 0 means 5 minutes.
	MinWatchTimeout time.Duration

	// WatchList fetches the initial state with a streaming list (a WATCH with
	// sendInitialEvents=true, ended by the k8s.io/initial-events-end bookmark) instead of a
	// LIST. The reflector uses LIST for good when the ListerWatcher does not support
	// watch-lists or the server refuses one (400, 405 or 422). A watch-list that misses for
	// another reason (its timeout reached before the initial-events-end bookmark, or an
	// answer such as 401 or 403) is replaced by a LIST that once, as client-go does, and
	// the next fetch tries a watch-list again.
	WatchList bool

	// MaxRelistBackoff caps the wait between relists when 410s repeat without a watch
	// delivering an ADDED, MODIFIED or DELETED event in between (bookmarks do not count).
	// 0 means 60 seconds.
	MaxRelistBackoff time.Duration

	// Clock measures watch durations and times waits and resyncs. It is client-go's clock
	// abstraction, k8s.io/utils/clock; nil means clock.RealClock, and tests use
	// k8s.io/utils/clock/testing.FakeClock.
	Clock clock.WithTicker

	// Rand returns a number in [0, 1) for jitter and watch timeouts. nil means
	// math/rand/v2.Float64.
	Rand func() float64
}

// withDefaults returns cfg with every zero field set to its recommended value.
func (cfg Config) withDefaults() Config {
	switch {
	case cfg.PageSize == 0:
		cfg.PageSize = defaultPageSize
	case cfg.PageSize < 0:
		cfg.PageSize = 0 // the pager's way of saying "one unpaged LIST"
	}
	if cfg.MinWatchTimeout <= 0 {
		cfg.MinWatchTimeout = defaultMinWatchTimeout
	}
	if cfg.MaxRelistBackoff <= 0 {
		cfg.MaxRelistBackoff = defaultMaxRelistBackoff
	}
	if cfg.ResyncPeriod < 0 {
		cfg.ResyncPeriod = 0
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return cfg
}

// watchTimeoutSeconds draws a WATCH's timeoutSeconds in [MinWatchTimeout, 2*MinWatchTimeout).
func (cfg Config) watchTimeoutSeconds() int64 {
	minSeconds := cfg.MinWatchTimeout.Seconds()
	return max(1, int64(minSeconds+cfg.Rand()*minSeconds))
}
