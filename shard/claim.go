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

// mayClaim reports whether ln may own addr on this shard with proof p at
// time now. An address that no other peer's lane holds here is ln's for
// any proof. One that another peer's lane holds goes to a completed
// handshake always, to a proven datagram only if that lane was not heard
// (nor installed) within addrHold, and never to an unproven claim. A
// hand-over entry of another peer's lane (owned by another shard, whose
// last datagram this shard cannot see) counts as heard.
func (t *laneTable) mayClaim(addr netip.AddrPort, ln *lane, p proof, now time.Time) bool {
	if p == handshakeProof {
		return true
	}
	if cur := t.lanes[addr]; cur != nil && cur != ln && cur.cfg.Peer != ln.cfg.Peer {
		if p == unproven {
			return false
		}
		last := cur.heard()
		if cur.installed.After(last) {
			last = cur.installed
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
// hand-over entry is left at it, and ln's previous address is let go. The
// caller points ln's remote at addr (Shard.setRemote), which the table
// expects of a bound lane (table_check.go).
func (t *laneTable) claim(ln *lane, addr netip.AddrPort, p proof, now time.Time) bool {
	if !t.mayClaim(addr, ln, p, now) {
		return false
	}
	t.unbindLane(ln)
	t.bind(addr, ln, p != unproven, now)
	delete(t.foreign, addr)
	return true
}
