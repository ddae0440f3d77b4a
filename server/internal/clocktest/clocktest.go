// Package clocktest is a clock that tests move by hand, for code that takes
// a `now func() time.Time`.
package clocktest

import (
	"sync"
	"time"
)

// Manual is a clock that stands still until Advance. Safe for concurrent use.
type Manual struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock at a fixed, arbitrary instant.
func New() *Manual { return &Manual{t: time.Unix(1_700_000_000, 0)} }

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
