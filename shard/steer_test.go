package shard

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/udp"
)

// fakeSteer is a lane map in memory: what udp.Steering would hold.
type fakeSteer struct {
	at     map[netip.AddrPort]*udp.Conn
	refuse bool // the map is full
}

func (f *fakeSteer) Steer(r netip.AddrPort, c *udp.Conn) bool {
	if f.refuse {
		return false
	}
	f.at[r] = c
	return true
}

func (f *fakeSteer) Unsteer(r netip.AddrPort, c *udp.Conn) {
	if cur, ok := f.at[r]; ok && cur == c {
		delete(f.at, r)
	}
}

// The map follows the lane: installed at its remote, moved when an
// authenticated datagram moves the lane, kept (not flickered) across a
// rekey at the same address, and gone with the peer.
func TestSteerFollowsLane(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	sb := b.shards[0]
	fs := &fakeSteer{at: map[netip.AddrPort]*udp.Conn{}}
	sb.cfg.Steer = fs
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	if _, ok := fs.at[addrA]; !ok || len(fs.at) != 1 {
		t.Fatalf("after install the map holds %v, want %v", slices.Collect(maps.Keys(fs.at)), addrA)
	}
	feed(sb, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	feed(sb, addrNew, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 2).data)
	if _, ok := fs.at[addrNew]; !ok || len(fs.at) != 1 {
		t.Fatalf("after the move the map holds %v, want only %v", slices.Collect(maps.Keys(fs.at)), addrNew)
	}
	// A forged datagram from elsewhere moves nothing.
	feed(sb, addrEvil, make([]byte, 200))
	if _, ok := fs.at[addrEvil]; ok {
		t.Fatal("garbage from a stranger entered the map")
	}
	sb.RemovePeer(1)
	if len(fs.at) != 0 {
		t.Fatalf("after the peer went the map holds %v", slices.Collect(maps.Keys(fs.at)))
	}
}

// Datagrams of a steered lane that arrive through another shard re-steer
// the lane's remote and leave the lane where it is; only a lane the map
// refused is reported misplaced (and moved by the router).
func TestSteeredLaneNotMisplaced(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
		sb := b.shards[0]
		fs := &fakeSteer{at: map[netip.AddrPort]*udp.Conn{}, refuse: refuse}
		sb.cfg.Steer = fs
		reports := 0
		sb.cfg.Misplaced = func(int, PeerID, int, int) { reports++ }
		connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
		ln := sb.ownedLane(1, 0)
		if ln == nil || ln.steered == refuse {
			t.Fatalf("refuse=%v: lane %v steered=%v", refuse, ln != nil, ln != nil && ln.steered)
		}
		delete(fs.at, addrA) // the entry was lost (a race with another shard)
		sb.misplaced(ln, 1)
		if want := map[bool]int{false: 0, true: 1}[refuse]; reports != want {
			t.Fatalf("refuse=%v: %d misplaced reports, want %d", refuse, reports, want)
		}
		if _, ok := fs.at[addrA]; ok == refuse {
			t.Fatalf("refuse=%v: after the hand-off the map holds the lane: %v", refuse, ok)
		}
	}
}
