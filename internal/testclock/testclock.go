// Package testclock is a clock that moves only when a test moves it: the
// control core's clock (control.Deps.Now) in tests that drive its timers,
// in package control and in the router's in-memory pair test alike.
package testclock

import (
	"sync"
	"time"
)

// Clock is safe for concurrent use: the core reads it on shard goroutines
// too.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock standing at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}
