package demoserver

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// watchOptions are the query parameters a watch honours.
type watchOptions struct {
	resourceVersion   string
	bookmarks         bool
	sendInitialEvents *bool
	timeout           time.Duration // 0: none
}

func parseWatchOptions(query url.Values) (watchOptions, error) {
	opts := watchOptions{
		resourceVersion: query.Get("resourceVersion"),
		bookmarks:       query.Get("allowWatchBookmarks") == "true",
	}
	if query.Get("labelSelector") != "" || query.Get("fieldSelector") != "" {
		return opts, errors.New("the demo server does not support selectors")
	}
	if v := query.Get("sendInitialEvents"); v != "" {
		send, err := strconv.ParseBool(v)
		if err != nil {
			return opts, fmt.Errorf("invalid sendInitialEvents %q", v)
		}
		opts.sendInitialEvents = &send
	}
	match := query.Get("resourceVersionMatch")
	switch {
	case opts.sendInitialEvents == nil && match != "":
		return opts, errors.New("resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
	case opts.sendInitialEvents != nil && match != string(metav1.ResourceVersionMatchNotOlderThan):
		return opts, fmt.Errorf("sendInitialEvents requires resourceVersionMatch=%s", metav1.ResourceVersionMatchNotOlderThan)
	case opts.sendInitialEvents != nil && *opts.sendInitialEvents && !opts.bookmarks:
		return opts, errors.New("sendInitialEvents requires allowWatchBookmarks=true")
	}
	if v := query.Get("timeoutSeconds"); v != "" {
		seconds, err := strconv.ParseInt(v, 10, 64)
		if err != nil || seconds < 0 {
			return opts, fmt.Errorf("invalid timeoutSeconds %q", v)
		}
		opts.timeout = time.Duration(seconds) * time.Second
	}
	return opts, nil
}

// watchStream is one served watch: where it stands in the history and how it writes.
type watchStream struct {
	server *Server
	client *client
	codec  codec
	w      *countingWriter
	flush  func()
	// dropped is closed by the next Rollout; dropPending notes one that came while the
	// stream could not be cut yet (initial state not sent).
	dropped     <-chan struct{}
	dropPending bool
	cursor      uint64 // RV of the last change sent (or the snapshot sent)
	// initialDone: the stream is past its initial state (or never had one); only then may
	// mid-stream faults hit it, because nobody can resume a watch without a resume point.
	initialDone bool
}

// errStreamOver ends a stream on purpose (fault, timeout, ERROR event); not a failure.
var errStreamOver = errors.New("stream over")

func (s *Server) serveWatch(w *countingWriter, r *http.Request, cd codec, c *client, query url.Values) {
	opts, err := parseWatchOptions(query)
	if err != nil {
		writeStatus(w, cd, apierrors.NewBadRequest(err.Error()))
		return
	}
	unavailable, dropped := s.rollingOut(c, time.Now())
	if unavailable {
		c.stats.rejected.Add(1)
		rejectEstablishment(w, cd, Unavailable)
		return
	}
	if kind, started := c.schedule.establishment(time.Now()); kind != 0 {
		if started {
			s.recordFault(c, kind)
		}
		c.stats.rejected.Add(1)
		rejectEstablishment(w, cd, kind)
		return
	}

	from, floor := s.floor(c)
	// "" and "0" watch from now, after the current state; a specific RV from that RV.
	specific := opts.resourceVersion != "" && opts.resourceVersion != "0"
	sendInitial := !specific
	if opts.sendInitialEvents != nil {
		sendInitial = *opts.sendInitialEvents
	}
	if specific {
		if from, err = strconv.ParseUint(opts.resourceVersion, 10, 64); err != nil {
			writeStatus(w, cd, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", opts.resourceVersion)))
			return
		}
	}

	st := &watchStream{server: s, client: c, codec: cd, w: w, flush: w.Flush, cursor: from, dropped: dropped}
	w.Header().Set("Content-Type", cd.watchContentType())
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	st.flush()
	c.stats.watches.Add(1)
	c.watching.Add(1)
	defer c.watching.Add(-1)

	// A watch from a specific RV older than the history gets 200, then ERROR 410, then the
	// end: kube-apiserver's "too old resource version". Watch-lists serve the current state
	// instead (NotOlderThan), whatever RV they name.
	if !sendInitial && from < floor {
		if c.expiredFrom.Swap(from+1) == from+1 {
			c.stats.expiredRepeats.Add(1)
		} else {
			c.stats.expired.Add(1)
		}
		expired := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, floor)).Status()
		_ = st.send(watch.Error, &expired, false)
		return
	}

	var deadline <-chan time.Time
	if opts.timeout > 0 {
		timer := time.NewTimer(opts.timeout)
		defer timer.Stop()
		deadline = timer.C
	}
	if sendInitial {
		if opts.sendInitialEvents != nil && *opts.sendInitialEvents {
			c.stats.watchLists.Add(1)
		}
		if err := st.sendInitialState(opts.sendInitialEvents != nil); err != nil {
			return
		}
		if opts.sendInitialEvents != nil && *opts.sendInitialEvents {
			c.stats.fetchBytes.Add(w.written)
		}
	} else {
		st.initialDone = true
	}

	var bookmarks <-chan time.Time
	if opts.bookmarks {
		ticker := time.NewTicker(s.cfg.BookmarkInterval)
		defer ticker.Stop()
		bookmarks = ticker.C
	}
	for {
		changes, current, changed := s.store.since(st.cursor, 100)
		for _, ch := range changes {
			frame, err := ch.frame(cd)
			if err != nil {
				return
			}
			if err := st.sendFrame(ch.kind, frame, true); err != nil {
				return
			}
			st.cursor = ch.rv
			st.initialDone = true
		}
		if len(changes) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-bookmarks:
			bookmark := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatUint(current, 10)}}
			if err := st.send(watch.Bookmark, bookmark, true); err != nil {
				return
			}
			st.cursor = current
			st.initialDone = true
		case <-st.dropped:
			if st.initialDone {
				cut()
			}
			st.dropped, st.dropPending = nil, true
		case <-deadline:
			return
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// sendInitialState sends the current state as ADDED events; for a watch-list it ends with
// the BOOKMARK annotated k8s.io/initial-events-end.
func (st *watchStream) sendInitialState(watchList bool) error {
	current, _ := st.server.store.versions()
	for _, obj := range st.server.store.snapshot(current) {
		if err := st.send(watch.Added, obj, false); err != nil {
			return err
		}
	}
	st.cursor = current
	if !watchList {
		return nil // kube-apiserver marks nothing; the first other event ends the state
	}
	bookmark := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: strconv.FormatUint(current, 10),
		Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
	}}
	if err := st.send(watch.Bookmark, bookmark, false); err != nil {
		return err
	}
	st.initialDone = true
	return nil
}

// send encodes one event and sends it as sendFrame does.
func (st *watchStream) send(eventType watch.EventType, obj runtime.Object, faultable bool) error {
	frame, err := st.codec.frame(eventType, obj)
	if err != nil {
		return err
	}
	return st.sendFrame(eventType, frame, faultable)
}

// sendFrame writes one encoded event and flushes it. With faultable set and the stream
// past its initial state, the client's fault schedule may hit it instead; then the stream
// ends (errStreamOver) or the connection is cut (a panic with http.ErrAbortHandler).
func (st *watchStream) sendFrame(eventType watch.EventType, frame []byte, faultable bool) error {
	if faultable && st.initialDone {
		select {
		case <-st.dropped:
			cut()
		default:
			if st.dropPending {
				cut()
			}
		}
		if kind := st.client.schedule.midStream(time.Now()); kind != 0 {
			st.server.recordFault(st.client, kind)
			return st.fault(kind, frame)
		}
	}
	if _, err := st.w.Write(frame); err != nil {
		return err
	}
	st.flush()
	switch eventType {
	case watch.Bookmark:
		st.client.stats.bookmarks.Add(1)
	case watch.Error:
		return errStreamOver
	default:
		st.client.stats.events.Add(1)
	}
	st.client.schedule.progress(time.Now())
	return nil
}

// fault breaks the stream the way kind says, instead of sending frame.
func (st *watchStream) fault(kind FaultKind, frame []byte) error {
	switch kind {
	case TornFrame, Unavailable:
		_, _ = st.w.Write(frame[:max(1, len(frame)/2)])
		st.flush()
		cut()
	case InternalErrorEvent:
		status := apierrors.NewInternalError(errors.New("etcdserver: leader changed")).Status()
		return st.send(watch.Error, &status, false)
	case Compaction:
		st.client.floor.Store(st.server.store.advancePast(st.cursor))
	}
	return errStreamOver // EarlyClose, the 429s (answered at the next establishment), Compaction, ThrottleBurst
}

// cut drops the connection: net/http closes it without the chunked terminator, so the
// client reads an unexpected EOF (after a cut frame, if one was written).
func cut() { panic(http.ErrAbortHandler) }

// rejectEstablishment answers a watch request the way the fault says.
func rejectEstablishment(w http.ResponseWriter, cd codec, kind FaultKind) {
	switch kind {
	case Unavailable:
		writeStatus(w, cd, apierrors.NewServiceUnavailable("the server is shutting down: apiserver is terminating"))
	case TooManyRequests, ThrottleBurst:
		w.Header().Set("Retry-After", "1")
		writeStatus(w, cd, apierrors.NewTooManyRequests("too many requests, please try again later", 1))
	case TooManyRequestsNoRetryAfter:
		writeStatus(w, cd, apierrors.NewTooManyRequests("too many requests, please try again later", 0))
	case TooManyRequestsPlain:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
	}
}
