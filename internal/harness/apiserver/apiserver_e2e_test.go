//go:build e2e

package apiserver

import (
	"context"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestSmoke starts etcd and two kube-apiservers, talks to both as both users, restarts and
// kills one, and checks that Close leaves no process behind.
func TestSmoke(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	c := StartT(t, Options{Servers: []ServerOptions{{}, {ExtraFlags: RequestLimitFlags}}})
	t.Logf("ready in %v", time.Since(start))

	for _, s := range c.Servers() {
		for _, u := range []User{Admin, Limited} {
			cs := kubernetes.NewForConfigOrDie(c.ConfigFor(s.Addr(), u))
			v, err := cs.Discovery().ServerVersion()
			if err != nil {
				t.Fatalf("server %d as %v: %v", s.Index(), u, err)
			}
			if v.GitVersion != "v1.37.2" {
				t.Errorf("version %q", v.GitVersion)
			}
			if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatalf("list as %v: %v", u, err)
			}
		}
	}

	rev, err := c.EtcdRevision(ctx)
	if err != nil || rev == 0 {
		t.Fatalf("etcd revision %d: %v", rev, err)
	}

	s := c.Server(1)
	pid := s.PID()
	start = time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %v", time.Since(start))
	if s.PID() == pid || syscall.Kill(pid, 0) == nil {
		t.Fatalf("old process %d still there", pid)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("still running after Kill")
	}
	cs := kubernetes.NewForConfigOrDie(c.ConfigFor(c.Server(0).Addr(), Admin))
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("server 0 after killing server 1: %v", err)
	}

	pids := []int{c.Server(0).PID(), c.etcd.pid()}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("pid %d survived Close", pid)
		}
	}
}
