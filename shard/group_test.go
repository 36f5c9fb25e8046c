package shard

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/udp"
)

// groupSide is a group of n shards over sockets that never reach the
// kernel (what they send is counted per shard and socket), with fs as its
// steering map (nil: steered by port), and the group's shards as a side
// for the table checks.
type groupSide struct {
	g       *Group
	sd      *side
	sent    [][2]int // per shard, per socket: datagrams sent
	refused []error
}

func newGroupSide(t *testing.T, n int, fs *fakeSteer) *groupSide {
	t.Helper()
	gs := &groupSide{sent: make([][2]int, n)}
	var steer Steerer
	if fs != nil {
		fs.at = map[netip.AddrPort]*udp.Conn{}
		steer = fs
	}
	g, err := NewGroup(n, steer, func(err error) { gs.refused = append(gs.refused, err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	for i := range n {
		// Distinct sockets, so the steering map tells the shards apart.
		s, err := g.Add(Config{CPU: -1, Conns: []Socket{ConnGroup: &udp.Conn{}, ConnLane: &udp.Conn{}}, Pool: 256})
		if err != nil {
			t.Fatal(err)
		}
		s.sendHook = func(c int, _ *udp.Batch, k int) { gs.sent[i][c] += k }
		s.now = time.Now()
	}
	gs.g, gs.sd = g, &side{shards: g.Shards(), mesh: g.mesh}
	if fs != nil {
		// The kernel's map takes the listen group's sockets only.
		fs.members = map[*udp.Conn]bool{}
		for _, m := range g.members {
			fs.members[m] = true
		}
	}
	return gs
}

// session is a session of lanes lanes with peer 1 at remoteIP, lane i
// at port 40000+i.
func groupSession(lanes, arrived, fromLane int, place []int) Session {
	var k1, k2 [32]byte
	rand.Read(k1[:])
	rand.Read(k2[:])
	keys := crypto.NewSessionKeys(k1, k2, arrived < 0)
	s := Session{Peer: 1, Place: place, Arrived: arrived, FromLane: fromLane}
	for i := range lanes {
		s.Lanes = append(s.Lanes, LaneConfig{Peer: 1, Index: i, Lanes: lanes,
			Remote: netip.AddrPortFrom(addrA.Addr(), 40000+uint16(i)),
			Send:   keys.SendLane(i), Recv: keys.RecvLane(i), FEC: fec.EncoderConfig{K: 4}})
	}
	return s
}

// A responder's session, steered by lane remote: lane i goes to shard i
// wherever the initiation arrived, its remote is claimed for shard i's
// socket before any shard ran a command (the early claim), the owner
// keeps the claim by binding the lane, and every other shard hands the
// lane's datagrams to its owner.
func TestGroupInstallsResponderSession(t *testing.T) {
	fs := &fakeSteer{}
	gs := newGroupSide(t, 3, fs)
	s := groupSession(3, 2, 0, nil)
	place := gs.g.InstallSession(s)
	if !slices.Equal(place, []int{0, 1, 2}) {
		t.Fatalf("placed %v, want lane i on shard i", place)
	}
	for i, lc := range s.Lanes {
		if fs.at[lc.Remote] != gs.g.members[i] {
			t.Fatalf("lane %d's remote not claimed for shard %d before the shards ran", i, i)
		}
	}
	runQueued(gs.sd)
	for _, x := range gs.g.Shards() {
		x.flushAll()
	}
	checkGroup(t, gs, s, place, ConnGroup)
	for i, lc := range s.Lanes {
		if fs.at[lc.Remote] != gs.g.members[i] {
			t.Fatalf("shard %d let its lane's claim go", i)
		}
	}
	if sent := gs.sent; sent[0][ConnGroup]+sent[1][ConnGroup]+sent[2][ConnGroup] != 0 {
		t.Fatalf("a responder sent before the initiator's first datagram: %v", sent)
	}
}

// An initiator's session: lane i on shard i and its lane socket whatever
// the lanes' previous placement, no steering, and each owner confirms
// the keys at once (a keepalive from the lane socket).
func TestGroupInstallsInitiatorSession(t *testing.T) {
	fs := &fakeSteer{}
	gs := newGroupSide(t, 3, fs)
	s := groupSession(3, -1, -1, []int{2, 0, 1})
	place := gs.g.InstallSession(s)
	if !slices.Equal(place, []int{0, 1, 2}) {
		t.Fatalf("placed %v, want lane i on shard i", place)
	}
	runQueued(gs.sd)
	for _, x := range gs.g.Shards() {
		x.flushAll()
	}
	checkGroup(t, gs, s, place, ConnLane)
	if len(fs.at) != 0 {
		t.Fatalf("an initiator's lanes entered the listen group's map: %v", fs.at)
	}
	for i := range 3 {
		if gs.sent[i][ConnLane] != 1 || gs.sent[i][ConnGroup] != 0 {
			t.Fatalf("shard %d sent %v (group, lane socket), want one keepalive from its lane socket", i, gs.sent[i])
		}
	}
}

// checkGroup checks that each lane of s is installed on its shard in
// place on socket conn, that every other shard names that owner, and
// that the tables hold together.
func checkGroup(t *testing.T, gs *groupSide, s Session, place []int, conn int) {
	t.Helper()
	if len(gs.refused) != 0 {
		t.Fatalf("installs refused: %v", gs.refused)
	}
	for i := range s.Lanes {
		for j, x := range gs.g.Shards() {
			ln := x.ownedLane(s.Peer, i)
			if j == place[i] {
				if ln == nil || ln.cfg.Conn != conn {
					t.Fatalf("lane %d not on shard %d with socket %d", i, j, conn)
				}
				continue
			}
			if ln != nil {
				t.Fatalf("lane %d on shard %d too", i, j)
			}
			pl := x.table.peers[s.Peer]
			if o := pl.owners[i]; o != place[i] {
				t.Fatalf("shard %d names shard %d lane %d's owner, want %d", j, o, i, place[i])
			}
			if pl.cand[i] == nil {
				t.Fatalf("shard %d lacks lane %d's receive keys: it would not recognise the lane's datagrams", j, i)
			}
		}
	}
	checkTables(t, "after the install", gs.sd, true)
	checkAddrOwners(t, "after the install", gs.sd)
}

// A moved lane: its new owner has it and every shard names the new owner.
func TestGroupMoveLane(t *testing.T) {
	gs := newGroupSide(t, 3, nil)
	s := groupSession(3, 0, 0, nil)
	place := gs.g.InstallSession(s)
	runQueued(gs.sd)
	gs.g.MoveLane(place[1], 1, 3, 1, place[2])
	runQueued(gs.sd)
	place[1] = place[2]
	checkGroup(t, gs, s, place, ConnGroup)
}

// Add fills a group of n and no more, and only with shards that have
// both sockets.
func TestGroupAddRefuses(t *testing.T) {
	g, err := NewGroup(1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Add(Config{CPU: -1, Conns: []Socket{&udp.Conn{}}}); err == nil {
		t.Fatal("a shard without its lane socket was added")
	}
	if _, err := g.Add(Config{CPU: -1, Conns: []Socket{&udp.Conn{}, &udp.Conn{}}, Pool: 64}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Add(Config{CPU: -1, Conns: []Socket{&udp.Conn{}, &udp.Conn{}}, Pool: 64}); err == nil {
		t.Fatal("a second shard joined a group of one")
	}
}

// Placement: an initiator's lane i on shard i; a responder's where they
// were; steered by port, the lane whose socket sent the initiation where
// it arrived, the lane there taking its old shard.
func TestPlacement(t *testing.T) {
	for _, c := range []struct {
		steered           bool
		prev              []int
		arrived, fromLane int
		want              []int
	}{
		{false, []int{2, 0, 1}, -1, -1, []int{0, 1, 2}}, // initiator: lane sockets
		{true, []int{2, 0, 1}, 0, 1, []int{2, 0, 1}},    // steered: stays
		{true, nil, 2, 0, []int{0, 1, 2}},               // steered: lane i on shard i
		{false, nil, 2, 0, []int{2, 1, 0}},              // lane 0 where it arrived, lane 2 on its shard
		{false, []int{1, 0, 2}, 1, 2, []int{2, 0, 1}},   // lane 2 to shard 1; lane 0 (there) to 2
		{false, []int{1, 0, 2}, 0, 1, []int{1, 0, 2}},   // already where it arrived
		{false, []int{1, 0, 2}, 2, -1, []int{1, 0, 2}},  // sent from no lane of this session
		{false, []int{1, 0}, 1, 0, []int{1, 0, 2}},      // another lane count: placement anew
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			s := groupSession(3, c.arrived, c.fromLane, c.prev)
			if got := (Placement{Steered: c.steered}).Place(&s); !slices.Equal(got, c.want) {
				t.Fatalf("placed %v, want %v", got, c.want)
			}
			if c.prev != nil && c.arrived >= 0 && len(c.prev) == 3 && !slices.Equal(s.Place, c.prev) {
				t.Fatal("Place changed the previous placement")
			}
		})
	}
}

// A lane that moved to a new IP (Config.Moved on its owner): on every
// other shard the peer's lanes follow to the new IP, each at its own port;
// the owner's shard is left out (its lane moved itself). (Hand-over
// entries follow the owner's own news of the move; FollowLane's hint
// matters only before that news: claim_test.go.)
func TestGroupFollowPeer(t *testing.T) {
	gs := newGroupSide(t, 3, nil)
	s := groupSession(3, 0, -1, nil)
	place := gs.g.InstallSession(s)
	runQueued(gs.sd)
	to := netip.MustParseAddrPort("198.51.100.9:41000")
	gs.g.FollowPeer(place[0], 1, 0, s.Lanes[0].Remote, to)
	runQueued(gs.sd)
	for i := range s.Lanes {
		want := netip.AddrPortFrom(to.Addr(), s.Lanes[i].Remote.Port())
		if i == 0 {
			want = s.Lanes[0].Remote // on the shard left out
		}
		if got := gs.g.Shards()[place[i]].ownedLane(1, i).cfg.Remote; got != want {
			t.Fatalf("lane %d on shard %d talks to %s, want %s", i, place[i], got, want)
		}
	}
	checkTables(t, "after the follow", gs.sd, true)
	checkAddrOwners(t, "after the follow", gs.sd)
}

// A lane its owner refuses to install (a config it cannot run) does not
// leave the early claim of its remote behind, and the refusal is told.
func TestGroupRefusedInstallReleasesClaim(t *testing.T) {
	fs := &fakeSteer{}
	gs := newGroupSide(t, 2, fs)
	s := groupSession(2, 1, -1, nil)
	s.Lanes[1].FEC = fec.EncoderConfig{K: 0, R: 1} // no such ratio
	gs.g.InstallSession(s)
	if _, ok := fs.at[s.Lanes[1].Remote]; !ok {
		t.Fatal("no early claim before the shards ran")
	}
	runQueued(gs.sd)
	if len(gs.refused) != 1 {
		t.Fatalf("%d refusals told, want 1", len(gs.refused))
	}
	if _, ok := fs.at[s.Lanes[1].Remote]; ok {
		t.Fatal("the refused lane's remote stays claimed in the steering map")
	}
	if fs.at[s.Lanes[0].Remote] != gs.g.members[0] {
		t.Fatal("the installed lane lost its claim")
	}
}

// SetKnown reaches the steering map (the known sockets' addresses), and
// is a no-op for a group that steers by port.
func TestGroupSetKnown(t *testing.T) {
	fs := &fakeSteer{}
	g := newGroupSide(t, 2, fs).g
	a := netip.MustParseAddr("198.51.100.9")
	if err := g.SetKnown(a, true); err != nil || !fs.known[a] {
		t.Fatalf("SetKnown(true): %v, map %v", err, fs.known)
	}
	if err := g.SetKnown(a, false); err != nil || fs.known[a] {
		t.Fatalf("SetKnown(false): %v, map %v", err, fs.known)
	}
	byPort := newGroupSide(t, 1, nil).g
	if err := byPort.SetKnown(a, true); err != nil {
		t.Fatalf("a group without a steering map: %v", err)
	}
}
