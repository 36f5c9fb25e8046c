package control

// The known-address set: the addresses peers are known at, which the
// cookie path trusts and the data plane gives a queue of its own.

import (
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The known-address set counts the peers in each slot that holds an
// address (peers behind one NAT share it): it stays known until the last
// one lets it go.
func TestKnownAddressesCountPeers(t *testing.T) {
	plane := newFakePlane(1)
	r := &Core{knownRefs: map[netip.Addr]int{}, dp: plane}
	// The data plane's known set is the core's.
	known := func(a string) bool {
		_, ok := r.known.Load(netip.MustParseAddr(a))
		if plane.isKnown(netip.MustParseAddr(a)) != ok {
			t.Fatalf("%s: known to the core %v, not to the data plane", a, ok)
		}
		return ok
	}
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.1")
	p1, p2 := &peer{}, &peer{}
	r.setKnown(p1, knownConfigured, a)
	r.setKnown(p2, knownProven, a)
	if !known("192.0.2.1") {
		t.Fatal("address not known")
	}
	r.setKnown(p1, knownConfigured, b)
	if !known("192.0.2.1") || !known("198.51.100.1") {
		t.Fatal("a shared address was forgotten while a peer still has it")
	}
	r.setKnown(p2, knownProven, netip.Addr{})
	if known("192.0.2.1") || !known("198.51.100.1") {
		t.Fatal("an address no peer has is still known")
	}
	r.setKnown(p1, knownProven, b) // the same address in both slots
	r.setKnown(p1, knownConfigured, netip.Addr{})
	if !known("198.51.100.1") || r.knownRefs[b] != 1 {
		t.Fatalf("refs %v", r.knownRefs)
	}
}

// A change of the known set the data plane refused (its map full) is
// tried again by the timers until it is taken, and one that is no longer
// wanted is not forced on it.
func TestKnownRetriedWhenRefused(t *testing.T) {
	plane := newFakePlane(1)
	r := &Core{knownRefs: map[netip.Addr]int{}, dp: plane, log: zap.NewNop()}
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.1")
	p := &peer{}
	plane.refuseKnown = true
	r.setKnown(p, knownConfigured, a)
	r.timersLocked(time.Now())
	if plane.isKnown(a) || len(r.knownRetry) != 1 {
		t.Fatalf("refused: plane %v, retries %v", plane.known, r.knownRetry)
	}
	plane.refuseKnown = false
	r.timersLocked(time.Now())
	if !plane.isKnown(a) || len(r.knownRetry) != 0 {
		t.Fatalf("after the retry: plane %v, retries %v", plane.known, r.knownRetry)
	}
	// Refused again, then the address goes before the retry: the retry
	// takes the latest wish (forget), and the plane ends as the set.
	plane.refuseKnown = true
	r.setKnown(p, knownConfigured, b) // forget a, learn b: both refused
	plane.refuseKnown = false
	r.setKnown(p, knownConfigured, netip.Addr{}) // forget b: taken
	r.timersLocked(time.Now())
	if plane.isKnown(a) || plane.isKnown(b) || len(r.knownRetry) != 0 {
		t.Fatalf("plane %v, retries %v: want neither address", plane.known, r.knownRetry)
	}
}

// Only proven addresses are known (their initiations get cookie replies
// past the cap): the configured Endpoint, an initiator's response from
// where it asked, and a responder's initiation source once the first
// datagram under the new keys says our response reached it. An
// initiation's source alone is not: anyone can put any source on an
// initiation, and a peer on one of its own.
func TestKnownAddressesAreProven(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	// The core's set and the data plane's (the known sockets' map) agree.
	knownAt := func(m *memCore, a netip.AddrPort) bool {
		t.Helper()
		_, ok := m.known.Load(a.Addr())
		if m.plane.isKnown(a.Addr()) != ok {
			t.Fatalf("%v: known to the core %v, to the data plane %v", a.Addr(), ok, !ok)
		}
		return ok
	}
	if !knownAt(ini, resp.addr) {
		t.Fatal("the configured endpoint is not known")
	}
	handshake(t, ini, resp)
	p := resp.peerOf(t)
	if knownAt(resp, ini.addr) {
		t.Fatal("an initiation's source became known before the peer proved it receives there")
	}
	resp.LaneConfirmed(0, p.id+7, 0, ini.addr) // a stale event: no such peer
	resp.Step()
	if knownAt(resp, ini.addr) {
		t.Fatal("a stale confirmation made the address known")
	}
	resp.LaneConfirmed(0, p.id, 0, ini.addr)
	resp.Step()
	if !knownAt(resp, ini.addr) {
		t.Fatal("the confirmed address is not known")
	}
	// A later session proven elsewhere replaces it; removing the peer
	// forgets every address it had.
	elsewhere := netip.MustParseAddrPort("203.0.113.8:40000")
	resp.LaneConfirmed(0, p.id, 0, elsewhere)
	resp.Step()
	if knownAt(resp, ini.addr) || !knownAt(resp, elsewhere) {
		t.Fatal("the known address did not follow the latest proof")
	}
	if err := resp.SetPeers(nil); err != nil {
		t.Fatal(err)
	}
	if knownAt(resp, elsewhere) || len(resp.knownRefs) != 0 {
		t.Fatalf("a removed peer's addresses are still known: %v", resp.knownRefs)
	}
	if err := ini.SetPeers(nil); err != nil {
		t.Fatal(err)
	}
	if knownAt(ini, resp.addr) {
		t.Fatal("a removed peer's configured endpoint is still known")
	}
}
