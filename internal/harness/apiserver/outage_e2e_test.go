//go:build e2e

package apiserver

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestOutage takes one of two servers down for 3s: connections to it are refused meanwhile,
// the other keeps serving, the old process group is gone, the new process answers on the same
// port, and Close leaves nothing behind.
func TestOutage(t *testing.T) {
	ctx := context.Background()
	c := StartT(t, Options{Servers: []ServerOptions{{}, {}}})
	s := c.Server(0)
	oldPID := s.PID()

	var mu sync.Mutex
	var refused, otherErrs int
	var firstOther error
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // dial the server all along; during the outage every dial must be refused
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
			mu.Lock()
			switch {
			case err == nil:
				conn.Close()
			case errors.Is(err, syscall.ECONNREFUSED):
				refused++
			default:
				otherErrs++
				if firstOther == nil {
					firstOther = err
				}
			}
			mu.Unlock()
		}
	}()

	o, err := s.Outage(ctx, 3*time.Second)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outage: pid %d -> %d, refused %v, unready %v", o.PID, o.NewPID, o.Refused(), o.Unready())
	if o.PID != oldPID || o.NewPID == 0 || o.NewPID == oldPID {
		t.Errorf("PIDs: before %d, outage %+v", oldPID, o)
	}
	if syscall.Kill(oldPID, 0) == nil {
		t.Errorf("old pid %d still there", oldPID)
	}
	if o.Started.Sub(o.Killed) < 3*time.Second || o.Listening.Before(o.Started) || o.Ready.Before(o.Listening) {
		t.Errorf("times out of order: %+v", o)
	}
	if refused < 20 || otherErrs > 0 {
		t.Errorf("dials during the outage: %d refused, %d other errors (first: %v)", refused, otherErrs, firstOther)
	}

	for _, srv := range c.Servers() {
		cs := kubernetes.NewForConfigOrDie(c.ConfigFor(srv.Addr(), Admin))
		if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("server %d after the outage: %v", srv.Index(), err)
		}
	}

	pids := []int{s.PID(), c.Server(1).PID(), c.etcd.pid()}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if syscall.Kill(-pid, 0) == nil {
			t.Errorf("process group %d survived Close", pid)
		}
	}
}
