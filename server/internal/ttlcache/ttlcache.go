// Package ttlcache holds one value read from a slow source (the Stacks node)
// for a time-to-live, shared by the status endpoint and the engine.
//
// Callers that find the value stale share one fetch. That fetch runs detached
// from whichever caller started it, under its own timeout: a client that
// hangs up, or one with a short deadline (a readiness probe), must not fail
// the callers waiting on the same fetch. Each caller waits only as long as its
// own context allows.
package ttlcache

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultFetchTimeout bounds a shared fetch when FetchTimeout is zero.
const DefaultFetchTimeout = 10 * time.Second

// Value caches one T. The zero Value is not usable: set TTL; Clock and
// FetchTimeout have defaults.
type Value[T any] struct {
	TTL          time.Duration
	FetchTimeout time.Duration
	// Clock dates the value; nil is the real clock.
	Clock clock.PassiveClock

	mu       sync.Mutex
	val      T
	ok       bool
	at       time.Time
	lastErr  error
	inflight *call[T]
}

// call is one shared fetch; done is closed when val and err are set.
type call[T any] struct {
	done chan struct{}
	val  T
	err  error
}

func (c *Value[T]) now() time.Time {
	if c.Clock != nil {
		return c.Clock.Now()
	}
	return clock.RealClock{}.Now()
}

// Get returns the cached value while it is fresh, else the result of a fetch
// shared with concurrent callers. A failed fetch is not cached.
func (c *Value[T]) Get(ctx context.Context, fetch func(context.Context) (T, error)) (T, error) {
	c.mu.Lock()
	if c.ok && c.now().Sub(c.at) < c.TTL {
		v := c.val
		c.mu.Unlock()
		return v, nil
	}
	cl := c.inflight
	if cl == nil {
		cl = &call[T]{done: make(chan struct{})}
		c.inflight = cl
		timeout := c.FetchTimeout
		if timeout <= 0 {
			timeout = DefaultFetchTimeout
		}
		// Detached: keeps ctx's values (loggers, trace ids) but not its
		// cancellation or deadline.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		go func() {
			defer cancel()
			v, err := fetch(fctx)
			c.mu.Lock()
			cl.val, cl.err = v, err
			c.lastErr = err
			if err == nil {
				c.val, c.ok, c.at = v, true, c.now()
			}
			if c.inflight == cl {
				c.inflight = nil
			}
			c.mu.Unlock()
			close(cl.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-cl.done:
		return cl.val, cl.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Set stores a value read elsewhere (the engine's poll loop).
func (c *Value[T]) Set(v T) {
	c.mu.Lock()
	c.val, c.ok, c.at, c.lastErr = v, true, c.now(), nil
	c.mu.Unlock()
}

// Fail records a failed read done elsewhere and ends the value's
// freshness: the source just failed to answer, so the value no longer
// stands for what it says now, and the next Get asks it again. Peek still
// returns the last good value.
func (c *Value[T]) Fail(err error) {
	c.mu.Lock()
	c.lastErr, c.ok = err, false
	c.mu.Unlock()
}

// Invalidate forgets the value's freshness, so the next Get fetches.
func (c *Value[T]) Invalidate() {
	c.mu.Lock()
	c.ok = false
	c.mu.Unlock()
}

// Peek returns the last good value, however old (the zero value if none).
func (c *Value[T]) Peek() T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val
}

// Fresh reports whether a good value is within its TTL.
func (c *Value[T]) Fresh() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok && c.now().Sub(c.at) < c.TTL
}

// LastErr is the error of the last read, nil after a success.
func (c *Value[T]) LastErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}
