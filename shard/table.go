package shard

import (
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/crypto"
)

// The lane table: where every lane of every peer lives, as one shard sees
// it. Ingress asks it for the lane at a datagram's source address (or the
// shard to hand the datagram to), egress for a peer's lanes and their
// owners, roam and the timers for the lanes this shard owns, place.go for
// the other shards' lanes' keys. Its indexes are kept in step by the
// methods here and nowhere else: install, leave and settle (a rekey),
// setOwner, adopt, forget and removePeer (the lanes' lifecycle),
// setForeign, hint and hear (hand-over entries). Who may hold an address
// is claim.go (one owner per address), keeping the listen group's steering
// map in step with the addresses is steer.go, and what must hold between
// any two changes is written out, and checked, in table_check.go. Like all of a shard, the table belongs to
// the shard's goroutine. A rekey keeps the lane (its keys change:
// keyset.go), so a lane pointer here names the lane across its sessions.

// laneTable is one shard's lane table (Shard.table).
type laneTable struct {
	self   int // this shard's id
	shards int // shards in the mesh: a peer's lane i starts on shard i mod shards
	// lanes is where ingress finds a lane this shard owns, by remote
	// address: one map lookup per datagram. An owned lane may be missing
	// (claim.go refused it the address; roam.go finds it by trial).
	lanes map[netip.AddrPort]*lane
	// foreign holds the hand-over entries: a remote address whose lane
	// another shard owns, so ingress hands its datagrams over. At most one
	// per lane (peerLanes.away).
	foreign map[netip.AddrPort]foreignLane
	peers   map[PeerID]*peerLanes
	// owned is every lane this shard owns, in no order (lane.slot is a
	// lane's index): roam tries their tags, the timers run them.
	owned []*lane
	// wakes[i] is when tick next visits owned[i] (nanoseconds since
	// stampEpoch, negative under a test's clock set before the process
	// started; 0, never a time: at its next run): a hub's idle lanes are
	// skipped by reading this array, not each lane (Shard.idleWake,
	// stir).
	wakes []int64
	// cands is the lanes other shards own, by their receive keys, so a
	// datagram of theirs that arrives here is recognised (place.go).
	cands []*candidate

	// cfg is the shard's: its sockets and the listen group's steering map
	// (Config.Conns, Config.Steer; steer.go).
	cfg *Config
	// stats is the shard's counters (steer_refused).
	stats *stats
	// fold is told of every lane the table stops owning, before it goes:
	// the shard keeps what its decoders counted (Shard.foldLane).
	fold func(*lane)
	// clock is the Lamport clock of claims (claim.go): one more at each
	// claim here, at least the stamp of every claim heard of.
	clock uint64
	// tell queues a claim of this shard's on every other shard (their
	// hear; Shard.tell). nil: a lone table (tests).
	tell func(addrNews)
}

// peerLanes is how a shard reaches a peer: the owner shard of each lane and,
// for lanes this shard owns, the lane itself.
type peerLanes struct {
	id     PeerID
	owners []int        // owners[i] is the shard owning lane i
	local  []*lane      // local[i] != nil iff this shard owns lane i
	cand   []*candidate // cand[i]: lane i's tag keys, when another shard owns it (place.go)
	mine   int          // the first lane this shard owns; -1: none
	// away[i] is the address this shard last gave a hand-over entry
	// (laneTable.foreign) for lane i, so a new one replaces it
	// (setForeign): at most one entry per lane, however often the peer
	// handshakes from new ports.
	away []netip.AddrPort
}

// foreignLane is a remote address whose lane another shard owns.
type foreignLane struct {
	owner int
	peer  PeerID
	index int   // the lane's index in the peer's session
	title title // how the lane holds the address (claim.go)
}

// candidate is a lane another shard owns, as far as finding its datagrams
// goes.
type candidate struct {
	peer  PeerID
	index int
	rxf   crypto.Framer
	slot  int // index in laneTable.cands
}

func newLaneTable(cfg *Config, shards int, st *stats, fold func(*lane)) laneTable {
	return laneTable{
		self: cfg.ID, shards: shards, cfg: cfg, stats: st, fold: fold,
		lanes: map[netip.AddrPort]*lane{}, foreign: map[netip.AddrPort]foreignLane{}, peers: map[PeerID]*peerLanes{},
	}
}

// laneAt is the lane this shard owns at remote address addr (nil: none).
func (t *laneTable) laneAt(addr netip.AddrPort) *lane { return t.lanes[addr] }

// foreignAt is the hand-over entry at addr, if there is one.
func (t *laneTable) foreignAt(addr netip.AddrPort) (foreignLane, bool) {
	f, ok := t.foreign[addr]
	return f, ok
}

// peer is how this shard reaches peer (nil: it knows no session of it).
func (t *laneTable) peer(peer PeerID) *peerLanes { return t.peers[peer] }

// local is lane index of peer if this shard owns it, else nil.
func (t *laneTable) local(peer PeerID, index int) *lane {
	pl := t.peers[peer]
	if pl == nil || index < 0 || index >= len(pl.local) {
		return nil
	}
	return pl.local[index]
}

// entry is peer's record for a session of lanes lanes, made on first use.
// A different lane count means the peer restarted with other shards: its
// old lanes, hand-over entries and candidates go first.
func (t *laneTable) entry(peer PeerID, lanes int) *peerLanes {
	pl := t.peers[peer]
	if pl != nil && len(pl.owners) == lanes {
		return pl
	}
	if pl != nil {
		t.drop(pl)
	}
	pl = &peerLanes{id: peer, owners: make([]int, lanes), local: make([]*lane, lanes), cand: make([]*candidate, lanes), away: make([]netip.AddrPort, lanes), mine: -1}
	for i := range pl.owners {
		pl.owners[i] = i % t.shards
	}
	t.peers[peer] = pl
	return pl
}

// install makes ln, a lane of pl's new session, the lane this shard owns
// at its index (the peer's lane there before, if any, got new keys
// instead: leave, settle), and gives it its remote (settle).
func (t *laneTable) install(pl *peerLanes, ln *lane, p proof, now time.Time) {
	t.own(ln)
	i := ln.cfg.Index
	pl.local[i], pl.owners[i] = ln, t.self
	t.dropCandidate(pl, i)
	t.dropAway(pl, i)
	t.updateMine(pl)
	t.settle(ln, p, now)
}

// leave lets go of the address ln, a lane this shard owns, is bound to
// when a rekey puts it at another address or socket (remote, conn), before
// its config changes (Shard.rekey): its steering entry names the socket it
// leaves. At the same address and socket it keeps its entry, which settle
// claims again without a moment unsteered.
func (t *laneTable) leave(ln *lane, remote netip.AddrPort, conn int) {
	if t.bound(ln) && (ln.cfg.Remote != remote || ln.cfg.Conn != conn) {
		t.unbindRemote(ln.cfg.Remote)
	}
}

// settle gives ln, just installed or rekeyed, its remote if proof p may
// take the address (claim.go): else ln is found by trial until its
// datagrams prove it, and the group's early claim of the address goes
// (dropEarlySteer).
func (t *laneTable) settle(ln *lane, p proof, now time.Time) {
	if !t.claim(ln, ln.cfg.Remote, p, now) {
		t.dropEarlySteer(ln.cfg.Remote, ln.cfg.Conn)
	}
}

// dropAway removes lane index's hand-over entry (pl.away[index]), if it is
// still that lane's: the lane is owned here now, and an entry at an
// address it had before (the offered port) would hand its datagrams to
// the shard it left.
func (t *laneTable) dropAway(pl *peerLanes, index int) {
	a := pl.away[index]
	if !a.IsValid() {
		return
	}
	if f, ok := t.foreign[a]; ok && f.peer == pl.id && f.index == index {
		delete(t.foreign, a)
	}
	pl.away[index] = netip.AddrPort{}
}

// setOwner records that shard owner owns lane index of pl and is reached at
// remote (invalid: where it was, as after a move), so this shard hands that
// lane's packets over; recv (nil: unchanged) are the lane's receive keys,
// kept to recognise its datagrams here (place.go). A lane this shard owned
// there is forgotten, and the lane's hand-over entry names the new owner.
// No hand-over entry at an address a lane of this shard is bound to
// (setForeign).
func (t *laneTable) setOwner(pl *peerLanes, index, owner int, remote netip.AddrPort, recv *crypto.LaneKeys) {
	pl.owners[index] = owner
	if owner == t.self {
		return
	}
	t.forget(pl, index)
	if recv != nil {
		t.setCandidate(pl, index, recv)
	}
	if remote.IsValid() {
		t.hint(pl, index, owner, remote)
		return
	}
	if f, ok := t.entryOf(pl, index); ok {
		f.owner = owner
		t.foreign[pl.away[index]] = f
	}
}

// adopt makes ln, moved here from shard from (MoveLane), the lane this
// shard owns at its index, and gives it its remote with a datagram's
// proof (it proved itself arriving here); refused, its own hand-over
// entry there goes anyway. If a rekey raced the move — a lane installed
// here meanwhile, the owner moved elsewhere (this shard learnt another
// owner than from), or the lane's next keys placed on from again (this
// shard's candidate for the lane has other keys than ln) — the newer
// placement wins: adopt reports false and changes nothing.
func (t *laneTable) adopt(ln *lane, from int, now time.Time) bool {
	pl := t.peers[ln.cfg.Peer]
	i := ln.cfg.Index
	if pl == nil || len(pl.local) != ln.cfg.Lanes || pl.local[i] != nil || pl.owners[i] != from {
		return false
	}
	if c := pl.cand[i]; c != nil && c.rxf != ln.cur.rxf {
		return false // another session's lane i
	}
	t.clock = max(t.clock, ln.title.stamp) // its claims on from came first
	pl.local[i], pl.owners[i] = ln, t.self
	t.updateMine(pl)
	t.own(ln)
	t.dropCandidate(pl, i)
	t.dropAway(pl, i)
	if !t.claim(ln, ln.cfg.Remote, datagramProof, now) {
		if f, ok := t.foreign[ln.cfg.Remote]; ok && f.peer == ln.cfg.Peer {
			delete(t.foreign, ln.cfg.Remote) // its own hand-over entry
		}
	}
	return true
}

// forget stops owning lane index of pl (it moved to another shard, or its
// session or peer went): the shard folds its decoders' counts, roam and
// the timers no longer run it, egress no longer picks it and ingress no
// longer finds it at its remote. The one place a lane leaves the table.
func (t *laneTable) forget(pl *peerLanes, index int) {
	ln := pl.local[index]
	if ln == nil {
		return
	}
	t.fold(ln)
	t.disown(ln)
	pl.local[index] = nil
	t.updateMine(pl)
	t.unbindLane(ln)
}

// removePeer forgets every lane of peer, the hand-over entries that point
// at its lanes on other shards, and its candidates.
func (t *laneTable) removePeer(peer PeerID) {
	if pl := t.peers[peer]; pl != nil {
		t.drop(pl)
		delete(t.peers, peer)
	}
}

// drop empties pl: its lanes, candidates and hand-over entries go.
func (t *laneTable) drop(pl *peerLanes) {
	for i := range pl.local {
		t.forget(pl, i)
		t.dropCandidate(pl, i)
		if f, ok := t.foreign[pl.away[i]]; ok && f.peer == pl.id && f.index == i {
			delete(t.foreign, pl.away[i])
		}
	}
}

// setForeign makes addr the hand-over entry of lane index of pl (owned by
// shard owner, holding addr by ti), dropping the entry it had at another
// address: the one place that adds to foreign. An address a lane of this
// shard is bound to keeps that lane (an initiator's lanes all talk to the
// responder's one port, told apart by our local socket), and another
// peer's entry keeps the address unless ti supersedes its title
// (claim.go): no entry then.
func (t *laneTable) setForeign(pl *peerLanes, index, owner int, addr netip.AddrPort, ti title) {
	if _, ok := t.entryOf(pl, index); ok {
		delete(t.foreign, pl.away[index])
	}
	pl.away[index] = netip.AddrPort{}
	if _, bound := t.lanes[addr]; bound {
		return
	}
	if f, ok := t.foreign[addr]; ok && f.peer != pl.id && !ti.supersedes(f.title) {
		return
	}
	t.foreign[addr] = foreignLane{owner: owner, peer: pl.id, index: index, title: ti}
	pl.away[index] = addr
}

// hint makes addr the hand-over entry of lane index of pl, owned by shard
// owner, where the control core says the lane is (SetLaneOwner at an
// install, FollowLane after a move), before or after its owner's claim
// there (hear). An entry the owner's claim made stays where it is: the
// owner tells where its lane is. A hint never takes another peer's entry
// (setForeign).
func (t *laneTable) hint(pl *peerLanes, index, owner int, addr netip.AddrPort) {
	if f, ok := t.entryOf(pl, index); ok && f.title.stamp != 0 && f.owner == owner {
		return
	}
	t.setForeign(pl, index, owner, addr, title{shard: owner})
}

// entryOf is lane index of pl's hand-over entry (at pl.away[index]), if
// it has one.
func (t *laneTable) entryOf(pl *peerLanes, index int) (foreignLane, bool) {
	a := pl.away[index]
	if !a.IsValid() {
		return foreignLane{}, false
	}
	f, ok := t.foreign[a]
	return f, ok && f.peer == pl.id && f.index == index
}

// own adds ln to the lanes roam tries.
func (t *laneTable) own(ln *lane) {
	ln.slot = len(t.owned)
	t.owned = append(t.owned, ln)
	t.wakes = append(t.wakes, 0)
}

// stir makes tick visit ln, if owned here, at its next run: it sent or
// received, or was given something to do.
func (t *laneTable) stir(ln *lane) {
	if ln.slot >= 0 && ln.slot < len(t.owned) && t.owned[ln.slot] == ln {
		t.wakes[ln.slot] = 0
	}
}

// disown removes ln from the lanes roam tries.
func (t *laneTable) disown(ln *lane) {
	if ln.slot < 0 || ln.slot >= len(t.owned) || t.owned[ln.slot] != ln {
		return
	}
	last := len(t.owned) - 1
	t.owned[ln.slot] = t.owned[last]
	t.owned[ln.slot].slot = ln.slot
	t.owned[last] = nil
	t.owned = t.owned[:last]
	t.wakes[ln.slot] = t.wakes[last]
	t.wakes = t.wakes[:last]
	ln.slot = -1
}

// updateMine records the first lane of pl this shard owns: egress sends a
// peer's packets read here on it rather than handing them to another shard
// when the lane its index picks lives elsewhere.
func (t *laneTable) updateMine(pl *peerLanes) {
	pl.mine = -1
	for i, ln := range pl.local {
		if ln != nil {
			pl.mine = i
			return
		}
	}
}

// setCandidate records lane index of pl, owned by another shard, under its
// receive keys.
func (t *laneTable) setCandidate(pl *peerLanes, index int, recv *crypto.LaneKeys) {
	if c := pl.cand[index]; c != nil {
		c.rxf = crypto.NewFramer(recv)
		return
	}
	c := &candidate{peer: pl.id, index: index, rxf: crypto.NewFramer(recv), slot: len(t.cands)}
	pl.cand[index] = c
	t.cands = append(t.cands, c)
}

// dropCandidate forgets lane index of pl as a candidate (this shard owns
// it now, or the peer went).
func (t *laneTable) dropCandidate(pl *peerLanes, index int) {
	c := pl.cand[index]
	if c == nil {
		return
	}
	pl.cand[index] = nil
	last := len(t.cands) - 1
	t.cands[c.slot] = t.cands[last]
	t.cands[c.slot].slot = c.slot
	t.cands[last] = nil
	t.cands = t.cands[:last]
}
