package watchretry

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/frame"
	"github.com/kretry/kretry/internal/policy"
)

// TestNext walks every (phase, event) edge of the resuming stream: the
// whole machine in one table. Edges the I/O never reports end the stream
// with an internal error; done answers nothing.
func TestNext(t *testing.T) {
	at := time.Unix(1000, 0)
	in := func(p phase) machine {
		return machine{phase: p, point: resumePoint{rv: []byte("10"), known: true}, maxInvalid: 3}
	}
	unknown := func(m machine) machine { m.point.known = false; return m }
	held := func(m machine, then phase) machine { m.held, m.heldThen = []byte("H"), then; return m }
	searching := func(m machine) machine { m.run.search = &goneSearch{event: []byte("G")}; return m }
	spent := func(m machine) machine { m.point.invalid = 3; return m }
	ev := func(k eventKind) event { return event{kind: k, at: at, attempts: 2} }
	frameEv := func(typ frame.EventType, rv string) event {
		return event{kind: evFrame, raw: []byte("F"), frame: &frame.Event{Type: typ, ResourceVersion: []byte(rv)}}
	}
	errEv := func(code int32) event {
		return event{kind: evError, at: at, raw: []byte("E"), frame: &frame.Event{Type: frame.Error, Code: code}}
	}
	withDecision := func(e event, d policy.Decision) event { e.decision = d; return e }
	withGone := func(e event, d policy.GoneDecision) event { e.gone = d; return e }
	broke := func(reason string) event {
		return event{kind: evBroke, at: at, err: io.ErrUnexpectedEOF, reason: reason}
	}
	gone := event{kind: evGoneAnswer, at: at, raw: []byte("A")}
	retry := policy.Decision{Retry: true, Wait: time.Second}
	internal := errors.New("internal")

	type want struct {
		ask       question
		phase     phase
		err       error // done's; internal: the impossible edge's error
		deliver   string
		progress  bool
		closeBody bool
		report    reportKind
		reason    string
	}
	tests := []struct {
		name string
		m    machine
		ev   event
		want want
	}{
		// streaming
		{"streaming/frame", in(streaming), frameEv(frame.Modified, "11"), want{phase: streaming, deliver: "F", progress: true}},
		{"streaming/frame: a bookmark at the point is no progress", in(streaming), frameEv(frame.Bookmark, "10"), want{phase: streaming, deliver: "F"}},
		{"streaming/error 500 absorbed", in(streaming), withDecision(errEv(500), retry), want{ask: askDecide, phase: waiting, closeBody: true, report: reportRetry, reason: policy.ReasonErrorEvent}},
		{"streaming/error 429 absorbed", in(streaming), withDecision(errEv(429), retry), want{ask: askDecide, phase: waiting, closeBody: true, report: reportRetry, reason: policy.ReasonTooManyRequests}},
		{"streaming/error 500 past its window", in(streaming), withDecision(errEv(500), policy.Decision{Stopped: policy.StoppedByWindow}), want{ask: askDecide, phase: draining, deliver: "E", report: reportGiveUp, reason: policy.ReasonErrorEvent}},
		{"streaming/error 500 refused by the budget", in(streaming), withDecision(errEv(500), policy.Decision{Stopped: policy.StoppedByBudget}), want{ask: askDecide, phase: done, err: io.EOF, report: reportGiveUp, reason: policy.ReasonErrorEvent}},
		{"streaming/error 500 without a resume point", unknown(in(streaming)), errEv(500), want{phase: draining, deliver: "E"}},
		{"streaming/error 410 delivered", in(streaming), errEv(410), want{ask: askGone, phase: draining, deliver: "E"}},
		{"streaming/error 410 held", in(streaming), withGone(errEv(410), policy.GoneDecision{Hold: time.Second}), want{ask: askGone, phase: waiting}},
		{"streaming/error 410 retried on a new connection", in(streaming), withGone(errEv(410), policy.GoneDecision{Retry: true}), want{ask: askGone, phase: resuming, closeBody: true, report: reportRetry, reason: policy.ReasonExpiredResume}},
		{"streaming/error 403", in(streaming), errEv(403), want{phase: draining, deliver: "E"}},
		{"streaming/end", in(streaming), ev(evEnd), want{phase: done, err: io.EOF}},
		{"streaming/broke", in(streaming), withDecision(broke(policy.ReasonBrokenBody), retry), want{ask: askBreak, phase: waiting, closeBody: true, report: reportRetry, reason: policy.ReasonBrokenBody}},
		{"streaming/broke at the deadline", in(streaming), broke(policy.ReasonStall), want{ask: askBreak, phase: done, err: io.EOF, closeBody: true, report: reportGiveUp, reason: policy.ReasonStall}},
		{"streaming/broke without a resume point", unknown(in(streaming)), broke(policy.ReasonBrokenBody), want{phase: done, err: io.ErrUnexpectedEOF, closeBody: true}},
		{"streaming/broke: invalid frames spent", spent(in(streaming)), broke(policy.ReasonInvalidFrame), want{phase: done, err: io.ErrUnexpectedEOF, closeBody: true, report: reportGiveUp, reason: policy.ReasonInvalidFrame}},
		{"streaming/tooLarge", in(streaming), event{kind: evTooLarge, err: frame.ErrFrameTooLarge}, want{phase: done, err: frame.ErrFrameTooLarge, closeBody: true}},
		{"streaming/closed", in(streaming), ev(evClosed), want{phase: done, err: io.EOF}},
		{"streaming/waitOver", in(streaming), ev(evWaitOver), want{phase: done, err: internal, closeBody: true}},
		{"streaming/deadline", in(streaming), ev(evDeadline), want{phase: done, err: internal, closeBody: true}},
		{"streaming/searchOver", in(streaming), ev(evSearchOver), want{phase: done, err: internal, closeBody: true}},
		{"streaming/opened", in(streaming), ev(evOpened), want{phase: done, err: internal, closeBody: true}},
		{"streaming/mismatch", in(streaming), ev(evMismatch), want{phase: done, err: internal, closeBody: true}},
		{"streaming/refused", in(streaming), ev(evRefused), want{phase: done, err: internal, closeBody: true}},
		{"streaming/reopenFailed", in(streaming), ev(evReopenFailed), want{phase: done, err: internal, closeBody: true}},
		{"streaming/goneAnswer", in(streaming), gone, want{phase: done, err: internal, closeBody: true}},

		// waiting
		{"waiting/frame", in(waiting), frameEv(frame.Modified, "11"), want{phase: done, err: internal, closeBody: true}},
		{"waiting/error", in(waiting), errEv(500), want{phase: done, err: internal, closeBody: true}},
		{"waiting/end", in(waiting), ev(evEnd), want{phase: done, err: internal, closeBody: true}},
		{"waiting/broke", in(waiting), broke(policy.ReasonBrokenBody), want{phase: done, err: internal, closeBody: true}},
		{"waiting/tooLarge", in(waiting), ev(evTooLarge), want{phase: done, err: internal, closeBody: true}},
		{"waiting/closed", in(waiting), ev(evClosed), want{phase: done, err: io.EOF}},
		{"waiting/waitOver before a resume", in(waiting), ev(evWaitOver), want{phase: resuming}},
		{"waiting/waitOver: a held ERROR 410", held(in(waiting), draining), ev(evWaitOver), want{phase: draining, deliver: "H"}},
		{"waiting/waitOver: a held answer 410", held(in(waiting), done), ev(evWaitOver), want{phase: done, err: io.EOF, deliver: "H"}},
		{"waiting/deadline", in(waiting), ev(evDeadline), want{phase: done, err: internal, closeBody: true}},
		{"waiting/searchOver", in(waiting), ev(evSearchOver), want{phase: done, err: internal, closeBody: true}},
		{"waiting/opened", in(waiting), ev(evOpened), want{phase: done, err: internal, closeBody: true}},
		{"waiting/mismatch", in(waiting), ev(evMismatch), want{phase: done, err: internal, closeBody: true}},
		{"waiting/refused", in(waiting), ev(evRefused), want{phase: done, err: internal, closeBody: true}},
		{"waiting/reopenFailed", in(waiting), ev(evReopenFailed), want{phase: done, err: internal, closeBody: true}},
		{"waiting/goneAnswer", in(waiting), gone, want{phase: done, err: internal, closeBody: true}},

		// resuming
		{"resuming/frame", in(resuming), frameEv(frame.Modified, "11"), want{phase: done, err: internal, closeBody: true}},
		{"resuming/error", in(resuming), errEv(500), want{phase: done, err: internal, closeBody: true}},
		{"resuming/end", in(resuming), ev(evEnd), want{phase: done, err: internal, closeBody: true}},
		{"resuming/broke", in(resuming), broke(policy.ReasonBrokenBody), want{phase: done, err: internal, closeBody: true}},
		{"resuming/tooLarge", in(resuming), ev(evTooLarge), want{phase: done, err: internal, closeBody: true}},
		{"resuming/closed", in(resuming), ev(evClosed), want{phase: done, err: io.EOF}},
		{"resuming/waitOver", in(resuming), ev(evWaitOver), want{phase: done, err: internal, closeBody: true}},
		{"resuming/deadline", in(resuming), ev(evDeadline), want{phase: done, err: io.EOF, report: reportGiveUp, reason: policy.ReasonDeadline}},
		{"resuming/searchOver", searching(in(resuming)), ev(evSearchOver), want{phase: done, err: io.EOF, deliver: "G"}},
		{"resuming/opened", in(resuming), ev(evOpened), want{phase: streaming}},
		{"resuming/mismatch", in(resuming), ev(evMismatch), want{phase: done, err: io.EOF}},
		{"resuming/refused", in(resuming), ev(evRefused), want{phase: done, err: io.EOF}},
		{"resuming/refused in a search", searching(in(resuming)), ev(evRefused), want{phase: done, err: io.EOF, deliver: "G"}},
		{"resuming/reopenFailed", in(resuming), ev(evReopenFailed), want{phase: done, err: io.EOF}},
		{"resuming/reopenFailed in a search", searching(in(resuming)), ev(evReopenFailed), want{phase: done, err: io.EOF, deliver: "G"}},
		{"resuming/goneAnswer delivered", in(resuming), gone, want{ask: askGone, phase: done, err: io.EOF, deliver: "A"}},
		{"resuming/goneAnswer held", in(resuming), withGone(gone, policy.GoneDecision{Hold: time.Second}), want{ask: askGone, phase: waiting}},
		{"resuming/goneAnswer retried", in(resuming), withGone(gone, policy.GoneDecision{Retry: true}), want{ask: askGone, phase: resuming, closeBody: true, report: reportRetry, reason: policy.ReasonExpiredResume}},
		{"resuming/goneAnswer not encoded", in(resuming), event{kind: evGoneAnswer, err: io.ErrShortWrite}, want{phase: done, err: io.ErrShortWrite}},

		// draining
		{"draining/frame", in(draining), frameEv(frame.Modified, "11"), want{phase: draining, deliver: "F"}},
		{"draining/error", in(draining), errEv(500), want{phase: draining, deliver: "E"}},
		{"draining/end", in(draining), ev(evEnd), want{phase: done, err: io.EOF}},
		{"draining/broke", in(draining), broke(policy.ReasonBrokenBody), want{phase: done, err: io.ErrUnexpectedEOF}},
		{"draining/tooLarge", in(draining), event{kind: evTooLarge, err: frame.ErrFrameTooLarge}, want{phase: done, err: frame.ErrFrameTooLarge}},
		{"draining/closed", in(draining), ev(evClosed), want{phase: done, err: io.EOF}},
		{"draining/waitOver", in(draining), ev(evWaitOver), want{phase: done, err: internal, closeBody: true}},
		{"draining/deadline", in(draining), ev(evDeadline), want{phase: done, err: internal, closeBody: true}},
		{"draining/searchOver", in(draining), ev(evSearchOver), want{phase: done, err: internal, closeBody: true}},
		{"draining/opened", in(draining), ev(evOpened), want{phase: done, err: internal, closeBody: true}},
		{"draining/mismatch", in(draining), ev(evMismatch), want{phase: done, err: internal, closeBody: true}},
		{"draining/refused", in(draining), ev(evRefused), want{phase: done, err: internal, closeBody: true}},
		{"draining/reopenFailed", in(draining), ev(evReopenFailed), want{phase: done, err: internal, closeBody: true}},
		{"draining/goneAnswer", in(draining), gone, want{phase: done, err: internal, closeBody: true}},
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
			if ask := tt.m.question(&tt.ev); ask != tt.want.ask {
				t.Errorf("question = %d, want %d", ask, tt.want.ask)
			}
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
			if act.progress && got.run != (resumeRun{}) {
				t.Errorf("progress left the run %+v", got.run)
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
