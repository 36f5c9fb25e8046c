package control

import (
	"net/netip"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := newLimiter(sourcePrefix)
	now := time.Unix(1000, 0)
	a := netip.MustParseAddr("192.0.2.7")
	for i := range int(initBurst) {
		if !l.allow(a, now) {
			t.Fatalf("initiation %d of the burst refused", i)
		}
	}
	if l.allow(a, now) {
		t.Fatal("burst exceeded")
	}
	// Another host of the same /24 shares the bucket; another /24 does not.
	if l.allow(netip.MustParseAddr("192.0.2.99"), now) {
		t.Fatal("same /24 got a fresh bucket")
	}
	if !l.allow(netip.MustParseAddr("198.51.100.1"), now) {
		t.Fatal("other prefix refused")
	}
	// Refill at initRate per second.
	if !l.allow(a, now.Add(time.Second/time.Duration(initRate))) {
		t.Fatal("no token after one refill period")
	}
	// Memory stays bounded under a flood of sources.
	for i := range 3 * limiterLimit {
		b := [16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 16), byte(i >> 8), byte(i)}
		l.allow(netip.AddrFrom16(b), now)
	}
	if n := len(l.buckets); n > limiterLimit {
		t.Fatalf("%d buckets, bound %d", n, limiterLimit)
	}
}

// A proven limiter keys an IPv4 address itself (a neighbour in the same
// /24 has its own bucket; the IPv4-mapped form is the same address) and an
// IPv6 address's /64 (one host's privacy addresses share one bucket).
func TestProvenLimiterPerAddress(t *testing.T) {
	l := newLimiter(provenKey)
	now := time.Unix(1000, 0)
	a := netip.MustParseAddr("192.0.2.7")
	for range int(initBurst) {
		l.allow(a, now)
	}
	if l.allow(netip.MustParseAddr("::ffff:192.0.2.7"), now) {
		t.Fatal("the mapped form of a drained address got a fresh bucket")
	}
	for _, n := range []string{"192.0.2.8", "2001:db8:0:1::1"} {
		if !l.allow(netip.MustParseAddr(n), now) {
			t.Fatalf("%s shares a drained neighbour's bucket", n)
		}
	}
	v6 := netip.MustParseAddr("2001:db8::1")
	for range int(initBurst) {
		l.allow(v6, now)
	}
	if l.allow(netip.MustParseAddr("2001:db8::ffff"), now) {
		t.Fatal("another address of a drained /64 got a fresh bucket")
	}
}

// A full table first drops the buckets that refilled (they would come
// back full anyway), so a source that drained its bucket keeps it: a
// flood of new sources cannot hand it a fresh burst.
func TestLimiterEvictsRefilledFirst(t *testing.T) {
	l := newLimiter(sourcePrefix)
	t0 := time.Unix(1000, 0)
	for i := range limiterLimit {
		l.allow(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), t0) // one token each
	}
	t1 := t0.Add(time.Second) // every one of them refilled by now
	hot := netip.AddrFrom4([4]byte{10, 0, 0, 1})
	for range int(initBurst) {
		l.allow(hot, t1)
	}
	if !l.allow(netip.MustParseAddr("198.51.100.1"), t1) {
		t.Fatal("a new source refused")
	}
	if n := len(l.buckets); n != 2 {
		t.Fatalf("%d buckets after evicting the refilled ones, want the drained one and the new one", n)
	}
	if l.allow(hot, t1) {
		t.Fatal("the drained source got a fresh bucket")
	}
}
