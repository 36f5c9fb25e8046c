package control

import (
	"sync/atomic"
	"time"
)

// perSecond counts events in the current second, shared by the shards'
// goroutines without a lock: the initiations (underLoad), those refused
// after their DH, and the cookie replies to unknown sources
// (replyAllowed) each keep one.
type perSecond struct {
	slot atomic.Int64 // the second counted (Unix time)
	n    atomic.Uint64
}

// add counts one event at now and returns the second's count with it.
func (p *perSecond) add(now time.Time) uint64 {
	p.advance(now)
	return p.n.Add(1)
}

// count is the count of now's second.
func (p *perSecond) count(now time.Time) uint64 {
	p.advance(now)
	return p.n.Load()
}

// set makes n the count of now's second (tests).
func (p *perSecond) set(now time.Time, n uint64) {
	p.slot.Store(now.Unix())
	p.n.Store(n)
}

// advance moves the slot forward to now's second and resets the count if
// this caller moved it. A shard whose clock reading is a moment older
// never moves it back: that reset the count, letting more initiations
// through than the threshold.
func (p *perSecond) advance(now time.Time) {
	slot := now.Unix()
	for {
		old := p.slot.Load()
		if slot <= old {
			return
		}
		if p.slot.CompareAndSwap(old, slot) {
			p.n.Store(0)
			return
		}
	}
}
