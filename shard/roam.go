package shard

import (
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/crypto"
)

// Roaming: a datagram that matches no lane at its source address (ingress.go)
// may be a lane's peer writing from a new address (renumbering, a failover
// to another uplink, a NAT rebinding) or a second peer behind the address of
// another (a shared NAT). No byte on the wire names the lane, so the shard
// tries the tags of the lanes it owns. A tag that verifies proves the key
// holder framed the datagram but not that it is fresh: the datagram is
// processed as usual, and only if one of its symbols then opens and passes
// the replay check (an authenticated datagram the lane has not seen) does
// the lane's remote move to the new address (for all its keys: the address
// is the lane's), and the address map follow. A replayed or
// unauthenticated datagram never moves a lane, and neither does one from
// an address another peer's lane was heard from within addrHold
// (claim.go): the peer's keys prove the datagram is its own, not where it
// came from.
//
// Tag trials cost a fixed-size SipHash per lane tried (about 60-100 ns at
// any datagram length: crypto/frame.go), and anyone can send datagrams
// from new addresses, so they are paid from a token bucket
// (roamTrialRate, roamTrialBurst); trials continue round-robin
// across the owned lanes, so a flood that drains the bucket delays a moved
// peer's detection but cannot make it skip one lane for ever. A peer that
// cannot be found this way is found by its next handshake.

// roam tries data's tag against the lanes this shard owns (except skip,
// already tried) and, on a match, processes it and moves the lane to from
// if the datagram proves itself (and reports the lane misplaced if it
// arrived on another shard, via). It reports whether a lane took data.
func (s *Shard) roam(skip *lane, via int, data []byte, from netip.AddrPort) bool {
	n := len(s.table.owned)
	for range n {
		i, ok := s.nextTrial(&s.roamNext, n)
		if !ok {
			return false
		}
		ln := s.table.owned[i]
		if ln == skip {
			continue
		}
		if ln.prev != nil {
			s.roamTokens-- // deframe may try the previous keys too
		}
		confirming := !ln.cur.confirmed
		keys, h, sym, err := s.deframe(ln, data)
		switch err {
		case nil:
		case crypto.ErrTag:
			continue
		case crypto.ErrShort:
			return false // too short for any lane
		default:
			s.count(DropBadHeader) // the tag verified: it was this lane's
			return true
		}
		before := s.authed
		s.receive(ln, keys, h, sym)
		if s.authed != before {
			if s.table.laneAt(from) != ln {
				p := datagramProof
				if confirming && keys == ln.cur && ln.cfg.Asked && from == ln.cfg.Remote {
					// The first datagram under a responder's new keys,
					// from where the handshake came: it completes it.
					p = handshakeProof
				}
				s.moveLane(ln, from, s.localOf(via), p)
			}
			if via != s.id {
				s.misplaced(ln, via)
			}
		}
		return true
	}
	return false
}

// moveLane makes to ln's remote and gives it the address in the map, if
// proof p may take it (claim.go); a lane of another peer that held it is
// reached by trial until it completes a handshake. A refused move is
// counted (lane_move_refused) and changes nothing: the datagram was
// delivered, and ln keeps its address. local is the address of ours the
// datagram was sent to (zero: unknown): the lane answers from it now.
func (s *Shard) moveLane(ln *lane, to netip.AddrPort, local netip.Addr, p proof) {
	if !s.table.claim(ln, to, p, s.now) {
		s.count(LaneMoveRefused)
		return
	}
	if local.IsValid() {
		ln.cfg.Local = local
	}
	from := ln.cfg.Remote
	if from == to {
		return
	}
	s.setRemote(ln, to, true)
	s.reportMove(ln)
}

// reportMove tells the control core (Config.Moved) where ln went since it last
// reported, at most once a second per lane: a peer whose lanes leave
// through different public addresses (per-flow dual-WAN balancing, a NAT
// pooling addresses per flow) must not turn every datagram into a router
// event. A report held back goes out from the lane's timers
// (controlTimers), so the last move is never lost.
func (s *Shard) reportMove(ln *lane) {
	if s.cfg.Moved == nil || ln.reported == ln.cfg.Remote {
		ln.movePending = false
		return
	}
	if !ln.movedAt.IsZero() && s.now.Sub(ln.movedAt) < time.Second {
		ln.movePending = true
		return
	}
	from := ln.reported
	ln.reported, ln.movedAt, ln.movePending = ln.cfg.Remote, s.now, false
	s.cfg.Moved(s.id, ln.cfg.Peer, ln.cfg.Index, from, ln.cfg.Remote)
}

// setRemote points ln (under all its keys) at to; counted counts it as a
// move proven by a datagram (lane_moved), not the operator's.
func (s *Shard) setRemote(ln *lane, to netip.AddrPort, counted bool) {
	ln.cfg.Remote = to
	ln.newPath(s.now)
	if counted {
		ln.moves++
		s.count(LaneMoved)
	}
}

// FollowPeer moves peer's lanes on this shard that talk to from over to to,
// keeping their ports: another shard saw one of the peer's lanes prove
// itself at to, so the peer's address changed (renumbering, failover),
// and waiting for each lane's own traffic would leave a lane that only we
// send on talking to the old address. A lane that heard from its remote
// within followQuiet moves only if it then hears nothing for followQuiet
// (followPending): a peer whose lanes leave through different public
// addresses keeps each lane where its datagrams come from, while after a
// renumbering the old address falls silent. Call it on the shard's
// goroutine (Do).
func (s *Shard) FollowPeer(peer PeerID, from, to netip.Addr) {
	s.relocate(peer, true, func(a netip.AddrPort) (netip.AddrPort, bool) {
		return netip.AddrPortFrom(to, a.Port()), a.Addr() == from
	})
}

// FollowLane records that lane index of peer, owned by another shard, is
// now at to (it moved there on an authenticated datagram, Config.Moved):
// its hand-over entry follows, at most one per lane, so this shard hands
// the lane's datagrams on and never lets another peer's datagram claim
// the address (claim.go). The owner's own news of the move (hear) came
// first and decides; this is its hint (laneTable.hint). Call it through
// Do.
func (s *Shard) FollowLane(peer PeerID, index int, to netip.AddrPort) {
	pl := s.table.peer(peer)
	if pl == nil || index < 0 || index >= len(pl.owners) || pl.owners[index] == s.id {
		return
	}
	s.table.hint(pl, index, pl.owners[index], to)
}

// MoveRemote moves peer's lanes on this shard that talk to from over to to
// (the operator changed the peer's Endpoint). Call it through Do.
func (s *Shard) MoveRemote(peer PeerID, from, to netip.AddrPort) {
	s.relocate(peer, false, func(a netip.AddrPort) (netip.AddrPort, bool) { return to, a == from })
}

// relocate moves peer's lanes on this shard whose remote move maps
// elsewhere (follow: a consequence of a proven move, skipping lanes that
// heard from their remote within followQuiet). Every shard does so for
// its own lanes; the hand-over entries follow what each owner claims
// (hear), not what it was asked to.
func (s *Shard) relocate(peer PeerID, follow bool, move func(netip.AddrPort) (netip.AddrPort, bool)) {
	pl := s.table.peer(peer)
	if pl == nil {
		return
	}
	for _, ln := range pl.local {
		if ln == nil {
			continue
		}
		next, ok := move(ln.cfg.Remote)
		if !ok || next == ln.cfg.Remote {
			continue
		}
		if follow && s.now.Sub(ln.lastRx) < followQuiet {
			ln.followTo, ln.followAt = next, s.now
			s.table.stir(ln)
			continue
		}
		s.moveUnproven(ln, next, follow)
	}
}

// followPending moves ln to the address FollowPeer proposed if it has
// heard nothing since (tick runs it through controlTimers), and drops the
// proposal if it did.
func (s *Shard) followPending(ln *lane) {
	if !ln.followTo.IsValid() {
		return
	}
	if ln.lastRx.After(ln.followAt) {
		ln.followTo = netip.AddrPort{} // its address still works
		return
	}
	if s.now.Sub(ln.followAt) < followQuiet {
		return
	}
	next := ln.followTo
	ln.followTo = netip.AddrPort{}
	if next == ln.cfg.Remote {
		return // it got there meanwhile: no move to count
	}
	s.moveUnproven(ln, next, true)
}

// moveUnproven moves ln to next on no proof of its own (a follow, counted,
// or the operator's move): unless another peer's lane holds the address
// (claim.go), in which case the lane stays where it is. A follow still
// proposed (followPending) is settled by the move. The router moved the
// peer's endpoint itself (with the first lane, on a follow), so the move
// is not reported back.
func (s *Shard) moveUnproven(ln *lane, next netip.AddrPort, counted bool) {
	if !s.table.claim(ln, next, unproven, s.now) {
		return
	}
	ln.followTo = netip.AddrPort{}
	s.setRemote(ln, next, counted)
	ln.reported = next
}

// nextTrial spends one trial from the budget and advances *pos
// round-robin over n entries; false when the budget is empty.
func (s *Shard) nextTrial(pos *int, n int) (int, bool) {
	if s.roamTokens <= 0 {
		return 0, false
	}
	s.roamTokens--
	s.count(RoamTrials)
	if *pos++; *pos >= n {
		*pos = 0
	}
	return *pos, true
}

// refillRoam adds the tokens earned since the last refill (tick calls it).
func (s *Shard) refillRoam() {
	if !s.roamAt.IsZero() {
		earned := int(s.now.Sub(s.roamAt) * roamTrialRate / time.Second)
		if earned <= 0 {
			return
		}
		s.roamTokens = min(s.roamTokens+earned, roamTrialBurst)
	}
	s.roamAt = s.now
}
