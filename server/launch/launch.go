// Package launch starts a child process tied to its parent's life: when
// the parent dies, even by SIGKILL, the kernel sends the child a signal
// of the parent's choosing, so no test node or devnet btcd outlives the
// process that started it. It also captures the child's output in a log
// file and stops the child in steps: a polite signal, a grace period,
// then SIGKILL.
//
// Linux only, like the Pdeathsig it relies on.
package launch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// Config says how to tie a child to its parent.
type Config struct {
	// DeathSignal is what the child gets when its parent dies; 0 means
	// SIGKILL. A child that must clean up after itself picks a gentler one
	// (postgres: SIGQUIT, which also ends its backends).
	DeathSignal syscall.Signal
	// Log, if set, is a file the child's stdout and stderr are appended to
	// (created 0600 if missing); Tail reads it back.
	Log string
	// Clock times the grace periods of Stop; nil means clock.RealClock{}.
	Clock clock.WithTicker
}

// Process is a running child. Its methods are safe for concurrent use.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	clock  clock.WithTicker
	err    error // how the child ended; set before exited is closed
}

// Start starts cmd (prepared by the caller: path, arguments, directory,
// environment, and any credential in SysProcAttr) as a child that dies
// with this process. The child gets a process group of its own, so a
// Ctrl-C at the terminal reaches only the parent, which stops the child
// in order. With cfg.Log, cmd's Stdout and Stderr go to that file.
func Start(cmd *exec.Cmd, cfg Config) (*Process, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.DeathSignal == 0 {
		cfg.DeathSignal = syscall.SIGKILL
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = cfg.DeathSignal
	if cfg.Log != "" {
		out, err := os.OpenFile(cfg.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("launch %s: log: %w", filepath.Base(cmd.Path), err)
		}
		// The child holds its own descriptor once started.
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
	}
	p := &Process{cmd: cmd, exited: make(chan struct{}), clock: cfg.Clock}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that started the
		// child ends, not the process: keep this goroutine on its thread
		// until the child has exited. Never unlocked, so the thread ends
		// with the goroutine.
		runtime.LockOSThread()
		defer close(p.exited)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("launch %s: %w", filepath.Base(cmd.Path), err)
	}
	return p, nil
}

// Exited is closed once the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err waits for the child to exit and says how it ended: nil for a zero
// exit status, else the *exec.ExitError naming its status or signal.
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Step is one stage of Stop: a signal, and how long to wait for the child
// to exit after it.
type Step struct {
	Signal os.Signal
	Grace  time.Duration
}

// ErrKilled is wrapped by Stop's error when the child outlived every step
// and was killed.
var ErrKilled = errors.New("killed")

// Stop sends the steps' signals in turn, each followed by its grace
// period, until the child exits; a child still there after the last is
// SIGKILLed with its whole process group (whatever it spawned would
// otherwise be orphaned) and Stop returns an error wrapping ErrKilled.
// Stop on an exited child returns nil at once.
func (p *Process) Stop(steps ...Step) error {
	for _, s := range steps {
		select {
		case <-p.exited:
			return nil
		default:
		}
		_ = p.cmd.Process.Signal(s.Signal)
		if p.wait(s.Grace) {
			return nil
		}
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	_ = p.cmd.Process.Kill()
	<-p.exited
	if len(steps) == 0 {
		return nil
	}
	last := steps[len(steps)-1]
	return fmt.Errorf("%s did not exit within %s of %v: %w", filepath.Base(p.cmd.Path), last.Grace, last.Signal, ErrKilled)
}

// wait reports whether the child exits within d.
func (p *Process) wait(d time.Duration) bool {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C():
		return false
	}
}

// Tail is the end of the log file at path, at most n bytes and trimmed,
// for failure messages; "" when it cannot be read.
func Tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}
