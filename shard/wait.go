package shard

import (
	"time"

	"github.com/yip-router/yip-router/ring"
)

// The wait queue: packets egress.go routed to a peer without lanes wait
// here (bounded per peer and per shard, aged out by timers.go) while the
// control core handshakes (Config.NoSession); installing a lane (lane.go)
// releases them back into egress.

// Bounds of the queue of packets waiting for a handshake, per shard.
const (
	waitPerPeer  = 64
	waitPerShard = 1024 // all peers: the pool must never run dry waiting
)

type waitQueue struct {
	pkts    []*ring.Packet
	at      []time.Time
	lastAsk time.Time
}

// wait queues a packet for a peer without lanes and asks for a handshake.
func (s *Shard) wait(peer PeerID, p *ring.Packet) {
	q := s.waiting[peer]
	if q == nil {
		q = &waitQueue{pkts: make([]*ring.Packet, 0, waitPerPeer), at: make([]time.Time, 0, waitPerPeer)}
		s.waiting[peer] = q
	}
	if len(q.pkts) == waitPerPeer {
		// Keep the newest: drop the oldest.
		s.count(DropNoSession)
		s.release(q.pkts[0])
		s.waitTotal--
		copy(q.pkts, q.pkts[1:])
		copy(q.at, q.at[1:])
		q.pkts, q.at = q.pkts[:len(q.pkts)-1], q.at[:len(q.at)-1]
	}
	if s.waitTotal >= waitPerShard {
		s.count(DropNoSession)
		s.release(p)
		return
	}
	s.waitTotal++
	q.pkts = append(q.pkts, p)
	q.at = append(q.at, s.now)
	if s.cfg.NoSession != nil && s.now.Sub(q.lastAsk) >= noSessionAsk {
		q.lastAsk = s.now
		s.cfg.NoSession(s.id, peer)
	}
}

// releaseWaiting sends the packets that waited for peer's handshake.
func (s *Shard) releaseWaiting(peer PeerID) {
	q := s.waiting[peer]
	if q == nil {
		return
	}
	delete(s.waiting, peer)
	s.waitTotal -= len(q.pkts)
	for _, p := range q.pkts {
		s.egress(p)
	}
}

// expireWaiting drops packets that waited too long for a handshake.
func (s *Shard) expireWaiting() {
	for peer, q := range s.waiting {
		k := 0
		for k < len(q.pkts) && s.now.Sub(q.at[k]) > waitMaxAge {
			s.count(DropNoSession)
			s.release(q.pkts[k])
			s.waitTotal--
			k++
		}
		if k == 0 {
			continue
		}
		q.pkts = append(q.pkts[:0], q.pkts[k:]...)
		q.at = append(q.at[:0], q.at[k:]...)
		if len(q.pkts) == 0 && s.now.Sub(q.lastAsk) > waitMaxAge {
			delete(s.waiting, peer)
		}
	}
}
