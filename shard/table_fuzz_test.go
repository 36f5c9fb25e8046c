package shard

// The lane table fuzz target, FuzzLaneTable: one router's shards driven by
// what the control plane and the peers do to their lane tables, with every
// table checked after every step.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/udp"
)

// FuzzLaneTable drives three shards' lane tables with the commands the
// control plane sends (control.Core's install, LaneMisplaced, peer removal,
// a reload's MoveRemote, the group's follows and early claims),
// queued on each shard (Do) and run in any order across shards, as on the
// shards' goroutines, and with datagrams three peers send under their lane
// keys (current or previous, fresh, replayed or forged) from a handful of
// shared addresses to any shard, which move, adopt and hand over lanes
// (roam.go, place.go). The steering map is in memory, absent, or full. It
// checks every shard's table (laneTable.check) after every step, what
// holds across the shards whenever no command is queued (check), and that
// nothing is left in the tables or the steering map once every peer went.
//
// The input is a sequence of operations (tableFuzz.step); bytes past its
// end read as zero.
func FuzzLaneTable(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		h := newTableFuzz(t, &fuzzIn{b: in})
		for ops := 0; len(h.in.b) > 0 && ops < tableMaxOps; ops++ {
			h.step()
			h.check("after op")
		}
		h.runAll()
		h.advance(time.Hour)
		h.runAll() // what the timers' moves told the other shards
		h.check("at the end")
		for p := range h.sess {
			h.removePeer(PeerID(p + 1))
		}
		h.runAll()
		h.check("after removing every peer")
		for i, s := range h.sd.shards {
			if n := len(s.table.lanes) + len(s.table.foreign) + len(s.table.peers) + len(s.table.owned) + len(s.table.cands); n != 0 {
				t.Fatalf("shard %d keeps %d table entries after every peer went", i, n)
			}
		}
		if h.steer != nil && len(h.steer.at) != 0 {
			t.Fatalf("the steering map keeps %d entries after every peer went", len(h.steer.at))
		}
	})
}

const (
	tableShards = 3
	tablePeers  = 3
	tableMaxOps = 64
)

type tableFuzz struct {
	t     *testing.T
	in    *fuzzIn
	sd    *side
	steer *fakeSteer // nil: the kernel steers by port
	conns [tableShards][2]*udp.Conn
	now   time.Time
	epoch byte
	sess  [tablePeers]*tableSession // peer p+1's
	last  []byte                    // the last datagram a peer sent, for replays
	buf   [BufSize]byte
}

// tableSession is what the control plane knows of a peer's session, and
// the peer's end of its lanes, whose keys make its datagrams.
type tableSession struct {
	lanes     int
	initiator bool
	place     []int     // control.Core's p.place: the shard owning each lane
	send      []*keyset // the peer's lanes' keys: their sealers and framers
	prev      []*keyset // the previous session's (same lane count), nil: none
}

func newTableFuzz(t *testing.T, in *fuzzIn) *tableFuzz {
	h := &tableFuzz{t: t, in: in, now: ingressT0}
	for i := range h.conns {
		h.conns[i] = [2]*udp.Conn{new(udp.Conn), new(udp.Conn)} // the group's socket, the lane socket
	}
	h.sd = newSideConns(t, tableShards, routesB, 256, func(i int) []*udp.Conn { return h.conns[i][:] })
	if m := in.u8() % 3; m != 0 {
		h.steer = &fakeSteer{at: map[netip.AddrPort]*udp.Conn{}, full: m == 2, members: map[*udp.Conn]bool{}}
		for _, c := range h.conns {
			h.steer.members[c[0]] = true
		}
	}
	for i, s := range h.sd.shards {
		s.now = h.now
		if h.steer != nil {
			s.cfg.Steer = h.steer
		}
		s.cfg.Moved = func(_ int, peer PeerID, index int, from, to netip.AddrPort) { h.moved(i, peer, index, from, to) }
		s.cfg.Misplaced = func(from int, peer PeerID, index, via int) { h.misplaced(from, peer, index, via) }
	}
	return h
}

// tableAddr is one of 16 addresses (4 hosts, 4 ports): peers share them.
func tableAddr(b byte) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 1 + b>>2&3}), 40000+uint16(b&3))
}

// step decodes and runs one operation.
func (h *tableFuzz) step() {
	r := h.in
	switch op := r.u8(); op % 10 {
	case 0, 1:
		h.install()
	case 2:
		// A lane reported misplaced (as Config.Misplaced would: by the
		// shard that owns it, so after any move to it was adopted).
		p, fl := r.u8(), r.u8()
		if ss := h.sess[p%tablePeers]; ss != nil {
			i, peer := int(fl)%ss.lanes, PeerID(1+p%tablePeers)
			if from := ss.place[i]; h.sd.shards[from].table.local(peer, i) != nil {
				h.misplaced(from, peer, i, int(fl>>4)%tableShards)
			}
		}
	case 3:
		h.removePeer(PeerID(1 + r.u8()%tablePeers))
	case 4:
		// The operator moved a peer's Endpoint (a reload).
		p, a, b := r.u8(), r.u8(), r.u8()
		for _, s := range h.sd.shards {
			s.Do(func(s *Shard) { s.MoveRemote(PeerID(1+p%tablePeers), tableAddr(a), tableAddr(b)) })
		}
	case 5:
		// Another shard's lane moved (Group.FollowPeer).
		p, fl, b := r.u8(), r.u8(), r.u8()
		if ss := h.sess[p%tablePeers]; ss != nil {
			i := int(fl) % ss.lanes
			h.moved(int(fl>>4)%tableShards, PeerID(1+p%tablePeers), i, tableAddr(fl), tableAddr(b))
		}
	case 6, 7:
		h.datagram()
	case 8:
		// Shards run their queued commands: each bit one shard.
		fl := r.u8()
		for i, s := range h.sd.shards {
			if fl>>i&1 != 0 {
				s.runControl()
			}
		}
	case 9:
		x := time.Duration(r.u8())
		h.advance(x * x * 4 * time.Millisecond) // up to 4 minutes: past addrHold
	}
}

// install is control.Core.install for a peer's new session: keys of a new
// epoch, lanes placed as the core places them, each installed on its
// owner and told to every other shard, a responder's remotes steered
// early (Group.InstallSession).
func (h *tableFuzz) install() {
	r := h.in
	p, fl, from, ports, ip := r.u8()%tablePeers, r.u8(), r.u8(), r.u8(), r.u8()
	peer := PeerID(1 + p)
	lanes := 1 + int(fl%3)
	initiator := fl&4 != 0
	h.epoch++
	k1, k2 := [32]byte{1, h.epoch}, [32]byte{2, h.epoch}
	ours, theirs := crypto.NewSessionKeys(k1, k2, false), crypto.NewSessionKeys(k1, k2, true)
	ss := h.sess[p]
	next := &tableSession{lanes: lanes, initiator: initiator, send: make([]*keyset, lanes)}
	if ss != nil && ss.lanes == lanes {
		next.prev, next.place = ss.send, ss.place
	}
	if initiator || next.place == nil {
		next.place = make([]int, lanes)
		for i := range next.place {
			next.place[i] = i % tableShards
		}
	}
	fromLane, arrived := int(from)%lanes, int(from>>4)%tableShards
	if !initiator && fl&8 != 0 && arrived != next.place[fromLane] {
		for i, o := range next.place {
			if o == arrived {
				next.place[i] = next.place[fromLane]
			}
		}
		next.place[fromLane] = arrived
	}
	conn := 0
	if initiator {
		conn = 1
	}
	// As initiator, the response came from lane 0's remote (the
	// responder's port): the lanes talking there are proven.
	proven := tableAddr(ip&0xc | ports&3)
	for i := range lanes {
		remote := tableAddr(ip&0xc | ports>>(2*i)&3)
		send, recv := ours.SendLane(i), ours.RecvLane(i)
		lc := LaneConfig{
			Peer: peer, Index: i, Lanes: lanes, Remote: remote, Conn: conn,
			Send: send, Recv: recv, FEC: fec.EncoderConfig{K: 4},
			HoldTx: !initiator, Proven: initiator && fl&16 != 0 && remote == proven,
			Asked: !initiator && i == fromLane,
		}
		if fl&32 != 0 && i == fromLane {
			lc.Offered = tableAddr(ip&0xc | (ports>>(2*i)+1)&3) // a NAT rewrote the port
		}
		peerKeys, err := newKeyset(&LaneConfig{Peer: peer, Index: i, Lanes: lanes, Send: theirs.SendLane(i), Recv: theirs.RecvLane(i), FEC: fec.EncoderConfig{K: 4}}, time.Time{})
		if err != nil {
			h.t.Fatal(err)
		}
		next.send[i] = peerKeys
		owner := next.place[i]
		if h.steer != nil && !initiator {
			h.steer.Steer(lc.Remote, h.conns[owner][0], false)
		}
		h.sd.shards[owner].Do(func(s *Shard) {
			if err := s.InstallLane(lc); err != nil {
				h.t.Fatal(err)
			}
			if initiator {
				s.SendKeepalive(lc.Peer, lc.Index)
			}
		})
		for j, s := range h.sd.shards {
			if j != owner {
				s.Do(func(s *Shard) { s.SetLaneOwner(peer, lanes, i, owner, remote, &recv) })
			}
		}
	}
	h.sess[p] = next
	if fl&64 != 0 {
		h.runAll()
	}
}

// misplaced is control.Core.LaneMisplaced: a responder's lane moves to the
// shard its datagrams arrive on, and the other shards learn the owner.
func (h *tableFuzz) misplaced(from int, peer PeerID, index, via int) {
	ss := h.sess[peer-1]
	if ss == nil || ss.initiator || index >= ss.lanes || ss.place[index] != from || via == from {
		return
	}
	ss.place[index] = via
	dst := h.sd.shards[via]
	h.sd.shards[from].Do(func(s *Shard) { s.MoveLane(peer, index, dst) })
	for j, s := range h.sd.shards {
		if j != from && j != via {
			s.Do(func(s *Shard) { s.SetLaneOwner(peer, ss.lanes, index, via, netip.AddrPort{}, nil) })
		}
	}
}

// moved is Group.FollowPeer for a Config.Moved report.
func (h *tableFuzz) moved(except int, peer PeerID, index int, from, to netip.AddrPort) {
	for i, s := range h.sd.shards {
		if i != except {
			s.Do(func(x *Shard) {
				x.FollowLane(peer, index, to)
				if from.Addr() != to.Addr() {
					x.FollowPeer(peer, from.Addr(), to.Addr())
				}
			})
		}
	}
}

func (h *tableFuzz) removePeer(peer PeerID) {
	h.sess[peer-1] = nil
	for _, s := range h.sd.shards {
		s.Do(func(s *Shard) { s.RemovePeer(peer) })
	}
}

// datagram is one datagram a peer's lane sends (a keepalive under its
// current or previous keys), a replay of the last one, or junk, from one
// of the shared addresses, arriving on any shard; hand-overs are then
// taken.
func (h *tableFuzz) datagram() {
	r := h.in
	p, fl, a := r.u8(), r.u8(), r.u8()
	var d []byte
	switch ss := h.sess[p%tablePeers]; {
	case fl&3 == 1 && h.last != nil:
		d = h.last
	case fl&3 == 2 || ss == nil:
		d = h.buf[:60+int(a)]
		for i := range d {
			d[i] = byte(i*7) ^ a
		}
	default:
		i := int(fl>>2) % ss.lanes
		ks := ss.send[i]
		if fl&0x80 != 0 && ss.prev != nil {
			ks = ss.prev[i]
		}
		body := []byte{ctlKeepalive, byte(fl) & heardYou, 0, 0}
		sym, err := ks.sealer.SealSymbol(h.buf[crypto.HeaderLen:], controlAD[:], body)
		if err != nil {
			h.t.Fatal(err)
		}
		d = ks.txf.Frame(h.buf[:], crypto.Header{Kind: crypto.KindControl}, len(sym))
		h.last = append(h.last[:0], d...)
	}
	feed(h.sd.shards[int(fl>>4)%tableShards], tableAddr(a), d)
	settle(h.sd)
	for i := range h.sd.sent {
		h.sd.sent[i] = nil
	}
}

// runAll runs every shard's queued commands until none is left (a
// command may queue another: MoveLane queues the adoption).
func (h *tableFuzz) runAll() {
	for h.pending() {
		for _, s := range h.sd.shards {
			s.runControl()
		}
	}
	settle(h.sd)
}

func (h *tableFuzz) pending() bool {
	for _, s := range h.sd.shards {
		if s.ctlPending.Load() > 0 {
			return true
		}
	}
	return false
}

// advance moves the shards' clocks and runs their timers (followPending,
// the end of previous keys).
func (h *tableFuzz) advance(d time.Duration) {
	h.now = h.now.Add(d)
	for _, s := range h.sd.shards {
		s.now = h.now
		s.tick()
	}
	settle(h.sd)
	for i := range h.sd.sent {
		h.sd.sent[i] = nil
	}
}

// check checks every shard's table, and once no command is queued
// (quiet: every move, owner and install the control plane sent, and every
// claim's news the shards sent each other, has run) what holds across the
// shards: one owner per lane (checkTables), one peer per address
// (checkAddrOwners), every hand-over entry naming the shard that owns its
// lane (checkHandOvers), and no steering entry without the lane it sends
// to (checkSteering).
func (h *tableFuzz) check(when string) {
	h.t.Helper()
	quiet := !h.pending()
	checkTables(h.t, when, h.sd, quiet)
	if quiet {
		checkAddrOwners(h.t, when, h.sd)
		checkHandOvers(h.t, when, h.sd)
		h.checkSteering(when)
	}
}

// checkSteering fails the test if an entry of the steering map sends an
// address to a socket whose shard has no lane on that socket bound there:
// the entry outlived its lane (or was never its lane's).
func (h *tableFuzz) checkSteering(when string) {
	h.t.Helper()
	if h.steer == nil {
		return
	}
	for addr, c := range h.steer.at {
		lane := false
		for i, s := range h.sd.shards {
			for j, sc := range h.conns[i] {
				if sc == c {
					ln := s.table.laneAt(addr)
					lane = ln != nil && ln.cfg.Conn == j
				}
			}
		}
		if !lane {
			h.t.Fatalf("%s: the steering map sends %s to a socket whose shard has no lane bound there", when, addr)
		}
	}
}
