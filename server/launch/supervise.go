package launch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Supervision: a child that must stay up (the devnet's btcd) is started
// again when it exits on its own, after a wait that grows while it keeps
// failing and starts over once it has stayed up a while. Stopping on
// purpose ends the supervision before the child, so a child being
// stopped is never started again.

// Backoff is a restart policy: the first restart waits Initial, each
// further one twice the last, up to Max; a child that ran for Reset or
// longer was healthy, and its restart waits Initial again.
type Backoff struct {
	Initial, Max, Reset time.Duration
}

// DefaultBackoff waits half a second, doubling up to ten, and starts over
// after a minute up.
var DefaultBackoff = Backoff{Initial: 500 * time.Millisecond, Max: 10 * time.Second, Reset: time.Minute}

// Next is the wait before starting again a child that ran for ran, after
// a wait of prev before its own start (0: it was the first start).
func (b Backoff) Next(prev, ran time.Duration) time.Duration {
	if prev <= 0 || ran >= b.Reset {
		return b.Initial
	}
	return min(2*prev, b.Max)
}

func (b Backoff) validate() error {
	if b.Initial <= 0 || b.Max < b.Initial || b.Reset <= 0 {
		return fmt.Errorf("back-off %+v: want 0 < Initial <= Max and Reset > 0", b)
	}
	return nil
}

// SuperviseConfig says how to start a child and keep it up.
type SuperviseConfig struct {
	// Name names the child in logs and errors ("btcd").
	Name string
	// Start starts a fresh child: at first and for every restart, so it
	// prepares a new exec.Cmd each time (one cannot be started twice).
	Start func() (*Process, error)
	// Up, if set, runs after each start until the child is of use (its
	// RPC answers, its state is restored). An error counts as a failed
	// start: the child is stopped and started again after the back-off.
	// ctx ends when the supervision is stopped.
	Up func(ctx context.Context, p *Process) error
	// Down, if set, runs as soon as the child has exited on its own,
	// before the back-off wait.
	Down func()
	// Stop is how Supervisor.Stop, and a failed Up, stop a child.
	Stop []Step
	// Backoff paces the restarts; the zero value means DefaultBackoff.
	Backoff Backoff
	// Clock times the back-off and how long a child ran; nil means
	// clock.RealClock{}.
	Clock clock.WithTicker
	// Logger gets a warning for each exit and each restart; nil discards.
	Logger *slog.Logger
}

// Supervisor keeps a child up until Stop. Its methods are safe for
// concurrent use.
type Supervisor struct {
	cfg    SuperviseConfig
	ctx    context.Context // ends with Stop
	cancel context.CancelFunc
	done   chan struct{} // closed when the supervising goroutine has returned

	mu       sync.Mutex
	cur      *Process // the last child started; never nil
	restarts int

	stopOnce sync.Once
	stopErr  error
}

// Supervise starts the child, waits for it to be up, and keeps it up: when
// it exits on its own it is started again after cfg.Backoff. A first
// start that fails is returned, with the child stopped, and nothing is
// supervised.
func Supervise(cfg SuperviseConfig) (*Supervisor, error) {
	if cfg.Start == nil {
		return nil, errors.New("launch: Supervise needs a Start function")
	}
	if cfg.Backoff == (Backoff{}) {
		cfg.Backoff = DefaultBackoff
	}
	if err := cfg.Backoff.validate(); err != nil {
		return nil, fmt.Errorf("launch %s: %w", cfg.Name, err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Supervisor{cfg: cfg, done: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	p, at, err := s.start()
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("launch %s: %w", cfg.Name, err)
	}
	go s.run(p, at)
	return s, nil
}

// Process is the child last started: the running one, or while a restart
// is pending the one that exited.
func (s *Supervisor) Process() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Restarts is how many times the child has been started again.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Stop ends the supervision, waiting for a restart under way to finish or
// give up, then stops the child with cfg.Stop; it is not started again.
// Safe to call more than once: later calls return the first one's error.
func (s *Supervisor) Stop() error {
	s.stopOnce.Do(func() {
		s.cancel()
		<-s.done
		s.stopErr = s.Process().Stop(s.cfg.Stop...)
	})
	return s.stopErr
}

// start starts a child and waits for it to be up; one that does not come
// up is stopped.
func (s *Supervisor) start() (*Process, time.Time, error) {
	p, err := s.cfg.Start()
	if err != nil {
		return nil, time.Time{}, err
	}
	at := s.cfg.Clock.Now()
	s.mu.Lock()
	s.cur = p
	s.mu.Unlock()
	if s.cfg.Up != nil {
		if err := s.cfg.Up(s.ctx, p); err != nil {
			_ = p.Stop(s.cfg.Stop...)
			return nil, at, err
		}
	}
	return p, at, nil
}

// run waits for the child p, started at at, to exit, and starts it again,
// until Stop.
func (s *Supervisor) run(p *Process, at time.Time) {
	defer close(s.done)
	log := s.cfg.Logger.With("child", s.cfg.Name)
	var wait time.Duration
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-p.Exited():
		}
		if s.ctx.Err() != nil {
			return // it exited as it was being stopped
		}
		ran := s.cfg.Clock.Since(at)
		if s.cfg.Down != nil {
			s.cfg.Down()
		}
		wait = s.cfg.Backoff.Next(wait, ran)
		log.Warn(s.cfg.Name+" exited; starting it again", "pid", p.Pid(), "status", exitStatus(p.Err()),
			"ran", ran.Round(time.Millisecond), "restart_in", wait)
		for {
			if !s.sleep(wait) {
				return
			}
			var err error
			if p, at, err = s.start(); err == nil {
				break
			}
			if s.ctx.Err() != nil {
				return
			}
			wait = s.cfg.Backoff.Next(wait, 0)
			log.Warn(s.cfg.Name+" failed to start again; retrying", "err", err, "retry_in", wait)
		}
		s.mu.Lock()
		s.restarts++
		n := s.restarts
		s.mu.Unlock()
		log.Warn(s.cfg.Name+" started again", "pid", p.Pid(), "restarts", n, "after", wait)
	}
}

// sleep waits d on the clock; false when Stop came first.
func (s *Supervisor) sleep(d time.Duration) bool {
	t := s.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// exitStatus is how a child ended, for the log: "exit status 1",
// "signal: killed".
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
