package control

import (
	"net/netip"
	"sync"
	"time"
)

// bucket is a token bucket (take refills it).
type bucket struct {
	tokens float64
	last   time.Time
}

// limiter is a token bucket per source prefix (/24 for IPv4, /64 for
// IPv6, so one host cannot dodge it by rotating addresses in its subnet),
// refilled at initRate per second up to initBurst. The table is bounded:
// when full, the idlest half is dropped, so a flood of sources costs memory
// only up to the bound.
type limiter struct {
	mu      sync.Mutex
	buckets map[netip.Prefix]*bucket
}

func newLimiter() *limiter { return &limiter{buckets: map[netip.Prefix]*bucket{}} }

func sourcePrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 24
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// allow takes a token for src's prefix, reporting false when it has none.
func (l *limiter) allow(src netip.Addr, now time.Time) bool {
	key := sourcePrefix(src)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		if len(l.buckets) >= limiterLimit {
			l.evict(now)
		}
		b = &bucket{tokens: initBurst, last: now}
		l.buckets[key] = b
	}
	return b.take(now, initRate, initBurst)
}

// take refills b at rate tokens per second up to burst and takes a token,
// reporting false when it has none.
func (b *bucket) take(now time.Time, rate, burst float64) bool {
	b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// evict drops buckets that are full again (idle long enough to have
// refilled) and, if that is not enough, half of the rest.
func (l *limiter) evict(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+now.Sub(b.last).Seconds()*initRate >= initBurst {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) < limiterLimit/2 {
			break
		}
		delete(l.buckets, k)
	}
}
