package faucet

import (
	"context"
	"sync"
	"time"
)

// cached holds one value fetched from the node for ttl. Concurrent callers
// that find it stale share a single fetch; a failed fetch is not cached.
type cached[T any] struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	val     T
	ok      bool
	at      time.Time
	waiting chan struct{} // non-nil while a fetch is running
	lastErr error
}

func (c *cached[T]) get(ctx context.Context, fetch func(context.Context) (T, error)) (T, error) {
	for {
		c.mu.Lock()
		if c.ok && c.now().Sub(c.at) < c.ttl {
			v := c.val
			c.mu.Unlock()
			return v, nil
		}
		if wait := c.waiting; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				var zero T
				return zero, ctx.Err()
			}
			c.mu.Lock()
			fresh := c.ok && c.now().Sub(c.at) < c.ttl
			v, err := c.val, c.lastErr
			c.mu.Unlock()
			if fresh {
				return v, nil
			}
			if err != nil {
				var zero T
				return zero, err
			}
			continue
		}
		done := make(chan struct{})
		c.waiting = done
		c.mu.Unlock()

		v, err := fetch(ctx)
		c.mu.Lock()
		c.waiting = nil
		c.lastErr = err
		if err == nil {
			c.val, c.ok, c.at = v, true, c.now()
		}
		c.mu.Unlock()
		close(done)
		return v, err
	}
}

// set stores a value fetched elsewhere (the poll loop).
func (c *cached[T]) set(v T) {
	c.mu.Lock()
	c.val, c.ok, c.at, c.lastErr = v, true, c.now(), nil
	c.mu.Unlock()
}

// fail records a failed fetch done elsewhere, so callers stop trusting the
// value once its ttl runs out.
func (c *cached[T]) fail(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
}

// peek returns the last good value, however old (the zero value if none).
func (c *cached[T]) peek() T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val
}

// fresh reports whether a good value is within its ttl.
func (c *cached[T]) fresh() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok && c.now().Sub(c.at) < c.ttl
}
