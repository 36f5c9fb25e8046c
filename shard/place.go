package shard

import (
	"net/netip"
	"time"
)

// Where a lane lives. Lane i of a session starts on the shard the router
// picks (shard i), and a datagram reaches a shard by the listen group's
// steering (package udp): the eBPF map of lane remotes the shards fill
// (steer.go), or, where the kernel refuses eBPF, the low bits of its
// source port. A datagram from a port nobody steered — a NAT rewrote it,
// the entry is not there yet — arrives on whichever shard the kernel's
// hash (or the new port) picks. So every shard keeps, for each lane
// another shard owns, the lane's receive tag keys (a candidate): a
// datagram that matches no lane of its own is tried against them
// (roam.go's trial budget) and handed, still framed, to the owner. When a
// datagram that came that way proves itself on the owner (it opens and is
// no replay), the owner steers its address to itself (misplaced), or,
// where it cannot, reports the lane misplaced (Config.Misplaced, at most
// once a second per lane) and the control core moves the lane, keys, counters,
// FEC and replay state, to the shard its datagrams arrive on (MoveLane):
// at steady state nothing takes a ring hop.

// misplacedEvery bounds how often a lane is reported misplaced while the
// router moves it.
const misplacedEvery = time.Second

// tryCandidates hands data to the owner of the first candidate whose tag
// it matches; it reports whether one did. Trials come from the roam budget.
func (s *Shard) tryCandidates(data []byte, from netip.AddrPort) bool {
	n := len(s.table.cands)
	for range n {
		i, ok := s.nextTrial(&s.candNext, n)
		if !ok {
			return false
		}
		c := s.table.cands[i]
		if !c.rxf.Matches(data) {
			continue
		}
		pl := s.table.peer(c.peer)
		if owner := pl.owners[c.index]; owner != s.id {
			s.handIngress(owner, data, from)
			return true
		}
		return false
	}
	return false
}

// misplaced reports that ln's datagrams arrive on shard via (a datagram
// under its keys was handed over from there). Where the listen group
// steers by lane remote, the cure is to steer the lane's remote to its
// socket, now with proof: the entry was missing, lost to a race or held
// by an unproven claim. If the lane was steered a while ago (not by the
// datagram that brought us here) and still arrives elsewhere, the map does
// not decide where its datagrams go (the entry was lost, or the kernel
// delivered them without running the program), and the lane is moved as
// without steering (Config.Misplaced: the control core moves it there).
func (s *Shard) misplaced(ln *lane, via int) {
	if !ln.misplacedAt.IsZero() && s.now.Sub(ln.misplacedAt) < misplacedEvery {
		return
	}
	ln.misplacedAt = s.now
	if s.cfg.Steer != nil && s.table.bound(ln) {
		if ln.steered && s.now.Sub(ln.steeredAt) < misplacedEvery {
			return // just steered: datagrams already on their way elsewhere
		}
		if !ln.steered {
			s.table.steer(ln.cfg.Remote, ln, true, s.now)
			if ln.steered {
				return
			}
		}
	}
	if s.cfg.Misplaced != nil {
		s.cfg.Misplaced(s.id, ln.cfg.Peer, ln.cfg.Index, via)
	}
}

// MoveLane gives lane index of peer, which this shard owns, to shard to:
// this shard forgets it (it keeps the lane as a candidate and hands the
// lane's datagrams on) and to adopts it on its own goroutine. The caller
// tells the other shards the new owner (SetLaneOwner). Call it on this
// shard's goroutine (Do).
func (s *Shard) MoveLane(peer PeerID, index int, to *Shard) {
	ln := s.table.local(peer, index)
	if ln == nil || to == s {
		return
	}
	s.table.setOwner(s.table.peer(peer), index, to.id, ln.cfg.Remote, &ln.cfg.Recv)
	from := s.id
	to.Do(func(t *Shard) { t.adoptLane(ln, from) })
}

// adoptLane makes ln, moved from shard from, this shard's (laneTable.adopt:
// unless a rekey raced the move and placed the lane elsewhere).
func (s *Shard) adoptLane(ln *lane, from int) {
	if !s.table.adopt(ln, from, s.now) {
		return
	}
	for _, ks := range ln.keysets() {
		if ks == nil {
			continue
		}
		s.bindDeliver(ln, ks)
		if ks.encBusy {
			// The shard it left forgot it (foldLane): flushed here now.
			ks.encBusy = false
			s.noteBusy(ln, ks)
		}
		if d, ok := ks.enc.Deadline(); ok && (s.fecDue.IsZero() || d.Before(s.fecDue)) {
			s.fecDue = d
		}
	}
	s.count(LaneAdopted)
	s.releaseWaiting(ln.cfg.Peer)
}
