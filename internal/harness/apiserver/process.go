package apiserver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// process is one child started by this package, in a process group of its own so that a kill
// reaches anything it forked too. It is only ever signalled through the PID it was started with.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when Wait returned
	waitErr error
}

// startProcess starts bin with args, its stdout and stderr appended to logPath.
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If the test binary dies without running its cleanups (a panic on -timeout, SIGKILL),
		// the kernel still kills the child.
		Pdeathsig: syscall.SIGKILL,
	}
	registry.mu.Lock() // no signal-handler kill may run between Start and register
	err = cmd.Start()
	if err == nil {
		registry.procs[cmd.Process.Pid] = struct{}{}
	}
	registry.mu.Unlock()
	logFile.Close() // the child has its own descriptor
	if err != nil {
		return nil, fmt.Errorf("apiserver: start %s: %w", name, err)
	}
	installSignalHandler()
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// pid is the PID (and process group ID) the process was started with.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the group and waits up to grace; then it kills the group.
func (p *process) stop(grace time.Duration) error {
	_, err := p.terminate(grace)
	return err
}

// terminate is stop, reporting whether the process exited on its own within grace.
func (p *process) terminate(grace time.Duration) (exited bool, err error) {
	if p.exited() {
		p.killGroup() // stray grandchildren, if any
		p.unregister()
		return true, nil
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		exited = true
	case <-time.After(grace):
	}
	return exited, p.kill()
}

// kill sends SIGKILL to the whole group and waits for the process to be reaped.
func (p *process) kill() error {
	p.killGroup()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("apiserver: %s (pid %d) did not exit after SIGKILL", p.name, p.pid())
	}
	p.unregister()
	return nil
}

func (p *process) killGroup() {
	if err := syscall.Kill(-p.pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Kill()
	}
}

func (p *process) unregister() {
	registry.mu.Lock()
	delete(registry.procs, p.pid())
	registry.mu.Unlock()
}

// logTail returns up to n bytes from the end of the process's log.
func (p *process) logTail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// registry remembers the process groups alive, so an interrupt of the test binary kills them.
var registry = struct {
	mu    sync.Mutex
	procs map[int]struct{}
	once  sync.Once
}{procs: map[int]struct{}{}}

// installSignalHandler kills every registered group on SIGINT/SIGTERM, then lets the signal
// take its default course.
func installSignalHandler() {
	registry.once.Do(func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-signals
			registry.mu.Lock()
			for pid := range registry.procs {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			registry.mu.Unlock()
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			if s, ok := sig.(syscall.Signal); ok {
				_ = syscall.Kill(os.Getpid(), s)
			}
		}()
	})
}
