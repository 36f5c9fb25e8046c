package shard

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/yip-router/yip-router/shard/udp"
)

// The group: a router's shards as one data plane. It owns the shards, the
// mesh between them, the route table they share and the listen group's
// steering map, and it is all the control core sees of them
// (control.DataPlane). The core decides sessions; the group decides where
// a session's lanes go (Placement), installs each on its owner and tells
// every other shard the owner. Every call returns without waiting for a
// shard: the work is queued on the shards' goroutines (Shard.Do), in the
// order the calls came.

// Socket indexes of a shard (Config.Conns, LaneConfig.Conn).
const (
	ConnGroup = 0 // the listen group's member, on the listen port (a responder's lanes)
	ConnLane  = 1 // the shard's lane socket (an initiator's lanes)
)

// Group is the router's shards, their mesh, route table and steering map.
// NewGroup makes it, Add its shards in order; nothing changes after.
type Group struct {
	shards []*Shard
	mesh   *Mesh
	table  atomic.Pointer[Table]
	steer  Steerer
	place  Placement
	// members are the shards' listen-group sockets as the Steerer knows
	// them (nil where a socket is not a *udp.Conn).
	members []*udp.Conn
	// refused is told of a lane a shard refused to install (a config
	// the shard cannot run: a bug, not an input), on that shard's
	// goroutine.
	refused func(error)
}

// NewGroup makes a group for n shards. steer is the listen group's lane
// map; nil where the kernel steers by source port (then a responder's
// lanes go where their initiation arrived: Placement). refused (nil:
// ignored) is told of a lane a shard refused to install.
func NewGroup(n int, steer Steerer, refused func(error)) (*Group, error) {
	m, err := NewMesh(n)
	if err != nil {
		return nil, err
	}
	if refused == nil {
		refused = func(error) {}
	}
	return &Group{mesh: m, steer: steer, place: Placement{Steered: steer != nil}, refused: refused}, nil
}

// Add makes the group's next shard from cfg, filling in what the group
// owns: its ID, the mesh, the route table and the steering map. cfg.Conns
// are its listen-group member and its lane socket (ConnGroup, ConnLane).
func (g *Group) Add(cfg Config) (*Shard, error) {
	if len(g.shards) == g.mesh.Size() {
		return nil, fmt.Errorf("shard: group of %d is full", g.mesh.Size())
	}
	if len(cfg.Conns) != 2 || cfg.Conns[ConnGroup] == nil || cfg.Conns[ConnLane] == nil {
		return nil, errors.New("shard: a group's shard needs its listen-group member and its lane socket")
	}
	cfg.ID, cfg.Mesh, cfg.Table, cfg.Steer = len(g.shards), g.mesh, &g.table, g.steer
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	member, _ := cfg.Conns[ConnGroup].(*udp.Conn)
	g.shards, g.members = append(g.shards, s), append(g.members, member)
	return s, nil
}

// Shards are the group's shards by ID.
func (g *Group) Shards() []*Shard { return g.shards }

// Close releases the mesh's wakers. The shards must have stopped; the
// sockets and the steering map are their opener's to close.
func (g *Group) Close() { g.mesh.Close() }

// Size is the number of shards; it never changes.
func (g *Group) Size() int { return g.mesh.Size() }

// ListenPort is the port of the shards' listen group.
func (g *Group) ListenPort() uint16 {
	return g.shards[0].cfg.Conns[ConnGroup].LocalAddr().Port()
}

// LanePorts are the local ports of the shards' lane sockets, by shard.
func (g *Group) LanePorts() []uint16 {
	ports := make([]uint16, len(g.shards))
	for i, s := range g.shards {
		ports[i] = s.cfg.Conns[ConnLane].LocalAddr().Port()
	}
	return ports
}

// SendHandshake sends a handshake datagram from shard sh's socket conn
// (ConnGroup: from local, the address the peer's message arrived at; zero:
// the routing table's choice). Safe from any goroutine: one sendto.
func (g *Group) SendHandshake(sh, conn int, b []byte, to netip.AddrPort, local netip.Addr) error {
	c := g.shards[sh].cfg.Conns[conn]
	if conn == ConnLane {
		return c.SendTo(b, to)
	}
	return c.SendFrom(b, to, local)
}

// SetKnown tells the listen group that a peer is known at address a (known)
// or no longer is: datagrams from a known address that no lane is steered
// for queue on the shards' known sockets, apart from strangers' (Config.
// Known), so a flood from spoofed sources does not starve a peer that
// restarts there. Without a steering map (steering by port) there are no
// such sockets, and it does nothing. It fails when the map is full or the
// kernel refuses; that address's datagrams then queue with strangers'.
// Safe from any goroutine.
func (g *Group) SetKnown(a netip.Addr, known bool) error {
	if g.steer == nil {
		return nil
	}
	return g.steer.SetKnown(a, known)
}

// Session is a completed handshake's lanes as the group installs them.
type Session struct {
	Peer PeerID
	// Lanes are the lanes' configs, lane i at index i. The group sets
	// their Conn (Session.Conn).
	Lanes []LaneConfig
	// Place is where each lane was before (a rekey keeps lanes where
	// they are); nil or of another length: nowhere yet.
	Place []int
	// Arrived is the shard a responder's initiation arrived on; -1 as
	// initiator.
	Arrived int
	// FromLane is the lane whose socket sent the initiation (-1: none
	// of this session's lanes).
	FromLane int
}

// Initiator reports whether we sent the session's initiation.
func (s *Session) Initiator() bool { return s.Arrived < 0 }

// Conn is the socket the session's lanes are on: an initiator's on the
// lane sockets its offer named (their ports are the lanes' local ports),
// a responder's on the listen group the initiation came to.
func (s *Session) Conn() int {
	if s.Initiator() {
		return ConnLane
	}
	return ConnGroup
}

// InstallSession places s's lanes, installs each on its owner and tells
// every other shard the owner, the remote and the receive keys, so they
// hand the lane's packets over. It returns the placement (lane → shard),
// which the core keeps for the session's rekey. As initiator, the owner
// confirms the new keys at once (a keepalive), as WireGuard does, so the
// responder stops sending under the old ones even if we have nothing to
// send.
//
// A responder's lane is claimed in the steering map now, before the core
// sends the response and before the owner installs the lane at its next
// command poll: the initiator's first datagram may come sooner and would
// land by the kernel's hash on another shard. The claim is unproven, so it
// never takes an entry another socket holds; the owner keeps it by binding
// the lane there, or releases it (laneTable.dropEarlySteer).
func (g *Group) InstallSession(s Session) []int {
	place := g.place.Place(&s)
	conn := s.Conn()
	for i := range s.Lanes {
		lc := s.Lanes[i]
		lc.Conn = conn
		owner := place[i]
		if conn == ConnGroup && g.steer != nil {
			g.steer.Steer(lc.Remote, g.members[owner], false)
		}
		confirm := s.Initiator()
		g.shards[owner].Do(func(x *Shard) {
			if err := x.InstallLane(lc); err != nil {
				x.table.dropEarlySteer(lc.Remote, lc.Conn) // the claim goes with the lane
				g.refused(err)
				return
			}
			if confirm {
				x.SendKeepalive(lc.Peer, lc.Index)
			}
		})
		recv := lc.Recv
		for j, o := range g.shards {
			if j != owner {
				o.Do(func(x *Shard) { x.SetLaneOwner(s.Peer, len(s.Lanes), i, owner, lc.Remote, &recv) })
			}
		}
	}
	return place
}

// MoveLane moves lane index of peer (a session of lanes lanes), with its
// state, from shard from to shard to, and tells every other shard its new
// owner.
func (g *Group) MoveLane(from int, peer PeerID, lanes, index, to int) {
	dst := g.shards[to]
	g.shards[from].Do(func(x *Shard) { x.MoveLane(peer, index, dst) })
	for j, o := range g.shards {
		if j != from && j != to {
			o.Do(func(x *Shard) { x.SetLaneOwner(peer, lanes, index, to, netip.AddrPort{}, nil) })
		}
	}
}

// RemovePeer drops peer's lanes and waiting packets on every shard.
func (g *Group) RemovePeer(peer PeerID) {
	g.each(func(x *Shard) { x.RemovePeer(peer) })
}

// SetKeepalive changes peer's persistent keepalive on every shard.
func (g *Group) SetKeepalive(peer PeerID, ka time.Duration) {
	g.each(func(x *Shard) { x.SetKeepalive(peer, ka) })
}

// MoveRemote moves peer's lanes that talk to from over to to, on every
// shard (an operator's or a resolver's new endpoint).
func (g *Group) MoveRemote(peer PeerID, from, to netip.AddrPort) {
	g.each(func(x *Shard) { x.MoveRemote(peer, from, to) })
}

// FollowPeer tells every shard but except that lane index of peer moved
// from one address to another: their hand-over entry for it follows
// (Shard.FollowLane), and if the IP changed the peer's lanes there follow
// it too (Shard.FollowPeer).
func (g *Group) FollowPeer(except int, peer PeerID, index int, from, to netip.AddrPort) {
	for i, o := range g.shards {
		if i != except {
			o.Do(func(x *Shard) {
				x.FollowLane(peer, index, to)
				if from.Addr() != to.Addr() {
					x.FollowPeer(peer, from.Addr(), to.Addr())
				}
			})
		}
	}
}

// SetRoutes installs the route table (prefix → peer) for every shard at
// once.
func (g *Group) SetRoutes(t *Table) { g.table.Store(t) }

// each queues f on every shard.
func (g *Group) each(f func(*Shard)) {
	for _, s := range g.shards {
		s.Do(f)
	}
}

// Placement is the rule for where a session's lanes go.
type Placement struct {
	// Steered: the listen group steers by lane remote (udp.Steering), so
	// a lane's datagrams reach its shard wherever it is.
	Steered bool
}

// Place is where s's lanes go (lane → shard). As initiator lane i goes to
// shard i, which owns the lane socket its datagrams come back to. As
// responder a lane stays where it was (s.Place), else lane i goes to shard
// i. Where the group steers by source port, the lane whose socket sent the
// initiation (s.FromLane) goes to the shard the initiation arrived on:
// its datagrams come from the same socket through the same NAT mapping;
// the lane that was there takes its old shard.
func (p Placement) Place(s *Session) []int {
	n := len(s.Lanes)
	place := make([]int, n)
	if s.Initiator() || len(s.Place) != n {
		for i := range place {
			place[i] = i
		}
	} else {
		copy(place, s.Place)
	}
	if !s.Initiator() && !p.Steered && s.FromLane >= 0 && s.FromLane < n && s.Arrived != place[s.FromLane] {
		for i, o := range place {
			if o == s.Arrived {
				place[i] = place[s.FromLane]
			}
		}
		place[s.FromLane] = s.Arrived
	}
	return place
}
