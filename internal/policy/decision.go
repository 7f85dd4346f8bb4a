package policy

import "time"

// Action is what to do with a failure.
type Action uint8

const (
	// HandOver: the failure goes to the caller as it is: an answer, an
	// error, an ERROR event delivered (then the stream ends).
	HandOver Action = iota
	// Retry: try again after Wait; on a new connection when NewConnection.
	Retry
	// Hold: hand the failure over after Wait.
	Hold
	// GiveUp: stop retrying a retryable failure (Stop says why) and end as
	// the failure would have ended without kretry: the server's last answer
	// without Retry-After, a give-up error, a watch's clean end.
	GiveUp
)

var actionNames = [...]string{"hand over", "retry", "hold", "give up"}

// String names the action for logs and test failures.
func (a Action) String() string { return actionNames[a] }

// Stop is why a retryable failure is not retried.
type Stop uint8

const (
	// NotStopped: the failure is retried, or was never retryable.
	NotStopped Stop = iota
	// StoppedByWindow: its window is spent.
	StoppedByWindow
	// StoppedByDeadline: the wait would run into the caller's deadline.
	StoppedByDeadline
	// StoppedByBudget: the transport's retry budget refused the retry.
	StoppedByBudget
	// StoppedBySearch: the search for an apiserver that holds a watch's
	// resume point reached its end (the retry would start past it).
	StoppedBySearch
	// StoppedByCount: invalid frames at one resume point reached their bound.
	StoppedByCount
)

var stopNames = [...]string{"none", "window", "deadline", "budget", "search", "count"}

// String names the stop for logs and test failures.
func (s Stop) String() string { return stopNames[s] }

// Decision is what to do after a failure.
type Decision struct {
	Action Action
	// Wait is how long to wait before the retry (Retry) or before handing
	// the failure over (Hold).
	Wait time.Duration
	// NewConnection (Retry) asks for the retry to reach a new connection,
	// which a load balancer routes afresh: the search for an apiserver that
	// holds a watch's resume point.
	NewConnection bool
	// Until (Retry with NewConnection) is the end of that search: a retry
	// still unanswered then is abandoned and the 410 handed over.
	Until time.Time
	// Stop says why a retryable failure is not retried (GiveUp, or a
	// HandOver of an ERROR event whose window is spent).
	Stop Stop
}

// String is the decision in a line, for logs and test failures.
func (d Decision) String() string {
	s := d.Action.String()
	if d.Action == Retry || d.Action == Hold {
		s += " after " + d.Wait.String()
	}
	if d.NewConnection {
		s += " on a new connection until " + d.Until.Format(time.TimeOnly+".000")
	}
	if d.Stop != NotStopped {
		s += " (" + d.Stop.String() + ")"
	}
	return s
}

func retryAfter(wait time.Duration) Decision { return Decision{Action: Retry, Wait: wait} }

func giveUp(stop Stop) Decision { return Decision{Action: GiveUp, Stop: stop} }

var handOver = Decision{Action: HandOver}
