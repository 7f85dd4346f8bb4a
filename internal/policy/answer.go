package policy

import "time"

// AnswerTimeout bounds how long one attempt kretry makes on its own may go
// without an answer: the wait for the response headers of a watch's open or
// reopen and of a LIST body's resume, and each read of the prefix a LIST
// resume skips. An attempt left unanswered that long (a server that
// accepted and went silent, a dial that hangs, a black-holed backend behind
// a balancer) is a failure like a refused connection, retried within the
// InternalErrorWindow, so a caller without a deadline of its own (an
// informer's LIST) is never left hanging: it gets the break within the
// window plus this bound. kube-apiserver queues a request for at most a
// quarter of its --request-timeout (15 s at the default 60 s; priority and
// fairness then answers 429) and a watch waits at most 3 s for its cache to
// catch up before it answers: a healthy server has answered by 20 s.
const AnswerTimeout = 20 * time.Second
