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

// limiter is a token bucket per source key, refilled at initRate per
// second up to initBurst. The key is a prefix: for unproven sources the
// subnet (/24 for IPv4, /64 for IPv6: sourcePrefix), so one host cannot
// dodge it by rotating spoofed addresses; for proven sources (a valid
// mac2: a cookie proves one address) the IPv4 address itself, or the IPv6
// /64 (one host usually holds a whole /64: its privacy addresses must not
// each get a bucket), as WireGuard keys its limiter (provenKey), so a
// neighbour in a peer's IPv4 subnet cannot spend the peer's tokens. The table is
// bounded: when full, the buckets that refilled are dropped, then, if
// that is not half, buckets in map order until it is (evict; a dropped
// bucket comes back full, so a drained source that is dropped regains its
// burst), and a flood of sources costs memory only up to the bound.
type limiter struct {
	mu      sync.Mutex
	key     func(netip.Addr) netip.Prefix
	buckets map[netip.Prefix]*bucket
}

func newLimiter(key func(netip.Addr) netip.Prefix) *limiter {
	return &limiter{key: key, buckets: map[netip.Prefix]*bucket{}}
}

// sourcePrefix is an unproven source's key: its subnet.
func sourcePrefix(a netip.Addr) netip.Prefix { return subnet(a, 24) }

// provenKey is a proven source's key: an IPv4 address itself, an IPv6
// address's /64.
func provenKey(a netip.Addr) netip.Prefix { return subnet(a, 32) }

// subnet is a's IPv4 prefix of v4Bits (a mapped address counts as IPv4),
// or its IPv6 /64: both limiters treat an IPv6 /64 as one host.
func subnet(a netip.Addr, v4Bits int) netip.Prefix {
	a = a.Unmap()
	bits := v4Bits
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// allow takes a token for src's key, reporting false when it has none.
func (l *limiter) allow(src netip.Addr, now time.Time) bool {
	key := l.key(src)
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
