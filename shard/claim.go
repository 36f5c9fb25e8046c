package shard

import (
	"net/netip"
	"time"
)

// Address ownership, the lane table's rule (table.go). Ingress finds a
// lane by a datagram's source address (laneTable.lanes), the listen
// group's steering map sends that address to the lane's socket (steer.go),
// and a hand-over entry (laneTable.foreign) names the shard that owns
// another shard's lane at it. An address has one owner. Which lane may
// take an address from another peer's lane depends on what showed that the
// lane is there, and mayClaim is the one place that decides it, and claim
// the one place that acts on it, for every caller: a handshake's install,
// a datagram's move (roam.go), a follow or an operator's move, an adoption
// (place.go).
//
// A peer's keys prove that a datagram is the peer's, not where the peer
// is: an authenticated peer can put any source address on datagrams under
// its own keys. So a proven datagram takes an address only from a lane
// that has gone quiet there; a lane heard from its address within
// addrHold keeps it. What wins an address back is a completed handshake
// from it: a message of ours sent to the address was answered from it
// under keys only that exchange made, which a peer cannot do from an
// address it does not receive at.
//
// Across shards. A shard sees the lanes other shards own only through
// their hand-over entries, so every claim that binds an address is news
// for the other shards (addrNews, through their command queues: Do): each
// records the lane's entry there, and a lane of another peer it has bound
// at the address gives it up if the claim outranks the lane's own
// (outranks). Two claims cross when neither shard had heard of the other's
// lane there (its news still queued, or never sent: a shard learns a lane
// of the same peer at an address it holds only as that lane); the rule
// then decides by the claims' titles, each shard alike, so exactly one
// keeps the address: a completed handshake over anything else, the later
// of two handshakes, the earlier of two other claims (the address's
// holder against a newcomer). "Earlier" and "later" are Lamport stamps
// (laneTable.clock), so a claim made after hearing of another is later
// than it. A shard whose lane keeps the address tells the others again,
// so the claimant, which did not know, gives it up.

// proof is what shows that a lane's peer is at an address.
type proof uint8

const (
	// unproven: a handshake's source (anyone can send an initiation from
	// any address), an operator's endpoint, another lane's move.
	unproven proof = iota
	// datagramProof: a datagram under the lane's keys came from the
	// address, opened, and was not a replay.
	datagramProof
	// handshakeProof: a completed handshake from the address. As
	// initiator, the response came from the address the initiation was
	// sent to (LaneConfig.Proven); as responder, the first datagram under
	// the new keys came from the address the initiation came from and the
	// response went to (LaneConfig.Asked).
	handshakeProof
)

// addrHold is how long an address stays with the lane last heard from it
// (or installed) against another peer's datagrams. A live session's lane
// hears its peer, or is installed anew, at least at every rekey, traffic
// or not: the initiator rekeys every 120-132 s and a responder whose
// initiator did not re-initiates after 150-165 s (control/timing.go). An
// idle lane hears nothing between rekeys, since a keepalive asks for no
// answer, so a hold shorter than that would let a peer with spoofed
// sources take an idle peer's address. An address taken after this much
// silence was left; the cost of the long hold is that a peer that really
// took over a left address mid-session is reached by trial until its
// next handshake, which takes the address at once.
const addrHold = 3 * time.Minute

// title is how a lane came to hold its address: the claim's proof, its
// Lamport stamp and the shard that made it. A hand-over entry the control
// core made (SetLaneOwner, FollowLane: where a lane should be, before its
// owner claimed it) has none: stamp 0.
type title struct {
	proof proof
	stamp uint64
	shard int
}

// outranks reports whether a lane holding an address by a should keep it
// against another peer's lane holding it by b, when the two claims
// crossed: the rule of mayClaim for claims that did not see each other.
// A completed handshake wins over any other claim, and the later of two
// handshakes wins; of two other claims the earlier wins (a proven
// datagram never takes an address from a lane that holds it, and an
// unproven claim never does). Equal stamps (two shards' clocks) go to the
// lower shard. A title without a stamp outranks nothing, and anything
// with one outranks it.
func (a title) outranks(b title) bool {
	switch {
	case a.stamp == 0 || b.stamp == 0:
		return b.stamp == 0 && a.stamp != 0
	case (a.proof == handshakeProof) != (b.proof == handshakeProof):
		return a.proof == handshakeProof
	case a.stamp == b.stamp:
		return a.shard < b.shard
	case a.proof == handshakeProof:
		return a.stamp > b.stamp
	default:
		return a.stamp < b.stamp
	}
}

// supersedes reports whether a hand-over entry by title a replaces
// another peer's entry by b at the same address: a outranks b, or both
// are one shard's claims and a is the newer (that shard bound the address
// to a's lane after b's: one lane per address on a shard).
func (a title) supersedes(b title) bool {
	if a.stamp != 0 && b.stamp != 0 && a.shard == b.shard {
		return a.stamp > b.stamp
	}
	return a.outranks(b)
}

// addrNews is a claim another shard made: lane index of peer's session
// of lanes lanes, owned by shard owner, holds addr by title.
type addrNews struct {
	peer         PeerID
	index, lanes int
	owner        int
	addr         netip.AddrPort
	title        title
}

// mayClaim reports whether ln may own addr on this shard with proof p at
// time now. An address that no other peer's lane holds here is ln's for
// any proof. One that another peer's lane holds goes to a completed
// handshake always, to a proven datagram only if that lane was not heard
// (nor installed) within addrHold, and never to an unproven claim. A
// hand-over entry of another peer's lane (owned by another shard, whose
// last datagram this shard cannot see) counts as heard. A claim made here
// without knowing of another shard's lane at addr meets it in hear, where
// outranks applies this rule to the two claims.
func (t *laneTable) mayClaim(addr netip.AddrPort, ln *lane, p proof, now time.Time) bool {
	if p == handshakeProof {
		return true
	}
	if held := t.lanes[addr]; held != nil && held != ln && held.cfg.Peer != ln.cfg.Peer {
		if p == unproven {
			return false
		}
		last := held.lastRx
		if held.cur.installed.After(last) {
			last = held.cur.installed // its keys: a handshake
		}
		return now.Sub(last) >= addrHold
	}
	if f, ok := t.foreign[addr]; ok && f.peer != ln.cfg.Peer {
		return false
	}
	return true
}

// claim makes addr ln's, if mayClaim allows, and reports whether it did:
// ingress finds ln there, the steering map sends addr to ln's socket
// (taking the entry from another socket only with proof: bind), no
// hand-over entry is left at it, and ln's previous address is let go (a
// lane that holds addr already, as after a rekey, keeps its entry: no
// moment unsteered). The caller points ln's remote at addr
// (Shard.setRemote), which the table expects of a bound lane
// (table_check.go).
func (t *laneTable) claim(ln *lane, addr netip.AddrPort, p proof, now time.Time) bool {
	if !t.mayClaim(addr, ln, p, now) {
		return false
	}
	if t.lanes[addr] != ln {
		t.unbindLane(ln)
	}
	t.bind(addr, ln, p != unproven, now)
	delete(t.foreign, addr)
	t.clock++
	ln.title = title{proof: p, stamp: t.clock, shard: t.self}
	t.announce(ln, addr)
	return true
}

// announce tells the other shards that ln, which this shard owns, holds
// addr (hear).
func (t *laneTable) announce(ln *lane, addr netip.AddrPort) {
	if t.tell != nil {
		t.tell(addrNews{peer: ln.cfg.Peer, index: ln.cfg.Index, lanes: ln.cfg.Lanes, owner: t.self, addr: addr, title: ln.title})
	}
}

// hear takes another shard's claim (announce). A lane of another peer
// bound at the address here gives it up if the claim outranks its own;
// else it keeps it, takes its steering entry back from a proven claim,
// and this shard tells the others again, so the claimant gives it up.
// The claimed lane's hand-over entry moves to the address, if this shard
// knows the lane's owner to be the claimant (else the news is from before
// a move the control core told this shard of, or after one it has not
// yet) and no other peer's entry there supersedes it. A lane this shard
// owns now (it moved here since) has no entry here.
func (t *laneTable) hear(n addrNews, now time.Time) {
	t.clock = max(t.clock, n.title.stamp)
	pl := t.peers[n.peer]
	if pl != nil && len(pl.local) == n.lanes && pl.local[n.index] != nil {
		return
	}
	if cur := t.lanes[n.addr]; cur != nil && cur.cfg.Peer != n.peer {
		if !n.title.outranks(cur.title) {
			if n.title.proof != unproven {
				t.steer(n.addr, cur, true, now)
			}
			t.announce(cur, n.addr)
			return
		}
		t.unbindRemote(n.addr) // found by trial until it proves itself
		cur.title = title{}
	}
	if pl == nil || len(pl.local) != n.lanes || pl.owners[n.index] != n.owner {
		return
	}
	t.setForeign(pl, n.index, n.owner, n.addr, n.title)
}
