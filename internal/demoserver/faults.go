package demoserver

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// FaultKind names one fault scenario of the schedule.
type FaultKind int

// The fault scenarios. Those that answer a watch establishment first break the client's
// current watch (if the scenario starts mid-stream), so that an establishment follows.
const (
	// TornFrame cuts the connection in the middle of a watch frame.
	TornFrame FaultKind = iota + 1
	// Unavailable tears the watch, then answers the next watch establishment 503
	// ServiceUnavailable without Retry-After, as a server going away in a rolling upgrade.
	// One 503, not a burst: kretry's InternalErrorWindow starts at the first 503 and its
	// backoff may already be at its cap, so a longer outage may legitimately end in a
	// relist, and the demo's "a LIST only after a 410" would then depend on timing.
	Unavailable
	// TooManyRequests closes the watch, then answers the next establishment 429 with a
	// Retry-After header and details.retryAfterSeconds, as API Priority and Fairness does.
	TooManyRequests
	// TooManyRequestsNoRetryAfter is a 429 Status with no Retry-After at all.
	TooManyRequestsNoRetryAfter
	// TooManyRequestsPlain is the max-in-flight filter's 429: a text/plain body
	// "Too many requests, please try again later." and Retry-After: 1.
	TooManyRequestsPlain
	// InternalErrorEvent sends an ERROR event with a 500 InternalError Status mid-stream,
	// then ends the stream, as kube-apiserver does after any ERROR event.
	InternalErrorEvent
	// EarlyClose ends the stream cleanly at a frame boundary, long before timeoutSeconds.
	EarlyClose
	// Compaction compacts the client's history past its last RV and closes its stream, so
	// that its next watch from that RV gets an in-stream 410 Expired: the watch cache's
	// window moved on without it. Other clients' histories are untouched.
	Compaction
	// ThrottleBurst closes the watch, then answers every LIST and watch establishment of
	// the client 429 with Retry-After: 1 (and details.retryAfterSeconds) for
	// Config.ThrottleBurst, as API Priority and Fairness sheds a busy priority level.
	ThrottleBurst
	// Rollout is not drawn by a schedule: [Server.Rollout] records it for every client it
	// hits. Every watch is cut, then every LIST and watch establishment is answered 503
	// for a while, as while an apiserver restarts in a rolling upgrade.
	Rollout

	numFaultKinds = int(Rollout)
)

// AllFaults is every kind a schedule can draw (all but Rollout); the default schedule
// draws from it uniformly.
var AllFaults = []FaultKind{
	TornFrame, Unavailable, TooManyRequests, TooManyRequestsNoRetryAfter,
	TooManyRequestsPlain, InternalErrorEvent, EarlyClose, Compaction, ThrottleBurst,
}

// String names the kind for logs and tables.
func (k FaultKind) String() string {
	switch k {
	case TornFrame:
		return "connection cut"
	case Unavailable:
		return "503 on establishment"
	case TooManyRequests:
		return "429 + Retry-After"
	case TooManyRequestsNoRetryAfter:
		return "429 without Retry-After"
	case TooManyRequestsPlain:
		return "429 text/plain"
	case InternalErrorEvent:
		return "ERROR 500 event"
	case EarlyClose:
		return "early close"
	case Compaction:
		return "compaction (410)"
	case ThrottleBurst:
		return "429 burst"
	case Rollout:
		return "rollout (503s)"
	default:
		return "no fault"
	}
}

// answersEstablishment reports whether the scenario answers a watch request instead of
// breaking a stream.
func (k FaultKind) answersEstablishment() bool {
	switch k {
	case Unavailable, TooManyRequests, TooManyRequestsNoRetryAfter, TooManyRequestsPlain:
		return true
	}
	return false
}

// Fault records one injected fault scenario.
type Fault struct {
	// Client is the User-Agent of the client it hit.
	Client string
	// Kind is the scenario.
	Kind FaultKind
	// At is when it was injected.
	At time.Time
	// ResourceVersion is the server's current RV at that moment: a client has recovered
	// from the fault once it has seen this RV.
	ResourceVersion uint64
}

// schedule decides when one client is hit and by what. Kinds and intervals come from a
// seeded source in a fixed order, so every run of the same seed draws the same sequence.
// Kinds are drawn uniformly from the list, so a kind listed twice comes twice as often.
//
// A fault arms only once the client has made progress (received a whole non-ERROR watch
// frame) since the previous one, and then after an exponentially distributed interval of
// mean 1/rate. So faults never pile up without progress in between: a client that can
// recover is never pushed past a retry window by the schedule alone.
type schedule struct {
	mu         sync.Mutex
	rng        *rand.Rand
	rate       float64 // faults per second; 0 disables arming
	kinds      []FaultKind
	progressed bool
	armAt      time.Time // when the next fault arms; zero until progress
	armed      FaultKind // 0: none
	due        FaultKind // the answer the next watch establishment gets; 0: none
	// throttleUntil: every LIST and watch establishment before it gets a 429 burst answer.
	throttleUntil time.Time
	burst         time.Duration // how long a ThrottleBurst lasts
}

func newSchedule(seed uint64, rate float64, kinds []FaultKind, burst time.Duration) *schedule {
	return &schedule{rng: rand.New(rand.NewPCG(seed, 0x6661756c7473)), rate: rate, kinds: kinds, burst: burst} // "faults"
}

// start sets the rate of a schedule created before the server's Begin.
func (s *schedule) start(rate float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate = rate
}

// progress notes a whole non-ERROR frame delivered to the client.
func (s *schedule) progress(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.progressed || s.rate <= 0 {
		return
	}
	s.progressed = true
	s.armAt = now.Add(s.intervalLocked())
}

func (s *schedule) intervalLocked() time.Duration {
	seconds := s.rng.ExpFloat64() / s.rate
	return time.Duration(math.Min(seconds, 3600) * float64(time.Second))
}

func (s *schedule) armLocked(now time.Time) {
	if s.armed != 0 || !s.progressed || s.rate <= 0 || len(s.kinds) == 0 || now.Before(s.armAt) {
		return
	}
	s.armed = s.kinds[s.rng.IntN(len(s.kinds))]
	s.progressed = false
}

// inject arms kind at once, whatever the rate and progress.
func (s *schedule) inject(kind FaultKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = kind
	s.progressed = false
}

// restart disarms the schedule until the client makes progress again: a fault that hit
// it from elsewhere (a Rollout) counts as the previous one.
func (s *schedule) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = 0
	s.due = 0
	s.progressed = false
}

// stop disarms the schedule for good.
func (s *schedule) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate = 0
	s.armed = 0
	s.due = 0
	s.throttleUntil = time.Time{}
}

// establishment is consulted for every watch request. It returns the answer due, if any,
// and whether it starts a new scenario (rather than continuing one).
func (s *schedule) establishment(now time.Time) (kind FaultKind, started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.throttleUntil) {
		return ThrottleBurst, false
	}
	if s.due != 0 {
		kind, s.due = s.due, 0
		return kind, false
	}
	s.armLocked(now)
	if !s.armed.answersEstablishment() {
		return 0, false
	}
	kind, s.armed = s.armed, 0
	return kind, true
}

// midStream is consulted before every frame of a watch past its initial state. It returns
// the scenario that starts now, if any; for establishment scenarios the answer is kept for
// the next watch request and the caller breaks the stream.
func (s *schedule) midStream(now time.Time) FaultKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armLocked(now)
	kind := s.armed
	s.armed = 0
	if kind.answersEstablishment() {
		s.due = kind
	}
	if kind == ThrottleBurst {
		s.throttleUntil = now.Add(s.burst)
	}
	return kind
}

// throttled reports whether a LIST now falls in a 429 burst.
func (s *schedule) throttled(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.throttleUntil)
}
