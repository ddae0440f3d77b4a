package launch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stxfaucet/faucet-operator/hack/eventually"
)

func TestBackoffNext(t *testing.T) {
	b := Backoff{Initial: 500 * time.Millisecond, Max: 10 * time.Second, Reset: time.Minute}
	for _, tc := range []struct {
		prev, ran, want time.Duration
	}{
		{0, 0, 500 * time.Millisecond},                                            // the first restart
		{500 * time.Millisecond, time.Second, time.Second},                        // failing again soon: doubled
		{time.Second, 0, 2 * time.Second},                                         // a failed start counts too
		{8 * time.Second, time.Second, 10 * time.Second},                          // capped
		{10 * time.Second, 59 * time.Second, 10 * time.Second},                    // still capped
		{10 * time.Second, time.Minute, 500 * time.Millisecond},                   // up a while: starts over
		{4 * time.Second, time.Hour, 500 * time.Millisecond},                      // up long: starts over
		{500 * time.Millisecond, 59 * time.Second, 1 * time.Second},               // not quite long enough
		{0, time.Hour, 500 * time.Millisecond},                                    // the first restart, after long
		{9 * time.Second, 0, 10 * time.Second},                                    // doubling past the cap
		{10 * time.Second, 0, 10 * time.Second},                                   // at the cap
		{750 * time.Millisecond, 100 * time.Millisecond, 1500 * time.Millisecond}, // any prev doubles
	} {
		if got := b.Next(tc.prev, tc.ran); got != tc.want {
			t.Errorf("Next(%s, ran %s) = %s, want %s", tc.prev, tc.ran, got, tc.want)
		}
	}
	for _, bad := range []Backoff{{Initial: time.Second, Max: time.Millisecond, Reset: time.Minute}, {Max: time.Second, Reset: time.Minute},
		{Initial: time.Second, Max: time.Second}} {
		if _, err := Supervise(SuperviseConfig{Name: "x", Start: func() (*Process, error) { t.Fatal("started"); return nil, nil }, Backoff: bad}); err == nil {
			t.Errorf("Supervise accepted back-off %+v", bad)
		}
	}
}

// sleeper starts `sleep 600` children on a fake clock, counting the starts
// and failing those fail says to.
type sleeper struct {
	t      *testing.T
	clk    *clocktesting.FakeClock
	log    syncLog
	starts atomic.Int32
	fail   atomic.Bool
	mu     sync.Mutex
	pids   []int
}

func newSleeper(t *testing.T) *sleeper {
	return &sleeper{t: t, clk: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))}
}

func (s *sleeper) start() (*Process, error) {
	s.starts.Add(1)
	if s.fail.Load() {
		return nil, errors.New("no room")
	}
	p, err := Start(exec.Command("sleep", "600"), Config{Clock: s.clk})
	if err == nil {
		s.mu.Lock()
		s.pids = append(s.pids, p.Pid())
		s.mu.Unlock()
		s.t.Cleanup(func() { _ = syscall.Kill(p.Pid(), syscall.SIGKILL) })
	}
	return p, err
}

func (s *sleeper) supervise() *Supervisor {
	s.t.Helper()
	sup, err := Supervise(SuperviseConfig{Name: "sleep", Start: s.start, Clock: s.clk,
		Stop:    []Step{{Signal: syscall.SIGTERM, Grace: time.Hour}},
		Backoff: Backoff{Initial: 500 * time.Millisecond, Max: 2 * time.Second, Reset: time.Minute},
		Logger:  slog.New(slog.NewTextHandler(&s.log, nil))})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = sup.Stop() })
	return sup
}

// kill SIGKILLs the running child and waits until the supervisor waits out
// its back-off on the clock.
func (s *sleeper) kill(sup *Supervisor) {
	s.t.Helper()
	p := sup.Process()
	if err := syscall.Kill(p.Pid(), syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	<-p.Exited()
	eventually.True(s.t, 10*time.Second, "the supervisor waits on the clock", s.clk.HasWaiters)
}

// restartsAfter steps the clock to just short of want, checks that nothing
// started, then steps the rest and waits for the restart.
func (s *sleeper) restartsAfter(sup *Supervisor, want time.Duration) {
	s.t.Helper()
	before, restarts := s.starts.Load(), sup.Restarts()
	s.clk.Step(want - time.Millisecond)
	if !s.clk.HasWaiters() || s.starts.Load() != before {
		s.t.Fatalf("restarted before %s", want)
	}
	s.clk.Step(time.Millisecond)
	logged := "restarts=" + strconv.Itoa(restarts+1) + " after=" + want.String() + "\n"
	eventually.True(s.t, 10*time.Second, "a restart after "+want.String(), func() bool {
		return s.starts.Load() == before+1 && strings.Contains(s.log.String(), logged)
	})
}

// A child that exits is started again: after Initial, twice that while it
// keeps exiting, capped at Max, and after Initial again once it stayed up
// for Reset. Each exit and restart is logged, with how the child ended
// and how long it ran.
func TestSuperviseRestartsWithBackoff(t *testing.T) {
	s := newSleeper(t)
	sup := s.supervise()
	first := sup.Process().Pid()

	s.kill(sup)
	s.restartsAfter(sup, 500*time.Millisecond)
	s.kill(sup)
	s.restartsAfter(sup, time.Second)
	s.kill(sup)
	s.restartsAfter(sup, 2*time.Second)
	s.kill(sup)
	s.restartsAfter(sup, 2*time.Second) // capped
	s.clk.Step(time.Minute)             // up a while
	s.kill(sup)
	s.restartsAfter(sup, 500*time.Millisecond)

	if got := sup.Restarts(); got != 5 {
		t.Errorf("Restarts = %d, want 5", got)
	}
	if p := sup.Process().Pid(); p == first || gone(p) {
		t.Errorf("the current child %d: the first was %d; gone: %v", p, first, gone(p))
	}
	out := s.log.String()
	for _, want := range []string{
		`level=WARN msg="sleep exited; starting it again" child=sleep pid=` + strconv.Itoa(first) + ` status="signal: killed" ran=0s restart_in=500ms`,
		`status="signal: killed" ran=1m0s restart_in=500ms`,
		`level=WARN msg="sleep started again" child=sleep pid=`,
		`restarts=5 after=500ms`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// A start that fails is retried after a longer wait.
func TestSuperviseRetriesFailedStart(t *testing.T) {
	s := newSleeper(t)
	sup := s.supervise()
	s.fail.Store(true)
	s.kill(sup)
	s.clk.Step(500 * time.Millisecond)
	eventually.True(t, 10*time.Second, "the failed start backs off", func() bool { return s.starts.Load() == 2 && s.clk.HasWaiters() })
	s.fail.Store(false)
	s.restartsAfter(sup, time.Second)
	if sup.Restarts() != 1 || gone(sup.Process().Pid()) {
		t.Fatalf("Restarts = %d, child running: %v", sup.Restarts(), !gone(sup.Process().Pid()))
	}
	if !strings.Contains(s.log.String(), `msg="sleep failed to start again; retrying" child=sleep err="no room" retry_in=1s`) {
		t.Errorf("log:\n%s", s.log.String())
	}
}

// Stop ends the child and never starts another, whether the child is
// running or a restart is pending.
func TestSuperviseStopNeverRestarts(t *testing.T) {
	t.Run("running", func(t *testing.T) {
		s := newSleeper(t)
		sup := s.supervise()
		pid := sup.Process().Pid()
		if err := sup.Stop(); err != nil {
			t.Fatal(err)
		}
		if !gone(pid) {
			t.Fatalf("child %d still running after Stop", pid)
		}
		s.clk.Step(time.Hour)
		if s.starts.Load() != 1 || s.clk.HasWaiters() {
			t.Fatalf("%d starts after Stop; clock waiters: %v", s.starts.Load(), s.clk.HasWaiters())
		}
		if err := sup.Stop(); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
	})
	t.Run("pending restart", func(t *testing.T) {
		s := newSleeper(t)
		sup := s.supervise()
		s.kill(sup)
		// No clock step: Stop does not wait out the back-off.
		if err := sup.Stop(); err != nil {
			t.Fatal(err)
		}
		s.clk.Step(time.Hour)
		if s.starts.Load() != 1 {
			t.Fatalf("%d starts after Stop", s.starts.Load())
		}
	})
}

// Up runs after every start, Down after every exit; a first start whose
// Up fails is an error, with the child stopped.
func TestSuperviseUpAndDown(t *testing.T) {
	s := newSleeper(t)
	var ups, downs atomic.Int32
	sup, err := Supervise(SuperviseConfig{Name: "sleep", Start: s.start, Clock: s.clk, Logger: slog.New(slog.NewTextHandler(&s.log, nil)),
		Up:   func(context.Context, *Process) error { ups.Add(1); return nil },
		Down: func() { downs.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sup.Stop() })
	s.kill(sup)
	if ups.Load() != 1 || downs.Load() != 1 {
		t.Fatalf("after the first exit: %d ups, %d downs", ups.Load(), downs.Load())
	}
	s.restartsAfter(sup, DefaultBackoff.Initial)
	if ups.Load() != 2 {
		t.Fatalf("%d ups after the restart", ups.Load())
	}

	boom := errors.New("boom")
	_, err = Supervise(SuperviseConfig{Name: "sleep", Start: s.start, Clock: s.clk,
		Up: func(context.Context, *Process) error { return boom }})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "launch sleep: ") {
		t.Fatalf("Supervise with a failing Up: %v", err)
	}
	s.mu.Lock()
	last := s.pids[len(s.pids)-1]
	s.mu.Unlock()
	eventually.True(t, 10*time.Second, "the child that did not come up is stopped", func() bool { return gone(last) })
}

// syncLog lets the supervising goroutine log while the test reads.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
