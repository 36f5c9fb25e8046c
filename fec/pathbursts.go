// What a peer's lanes share of their path: the loss bursts one of them
// measured, which the others predict with until they measure their own.

package fec

import (
	"sync"
	"time"
)

// PathBursts is the mean wire burst the latest sample of any of a peer's
// lanes set its estimate to (Adapter.Sampled), whether it only bounds
// them from above (a queue's runs lowered the estimate), and when. Every
// change goes here, lowered or not: one lane's overshoot read as bursts
// that its own queued reports then took down must not stand for the
// others (a BBR flow borrowed bursts of 7.85 so, and paid 97:36 x2 for
// its whole run). The lanes cross the
// same path, whose bursts are its links', so a lane that starts carrying
// a flow need not assume bursts for its first seconds when another lane
// has just measured them: a BBR flow hashed to a lane that had carried
// only pings paid 48:13 x4 (21% of its datagrams) for three and a half
// seconds after a CUBIC flow on the other lane had measured the channel's
// loss independent, and the parity held the bottleneck's queue full.
// The shards' goroutines share it: each lane's adapter reads and writes
// it once per loss report of the peer's, under a mutex.
type PathBursts struct {
	mu    sync.Mutex
	burst float64
	bound bool
	at    time.Time
}

// sharedBurstAge is how long a lane's measured burst stands for the
// others: a lane at a few hundred packets a second, losing 1%, measures
// anew every ten seconds or so, and a path's loss process (its links'
// technology) changes more slowly than flows come and go.
const sharedBurstAge = 30 * time.Second

// Note records burst b (bound: a bound from above), set at now. A nil
// PathBursts ignores it.
func (s *PathBursts) Note(b float64, bound bool, now time.Time) {
	if s == nil || !(b > 0) {
		return
	}
	s.mu.Lock()
	s.burst, s.bound, s.at = b, bound, now
	s.mu.Unlock()
}

// Recent is the burst noted last, if that was after since (the asking
// lane's path began: what its old path measured says nothing of its new
// one) and within sharedBurstAge of now.
func (s *PathBursts) Recent(now, since time.Time) (b float64, bound, ok bool) {
	if s == nil {
		return 0, false, false
	}
	s.mu.Lock()
	b, bound, at := s.burst, s.bound, s.at
	s.mu.Unlock()
	if b == 0 || at.Before(since) || now.Sub(at) > sharedBurstAge {
		return 0, false, false
	}
	return b, bound, true
}
