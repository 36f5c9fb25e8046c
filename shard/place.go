package shard

import (
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/crypto"
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
// once a second per lane) and the router moves the lane, keys, counters,
// FEC and replay state, to the shard its datagrams arrive on (MoveLane):
// at steady state nothing takes a ring hop.

// candidate is a lane another shard owns, as far as finding its datagrams
// goes.
type candidate struct {
	peer  PeerID
	index int
	rxf   crypto.Framer
	slot  int // index in Shard.cands
}

// misplacedEvery bounds how often a lane is reported misplaced while the
// router moves it.
const misplacedEvery = time.Second

// setCandidate records lane index of peer, owned by another shard, under
// its receive keys.
func (s *Shard) setCandidate(pl *peerLanes, peer PeerID, index int, recv *crypto.LaneKeys) {
	if c := pl.cand[index]; c != nil {
		c.rxf = crypto.NewFramer(recv)
		return
	}
	c := &candidate{peer: peer, index: index, rxf: crypto.NewFramer(recv), slot: len(s.cands)}
	pl.cand[index] = c
	s.cands = append(s.cands, c)
}

// dropCandidate forgets lane index of pl as a candidate (this shard owns
// it now, or the peer went).
func (s *Shard) dropCandidate(pl *peerLanes, index int) {
	c := pl.cand[index]
	if c == nil {
		return
	}
	pl.cand[index] = nil
	last := len(s.cands) - 1
	s.cands[c.slot] = s.cands[last]
	s.cands[c.slot].slot = c.slot
	s.cands[last] = nil
	s.cands = s.cands[:last]
}

// dropCandidates forgets every candidate of pl.
func (s *Shard) dropCandidates(pl *peerLanes) {
	for i := range pl.cand {
		s.dropCandidate(pl, i)
	}
}

// tryCandidates hands data to the owner of the first candidate whose tag
// it matches; it reports whether one did. Trials come from the roam budget.
func (s *Shard) tryCandidates(data []byte, from netip.AddrPort) bool {
	n := len(s.cands)
	for range n {
		i, ok := s.nextTrial(&s.candNext, n)
		if !ok {
			return false
		}
		c := s.cands[i]
		if !c.rxf.Matches(data) {
			continue
		}
		pl := s.peers[c.peer]
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
// without steering (Config.Misplaced: the router moves it there).
func (s *Shard) misplaced(ln *lane, via int) {
	if !ln.misplacedAt.IsZero() && s.now.Sub(ln.misplacedAt) < misplacedEvery {
		return
	}
	ln.misplacedAt = s.now
	if s.cfg.Steer != nil && s.lanes[ln.cfg.Remote] == ln {
		if ln.steered && s.now.Sub(ln.steeredAt) < misplacedEvery {
			return // just steered: datagrams already on their way elsewhere
		}
		if !ln.steered {
			s.steer(ln.cfg.Remote, ln, true)
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
	pl := s.peers[peer]
	if pl == nil || index >= len(pl.local) || pl.local[index] == nil || to == s {
		return
	}
	ln := pl.local[index]
	s.foldLane(ln)
	s.disown(ln)
	pl.local[index] = nil
	pl.owners[index] = to.id
	s.updateMine(pl)
	s.unbindLane(ln)
	s.setForeign(pl, peer, index, to.id, ln.cfg.Remote)
	s.setCandidate(pl, peer, index, &ln.cfg.Recv)
	from := s.id
	to.Do(func(t *Shard) { t.adoptLane(ln, from) })
}

// adoptLane makes ln, moved from shard from, this shard's. If a rekey raced
// the move — a lane installed here meanwhile, or the owner moved elsewhere
// (this shard learnt another owner than from) — the newer placement wins
// and ln is dropped.
func (s *Shard) adoptLane(ln *lane, from int) {
	pl := s.peers[ln.cfg.Peer]
	idx := ln.cfg.Index
	if pl == nil || len(pl.local) != ln.cfg.Lanes || pl.local[idx] != nil || pl.owners[idx] != from {
		return
	}
	for l := ln; l != nil; l = l.prev {
		s.bindDeliver(l)
	}
	pl.local[idx] = ln
	pl.owners[idx] = s.id
	s.updateMine(pl)
	s.own(ln, nil)
	s.dropCandidate(pl, idx)
	if !s.claim(ln.cfg.Remote, ln, datagramProof) { // it proved itself arriving here
		if f, ok := s.foreign[ln.cfg.Remote]; ok && f.peer == ln.cfg.Peer {
			delete(s.foreign, ln.cfg.Remote) // its own hand-over entry
		}
	}
	if d, ok := ln.enc.Deadline(); ok && (s.fecDue.IsZero() || d.Before(s.fecDue)) {
		s.fecDue = d
	}
	s.count(LaneAdopted)
	s.releaseWaiting(ln.cfg.Peer)
}

// updateMine records the first lane of pl this shard owns: egress sends a
// peer's packets read here on it rather than handing them to another shard
// when the lane its index picks lives elsewhere.
func (s *Shard) updateMine(pl *peerLanes) {
	pl.mine = -1
	for i, ln := range pl.local {
		if ln != nil {
			pl.mine = i
			return
		}
	}
}
