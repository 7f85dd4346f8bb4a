// Package demoserver is an in-process Kubernetes API server for the demo, the examples and
// their tests: one ConfigMap collection on loopback, served the way kube-apiserver serves it,
// with a writer that keeps changing it and a seeded fault schedule that breaks clients.
//
// It ships: kretry-demo runs it, and kretry-proxy serves it when started with --demo (and
// never otherwise). That is why it lives here and not under internal/harness, whose packages
// are test harnesses that no shipped binary links.
//
// What it serves (GET only, plain HTTP on 127.0.0.1):
//   - LIST /api/v1/namespaces/{ns}/configmaps (and /api/v1/configmaps), JSON or protobuf by
//     Accept, with resourceVersion "", "0", a specific RV and resourceVersionMatch, and
//     limit/continue paging; a continue token older than the last compaction gets 410
//     Expired.
//   - WATCH (watch=true): JSON frames ("application/json", one object per line) or protobuf
//     frames ("application/vnd.kubernetes.protobuf;stream=watch", 4-byte length prefix),
//     encoded with client-go's own serializers. RV "" and "0" start with the current state
//     as ADDED events; a specific RV resumes after it, or gets an in-stream ERROR 410 Expired
//     when it is older than the compaction floor. allowWatchBookmarks brings a BOOKMARK
//     every BookmarkInterval; sendInitialEvents=true with resourceVersionMatch=NotOlderThan
//     (a watch-list) sends the state and then the BOOKMARK annotated
//     k8s.io/initial-events-end. timeoutSeconds ends the stream cleanly.
//   - GET of one ConfigMap, /version, /api, /api/v1 and /apis (legacy discovery).
//
// Clients are told apart by User-Agent; [Server.Stats] counts, per client, the requests,
// the full-state fetches (LISTs and watch-lists), bytes, events and faults.
// [Server.State] is the collection as the server holds it, for a cache == server check.
//
// Faults. Each client has its own schedule, seeded from [Config.Seed] alike for all
// clients, drawing scenarios from [Config.FaultKinds] at [Config.FaultRate] per second:
// torn frames, early clean closes, 503 and 429 answers to watch establishment (429 with
// Retry-After, without, and the text/plain form), 429 bursts that answer every LIST and
// watch of the client for [Config.ThrottleBurst], InternalError ERROR events, and
// compactions of the client's own history whose next watch gets 410 Expired. A scenario
// fires only once the client has made progress since the previous one, and never while a
// watch is still sending its initial state (nothing can resume it there), so a client that
// retries and resumes correctly is never forced into a relist except by a 410.
// [Server.Rollout] hits every client at once: every watch is cut and every LIST and watch
// is answered 503 for a while. [Config.Hold] keeps the writer and the schedules still
// until [Server.Begin], so that clients start from the same state;
// [Server.ChangesAfter] is the history a watcher should have seen.
package demoserver
