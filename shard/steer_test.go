package shard

import (
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/udp"
)

// fakeSteer is a lane map in memory: what udp.Steering would hold.
type fakeSteer struct {
	at       map[netip.AddrPort]*udp.Conn
	full     bool                // the map has no room
	members  map[*udp.Conn]bool  // the group's sockets; nil: every socket
	unsteers int                 // entries removed
	known    map[netip.Addr]bool // SetKnown
}

func (f *fakeSteer) Steer(r netip.AddrPort, c *udp.Conn, proven bool) udp.SteerResult {
	if f.members != nil && !f.members[c] {
		return udp.NotMember
	}
	cur, ok := f.at[r]
	switch {
	case ok && cur == c:
		return udp.Steered
	case ok && !proven:
		return udp.Taken
	case !ok && f.full: // a full hash map still replaces an existing key
		return udp.Full
	}
	f.at[r] = c
	return udp.Steered
}

func (f *fakeSteer) SetKnown(a netip.Addr, known bool) error {
	if f.known == nil {
		f.known = map[netip.Addr]bool{}
	}
	if known {
		f.known[a] = true
	} else {
		delete(f.known, a)
	}
	return nil
}

func (f *fakeSteer) Unsteer(r netip.AddrPort, c *udp.Conn) {
	if cur, ok := f.at[r]; ok && cur == c {
		delete(f.at, r)
		f.unsteers++
	}
}

// steeredSides is a one-shard side a and a side b of bShards whose shard 0
// keeps its lanes' steering in fs; connectNow connects them (a test that
// must seed fs or the clock first connects itself).
func steeredSides(t *testing.T, bShards int, fs *fakeSteer, connectNow bool) (a, b *side, sb *Shard) {
	t.Helper()
	a, b = newSide(t, 1, routesA), newSide(t, bShards, routesB)
	checkAtEnd(t, a, b)
	sb = b.shards[0]
	fs.at = map[netip.AddrPort]*udp.Conn{}
	sb.cfg.Steer = fs
	if connectNow {
		connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	}
	return a, b, sb
}

// The map follows the lane: installed at its remote, moved when an
// authenticated datagram moves the lane, kept (not flickered) across a
// rekey at the same address, and gone with the peer.
func TestSteerFollowsLane(t *testing.T) {
	fs := &fakeSteer{}
	a, _, sb := steeredSides(t, 1, fs, true)
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

// Datagrams of a lane that arrive through another shard steer the lane's
// remote to its socket, with proof, and leave the lane where it is; a lane
// the map refused, or one that keeps arriving elsewhere although steered
// for a while (the program cannot read its datagrams' address), is
// reported misplaced (and moved by the router). A full map is counted once
// per lane.
func TestSteeredLaneNotMisplaced(t *testing.T) {
	for _, full := range []bool{false, true} {
		fs := &fakeSteer{full: full}
		a, b, sb := steeredSides(t, 1, fs, false)
		reports := 0
		sb.cfg.Misplaced = func(int, PeerID, int, int) { reports++ }
		sb.now = time.Now()
		connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
		ln := sb.ownedLane(1, 0)
		if ln == nil || ln.steered == full {
			t.Fatalf("full=%v: lane %v steered=%v", full, ln != nil, ln != nil && ln.steered)
		}
		// The entry is lost (a race with another shard) or was never
		// made: a datagram proves the lane through shard 1.
		delete(fs.at, addrA)
		ln.steered = false
		sb.misplaced(ln, 1)
		if want := map[bool]int{false: 0, true: 1}[full]; reports != want {
			t.Fatalf("full=%v: %d misplaced reports, want %d", full, reports, want)
		}
		if _, ok := fs.at[addrA]; ok == full {
			t.Fatalf("full=%v: after the hand-off the map holds the lane: %v", full, ok)
		}
		sb.misplaced(ln, 1) // within a second: nothing new
		sb.now = sb.now.Add(2 * misplacedEvery)
		sb.misplaced(ln, 1) // steered long ago and still handed over
		if want := map[bool]int{false: 1, true: 2}[full]; reports != want {
			t.Fatalf("full=%v: %d misplaced reports after the program missed, want %d", full, reports, want)
		}
		sb.publish()
		if sn := sb.Snapshot(); sn.Get(SteerRefused) != map[bool]uint64{false: 0, true: 1}[full] {
			t.Fatalf("full=%v: steer_refused %d", full, sn.Get(SteerRefused))
		}
	}
}

// A handshake's source address does not take another shard's entry: a
// second peer's lane installed at the address the first peer's lane holds
// (on another shard, which this one cannot see) stays unsteered.
func TestSteerUnprovenInstallKeepsOthersEntry(t *testing.T) {
	fs := &fakeSteer{}
	a, b, sb := steeredSides(t, 2, fs, false)
	other := new(udp.Conn) // shard 1's group socket, holding addrA
	fs.at[addrA] = other
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	if fs.at[addrA] != other {
		t.Fatal("an unproven install took another socket's entry")
	}
	if ln := sb.ownedLane(1, 0); ln == nil || ln.steered {
		t.Fatalf("lane steered=%v, want not steered", ln != nil && ln.steered)
	}
}

// Behind a NAT the lane keeps the port its datagrams proved across a
// rekey; the offered address the router steered before the response
// (Group.InstallSession) is taken out again, so nothing is left in the map once
// the peer goes.
func TestSteerRekeyBehindNATLeavesNoEntry(t *testing.T) {
	fs := &fakeSteer{}
	a, b, sb := steeredSides(t, 1, fs, true)
	// The NAT's port: the lane moves there.
	feed(sb, addrNew, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	if _, ok := fs.at[addrNew]; !ok || len(fs.at) != 1 {
		t.Fatalf("after the proof the map holds %v", slices.Collect(maps.Keys(fs.at)))
	}
	fs.at[addrA] = nil // the group's early claim of the offered address
	connectHold(t, a, b, fec.EncoderConfig{K: 4, R: 0}, true)
	if ln := sb.ownedLane(1, 0); ln == nil || ln.cfg.Remote != addrNew {
		t.Fatalf("after the rekey the lane is at %v, want the NAT's %v", ln.cfg.Remote, addrNew)
	}
	if _, ok := fs.at[addrA]; ok {
		t.Fatal("the offered address stayed in the map")
	}
	sb.RemovePeer(1)
	if len(fs.at) != 0 {
		t.Fatalf("after the peer went the map holds %v", slices.Collect(maps.Keys(fs.at)))
	}
}

// The router steers a responder's lane before the shard installs it; if
// the shard then refuses the lane the address (another peer's lane on
// another shard holds it: a hand-over entry here), the early entry goes.
func TestSteerEarlyDroppedWhenInstallRefused(t *testing.T) {
	fs := &fakeSteer{}
	_, _, sb := steeredSides(t, 2, fs, false)
	shared := netip.MustParseAddrPort("192.0.2.50:40000")
	sb.SetLaneOwner(3, 1, 0, 1, shared, nil)       // peer 3's lane, on shard 1, unsteered
	fs.Steer(shared, sb.table.groupConn(0), false) // the group's early claim for peer 1's lane
	var k1, k2 [32]byte
	k1[0] = 9
	keys := crypto.NewSessionKeys(k1, k2, false)
	if err := sb.InstallLane(LaneConfig{Peer: 1, Index: 0, Lanes: 1, Remote: shared, Send: keys.SendLane(0), Recv: keys.RecvLane(0), FEC: fec.EncoderConfig{K: 4}}); err != nil {
		t.Fatal(err)
	}
	if sb.table.laneAt(shared) != nil {
		t.Fatal("an unproven install took an address another peer's lane holds")
	}
	if _, ok := fs.at[shared]; ok {
		t.Fatal("the early steer stayed in the map, leading to a lane that is not there")
	}
}
