package watchretry

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/establish"
	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/policy"
)

// TestNext walks every (phase, event) edge of the resuming stream: the
// whole machine in one table. A failure's edges carry the policy's
// decision; next does what it says. Edges the I/O never reports end the
// stream with an internal error; done answers nothing.
func TestNext(t *testing.T) {
	in := func(p phase) machine {
		return machine{phase: p, enc: frame.JSON, point: resumePoint{rv: []byte("10"), known: true}}
	}
	held := func(m machine, then phase) machine { m.held, m.heldThen = []byte("H"), then; return m }
	searching := func(m machine) machine { m.search = &goneSearch{event: []byte("G")}; return m }
	ev := func(k eventKind) event { return event{kind: k} }
	frameEv := func(typ frame.EventType, rv string) event {
		return event{kind: evFrame, raw: []byte("F"), frame: &frame.Event{Type: typ, ResourceVersion: []byte(rv)}}
	}
	errEv := func(code int32, d policy.Decision) event {
		return event{kind: evError, raw: []byte("E"), frame: &frame.Event{Type: frame.Error, Code: code}, decision: d}
	}
	broke := func(reason string, d policy.Decision) event {
		return event{kind: evBroke, err: io.ErrUnexpectedEOF, reason: reason, decision: d}
	}
	gone := func(d policy.Decision) event { return event{kind: evGoneAnswer, raw: []byte("A"), decision: d} }
	opened := func(enc frame.Encoding) event { return event{kind: evOpened, enc: enc} }
	retry := policy.Decision{Action: policy.Retry, Wait: time.Second}
	search := policy.Decision{Action: policy.Retry, NewConnection: true, Until: time.Unix(3, 0)}
	hold := policy.Decision{Action: policy.Hold, Wait: time.Second}
	handOver := policy.Decision{Action: policy.HandOver}
	stopped := func(a policy.Action, s policy.Stop) policy.Decision { return policy.Decision{Action: a, Stop: s} }
	internal := errors.New("internal")

	type want struct {
		phase     phase
		err       error // done's; internal: the impossible edge's error
		deliver   string
		progress  bool
		closeBody bool
		report    reportKind
		reason    string
		searching bool // a search under way after the edge
	}
	tests := []struct {
		name string
		m    machine
		ev   event
		want want
	}{
		// streaming
		{"streaming/frame", in(streaming), frameEv(frame.Modified, "11"), want{phase: streaming, deliver: "F", progress: true}},
		{"streaming/frame: progress ends a search", searching(in(streaming)), frameEv(frame.Modified, "11"), want{phase: streaming, deliver: "F", progress: true}},
		{"streaming/frame: a bookmark at the point is no progress", in(streaming), frameEv(frame.Bookmark, "10"), want{phase: streaming, deliver: "F"}},
		{"streaming/error 500 retried", in(streaming), errEv(500, retry), want{phase: waiting, closeBody: true, report: reportRetry, reason: establish.ReasonErrorEvent}},
		{"streaming/error 429 retried", in(streaming), errEv(429, retry), want{phase: waiting, closeBody: true, report: reportRetry, reason: establish.ReasonTooManyRequests}},
		{"streaming/error 500 handed over past its window", in(streaming), errEv(500, stopped(policy.HandOver, policy.StoppedByWindow)), want{phase: draining, deliver: "E", report: reportGiveUp, reason: establish.ReasonErrorEvent}},
		{"streaming/error 500 given up: the budget", in(streaming), errEv(500, stopped(policy.GiveUp, policy.StoppedByBudget)), want{phase: done, err: io.EOF, report: reportGiveUp, reason: establish.ReasonErrorEvent}},
		{"streaming/error 500 given up: the deadline", in(streaming), errEv(500, stopped(policy.GiveUp, policy.StoppedByDeadline)), want{phase: done, err: io.EOF, report: reportGiveUp, reason: establish.ReasonDeadline}},
		{"streaming/error 500 given up in a search: its 410", searching(in(streaming)), errEv(500, stopped(policy.GiveUp, policy.StoppedBySearch)), want{phase: done, err: io.EOF, deliver: "G"}},
		{"streaming/error 500 handed over", in(streaming), errEv(500, handOver), want{phase: draining, deliver: "E"}},
		{"streaming/error 410 handed over", in(streaming), errEv(410, handOver), want{phase: draining, deliver: "E"}},
		{"streaming/error 410 held", in(streaming), errEv(410, hold), want{phase: waiting}},
		{"streaming/error 410 searched past", in(streaming), errEv(410, search), want{phase: resuming, closeBody: true, report: reportRetry, reason: establish.ReasonExpiredResume, searching: true}},
		{"streaming/error 403", in(streaming), errEv(403, handOver), want{phase: draining, deliver: "E"}},
		{"streaming/end", in(streaming), ev(evEnd), want{phase: done, err: io.EOF}},
		{"streaming/broke resumed", in(streaming), broke(establish.ReasonBrokenBody, retry), want{phase: waiting, closeBody: true, report: reportRetry, reason: establish.ReasonBrokenBody}},
		{"streaming/broke at the deadline", in(streaming), broke(establish.ReasonStall, stopped(policy.GiveUp, policy.StoppedByDeadline)), want{phase: done, err: io.EOF, closeBody: true, report: reportGiveUp, reason: establish.ReasonDeadline}},
		{"streaming/broke handed over (no resume point)", in(streaming), broke(establish.ReasonBrokenBody, handOver), want{phase: done, err: io.ErrUnexpectedEOF, closeBody: true}},
		{"streaming/broke: invalid frames spent", in(streaming), broke(establish.ReasonInvalidFrame, stopped(policy.HandOver, policy.StoppedByCount)), want{phase: done, err: io.ErrUnexpectedEOF, closeBody: true, report: reportGiveUp, reason: establish.ReasonInvalidFrame}},
		{"streaming/tooLarge", in(streaming), event{kind: evTooLarge, err: frame.ErrFrameTooLarge}, want{phase: done, err: frame.ErrFrameTooLarge, closeBody: true}},
		{"streaming/closed", in(streaming), ev(evClosed), want{phase: done, err: io.EOF}},
		{"streaming/waitOver", in(streaming), ev(evWaitOver), want{phase: done, err: internal, closeBody: true}},
		{"streaming/opened", in(streaming), opened(frame.JSON), want{phase: done, err: internal, closeBody: true}},
		{"streaming/refused", in(streaming), ev(evRefused), want{phase: done, err: internal, closeBody: true}},
		{"streaming/reopenFailed", in(streaming), ev(evReopenFailed), want{phase: done, err: internal, closeBody: true}},
		{"streaming/goneAnswer", in(streaming), gone(handOver), want{phase: done, err: internal, closeBody: true}},

		// waiting
		{"waiting/frame", in(waiting), frameEv(frame.Modified, "11"), want{phase: done, err: internal, closeBody: true}},
		{"waiting/error", in(waiting), errEv(500, retry), want{phase: done, err: internal, closeBody: true}},
		{"waiting/end", in(waiting), ev(evEnd), want{phase: done, err: internal, closeBody: true}},
		{"waiting/broke", in(waiting), broke(establish.ReasonBrokenBody, retry), want{phase: done, err: internal, closeBody: true}},
		{"waiting/tooLarge", in(waiting), ev(evTooLarge), want{phase: done, err: internal, closeBody: true}},
		{"waiting/closed", in(waiting), ev(evClosed), want{phase: done, err: io.EOF}},
		{"waiting/waitOver before a resume", in(waiting), ev(evWaitOver), want{phase: resuming}},
		{"waiting/waitOver: a held ERROR 410", held(in(waiting), draining), ev(evWaitOver), want{phase: draining, deliver: "H"}},
		{"waiting/waitOver: a held answer 410", held(in(waiting), done), ev(evWaitOver), want{phase: done, err: io.EOF, deliver: "H"}},
		{"waiting/opened", in(waiting), opened(frame.JSON), want{phase: done, err: internal, closeBody: true}},
		{"waiting/refused", in(waiting), ev(evRefused), want{phase: done, err: internal, closeBody: true}},
		{"waiting/reopenFailed", in(waiting), ev(evReopenFailed), want{phase: done, err: internal, closeBody: true}},
		{"waiting/goneAnswer", in(waiting), gone(handOver), want{phase: done, err: internal, closeBody: true}},

		// resuming
		{"resuming/frame", in(resuming), frameEv(frame.Modified, "11"), want{phase: done, err: internal, closeBody: true}},
		{"resuming/error", in(resuming), errEv(500, retry), want{phase: done, err: internal, closeBody: true}},
		{"resuming/end", in(resuming), ev(evEnd), want{phase: done, err: internal, closeBody: true}},
		{"resuming/broke", in(resuming), broke(establish.ReasonBrokenBody, retry), want{phase: done, err: internal, closeBody: true}},
		{"resuming/tooLarge", in(resuming), ev(evTooLarge), want{phase: done, err: internal, closeBody: true}},
		{"resuming/closed", in(resuming), ev(evClosed), want{phase: done, err: io.EOF}},
		{"resuming/waitOver", in(resuming), ev(evWaitOver), want{phase: done, err: internal, closeBody: true}},
		{"resuming/opened", in(resuming), opened(frame.JSON), want{phase: streaming}},
		{"resuming/opened in a search: the search goes on", searching(in(resuming)), opened(frame.JSON), want{phase: streaming, searching: true}},
		{"resuming/opened in another encoding", in(resuming), opened(frame.Protobuf), want{phase: done, err: io.EOF}},
		{"resuming/opened in no encoding kretry reads", in(resuming), opened(0), want{phase: done, err: io.EOF}},
		{"resuming/refused", in(resuming), ev(evRefused), want{phase: done, err: io.EOF}},
		{"resuming/refused in a search", searching(in(resuming)), ev(evRefused), want{phase: done, err: io.EOF, deliver: "G"}},
		{"resuming/reopenFailed", in(resuming), ev(evReopenFailed), want{phase: done, err: io.EOF}},
		{"resuming/reopenFailed in a search", searching(in(resuming)), ev(evReopenFailed), want{phase: done, err: io.EOF, deliver: "G"}},
		{"resuming/goneAnswer handed over", in(resuming), gone(handOver), want{phase: done, err: io.EOF, deliver: "A"}},
		{"resuming/goneAnswer held", in(resuming), gone(hold), want{phase: waiting}},
		{"resuming/goneAnswer searched past", in(resuming), gone(search), want{phase: resuming, closeBody: true, report: reportRetry, reason: establish.ReasonExpiredResume, searching: true}},
		{"resuming/goneAnswer not encoded", in(resuming), event{kind: evGoneAnswer, err: io.ErrShortWrite}, want{phase: done, err: io.ErrShortWrite}},

		// draining
		{"draining/frame", in(draining), frameEv(frame.Modified, "11"), want{phase: draining, deliver: "F"}},
		{"draining/error", in(draining), errEv(500, policy.Decision{}), want{phase: draining, deliver: "E"}},
		{"draining/end", in(draining), ev(evEnd), want{phase: done, err: io.EOF}},
		{"draining/broke", in(draining), broke(establish.ReasonBrokenBody, policy.Decision{}), want{phase: done, err: io.ErrUnexpectedEOF}},
		{"draining/tooLarge", in(draining), event{kind: evTooLarge, err: frame.ErrFrameTooLarge}, want{phase: done, err: frame.ErrFrameTooLarge}},
		{"draining/closed", in(draining), ev(evClosed), want{phase: done, err: io.EOF}},
		{"draining/waitOver", in(draining), ev(evWaitOver), want{phase: done, err: internal, closeBody: true}},
		{"draining/opened", in(draining), opened(frame.JSON), want{phase: done, err: internal, closeBody: true}},
		{"draining/refused", in(draining), ev(evRefused), want{phase: done, err: internal, closeBody: true}},
		{"draining/reopenFailed", in(draining), ev(evReopenFailed), want{phase: done, err: internal, closeBody: true}},
		{"draining/goneAnswer", in(draining), gone(handOver), want{phase: done, err: internal, closeBody: true}},
	}
	// done answers every event with nothing.
	for k := range eventKinds {
		m := in(done)
		m.err = io.EOF
		tests = append(tests, struct {
			name string
			m    machine
			ev   event
			want want
		}{"done/" + k.String(), m, event{kind: k, frame: &frame.Event{Code: http.StatusGone}}, want{phase: done, err: io.EOF}})
	}

	covered := map[[2]uint8]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			covered[[2]uint8{uint8(tt.m.phase), uint8(tt.ev.kind)}] = true
			got, ev := tt.m, tt.ev
			act := next(&got, &ev)
			if got.phase != tt.want.phase {
				t.Errorf("phase = %s, want %s", got.phase, tt.want.phase)
			}
			switch {
			case tt.want.err == internal:
				if got.err == nil || !strings.Contains(got.err.Error(), "internal error") {
					t.Errorf("err = %v, want the impossible edge's", got.err)
				}
			case !errors.Is(got.err, tt.want.err):
				t.Errorf("err = %v, want %v", got.err, tt.want.err)
			}
			if string(act.deliver) != tt.want.deliver {
				t.Errorf("deliver = %q, want %q", act.deliver, tt.want.deliver)
			}
			if act.progress != tt.want.progress || act.closeBody != tt.want.closeBody {
				t.Errorf("progress, closeBody = %v, %v; want %v, %v", act.progress, act.closeBody, tt.want.progress, tt.want.closeBody)
			}
			var told report
			if act.report != nil {
				told = *act.report
				if told.kind == reportNothing {
					t.Error("a report that tells nothing")
				}
			}
			if told.kind != tt.want.report || told.reason != tt.want.reason {
				t.Errorf("report = %d %q, want %d %q", told.kind, told.reason, tt.want.report, tt.want.reason)
			}
			if searching := got.search != nil && got.phase != done; searching != tt.want.searching {
				t.Errorf("search under way = %v, want %v", searching, tt.want.searching)
			}
			if tt.ev.kind == evOpened && got.phase == streaming && !got.resumed {
				t.Error("a reopened response not marked resumed")
			}
		})
	}
	for p := streaming; p <= done; p++ {
		for k := range eventKinds {
			if !covered[[2]uint8{uint8(p), uint8(k)}] {
				t.Errorf("no row for (%s, %s)", p, k)
			}
		}
	}
}
