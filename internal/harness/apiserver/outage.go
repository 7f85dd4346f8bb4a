package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// Outage is what Server.Outage did, with the time of each step.
type Outage struct {
	// PID is the kube-apiserver process that was killed; NewPID the one started after it.
	PID, NewPID int
	// Killed is when SIGKILL was sent. Its process group was reaped and found empty right after.
	Killed time.Time
	// Started is when the new process was started: the requested down time after Killed.
	Started time.Time
	// Listening is when the server's port first accepted a TCP connection again; until then
	// every connection to it was refused.
	Listening time.Time
	// Ready is when the new process answered /readyz with 200.
	Ready time.Time
}

// Refused is how long connections to the server's port were refused: from the kill until the
// new process listened.
func (o Outage) Refused() time.Duration { return o.Listening.Sub(o.Killed) }

// Unready is how long the server was not ready: from the kill until /readyz answered 200.
func (o Outage) Unready() time.Duration { return o.Ready.Sub(o.Killed) }

// Outage takes this kube-apiserver alone down for a while, as a crash or an OOM kill would: it
// kills the process at once (SIGKILL: open connections end mid-stream, new ones are refused),
// checks that no process of its group is left, waits until down has passed since the kill,
// then starts it again on the same port, certificates and etcd (its watch cache starts afresh)
// and waits for /readyz. etcd and the cluster's other servers keep running. If ctx ends before
// the restart, the server is left down and ctx's error returned.
func (s *Server) Outage(ctx context.Context, down time.Duration) (Outage, error) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil || p.exited() {
		return Outage{}, fmt.Errorf("apiserver: server %d is not running", s.index)
	}
	o := Outage{PID: p.pid(), Killed: time.Now()}
	if err := p.kill(); err != nil {
		return o, err
	}
	if err := waitGroupGone(ctx, o.PID, 5*time.Second); err != nil {
		return o, fmt.Errorf("apiserver: server %d after SIGKILL: %w", s.index, err)
	}
	select {
	case <-ctx.Done():
		return o, ctx.Err()
	case <-time.After(time.Until(o.Killed.Add(down))):
	}
	o.Started = time.Now()
	if err := s.launch(); err != nil {
		return o, err
	}
	o.NewPID = s.PID()
	s.mu.Lock()
	p = s.proc
	s.mu.Unlock()
	if err := poll(ctx, s.cluster.timeout, p, func() error {
		conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	}); err != nil {
		return o, fmt.Errorf("apiserver: kube-apiserver %d not listening: %w", s.index, err)
	}
	o.Listening = time.Now()
	if err := s.waitReady(ctx); err != nil {
		return o, err
	}
	o.Ready = time.Now()
	return o, nil
}

// waitGroupGone waits until no process is left in the process group pgid (the group this
// package starts every child in), or fails after timeout.
func waitGroupGone(ctx context.Context, pgid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d still has a process (kill -0: %v)", pgid, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
