package control

// Lane events: what the shards report about a peer's lanes (traffic waits
// for a session, a lane moved to a new address, a lane went unanswered, a
// lane's datagrams arrive on another shard, a responder's new keys were
// confirmed). The shards call the exported methods on their own
// goroutines; each queues its event (queue.go) and returns without taking
// the core lock, and the control loop applies them (the …Locked methods)
// in the order they came. FollowMoved needs no core state: it acts at
// once, on the shard's goroutine.

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// NoSession: traffic on shard sh waits for peer id. Queued; the control
// loop marks the peer wanted and Tick starts the handshake.
func (c *Core) NoSession(sh int, id shard.PeerID) {
	c.events.put(event{kind: evNoSession, sh: sh, peer: id})
}

func (c *Core) noSessionLocked(e *event) {
	if p := c.byID[e.peer]; p != nil && !p.want {
		p.want = true
		p.wantSince = c.now()
	}
}

// FollowMoved: an authenticated datagram moved lane index of peer, on
// shard sh, from one address to another. The other shards learn where the
// lane is now (their hand-over entry for it: a NAT's new port too, so no
// other peer's datagram can take that address there), and a new IP means
// the peer moved: its lanes on the other shards follow (same ports). It
// reads no core state and takes no lock (the plane queues the work on the
// shards), so package router calls it on the reporting shard's goroutine,
// keeping moves in their order; PeerMoved then updates the endpoint.
func (c *Core) FollowMoved(sh int, peer shard.PeerID, index int, from, to netip.AddrPort) {
	c.dp.FollowPeer(sh, peer, index, from, to)
}

// PeerMoved: lane index of peer moved from one address to another (see
// FollowMoved). Queued, never dropped (queue.go); the control loop moves
// the endpoint for handshakes: it follows the endpoint's lane (the lane
// whose remote it is), or else the new IP.
func (c *Core) PeerMoved(sh int, peer shard.PeerID, index int, from, to netip.AddrPort) {
	c.events.put(event{kind: evMoved, sh: sh, peer: peer, index: index, from: from, to: to})
}

func (c *Core) peerMovedLocked(e *event) {
	p := c.byID[e.peer]
	if p == nil {
		return
	}
	ep := p.endpoint
	switch {
	case e.index == p.endpointLane && ep == e.from:
		ep = e.to
	case ep.Addr() == e.from.Addr():
		ep = netip.AddrPortFrom(e.to.Addr(), ep.Port())
	default:
		return
	}
	if ep != p.endpoint {
		c.log.Info("peer roamed", zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("from", p.endpoint), zap.Stringer("to", ep))
		c.setEndpoint(p, ep)
	}
}

// PeerSilent: a lane of peer on shard sh has been sending without hearing
// back (shard/timing.go's noReplyAfter). Queued; the control loop starts a
// new handshake (the peer presumably restarted and lost its keys), unless
// one is under way or backing off. With oldFraming the peer's datagrams
// arrive framed by the previous wire version (its handshakes complete,
// nothing after them passes the tag), which is worth one WARN per peer:
// handshakes alone would not tell the operator why the tunnel carries
// nothing.
func (c *Core) PeerSilent(sh int, peer shard.PeerID, oldFraming bool) {
	c.events.put(event{kind: evSilent, sh: sh, peer: peer, oldFraming: oldFraming})
}

func (c *Core) peerSilentLocked(e *event) {
	now := c.now()
	p := c.byID[e.peer]
	if p == nil {
		return
	}
	if e.oldFraming && !p.mismatchWarned {
		p.mismatchWarned = true
		c.log.Warn("peer runs a yip-router of wire version 1: handshakes complete but its datagrams fail this version's tag; upgrade both ends",
			zap.String("peer", p.cfg.PublicKey.String()), zap.Int("wire_version", crypto.WireVersion), zap.Int("peer_wire_version", 1), zap.Int("shard", e.sh))
	}
	if p.sess == nil || (p.init != nil && now.Sub(p.initAt) < HandshakeTimeout) || now.Before(p.nextTry) {
		return
	}
	c.log.Info("peer stopped answering; new handshake", zap.String("peer", p.cfg.PublicKey.String()), zap.Int("shard", e.sh))
	c.initiate(p, now)
}

// LaneConfirmed: the first datagram under our new keys as responder
// arrived on the lane the initiation came from, so the peer received our
// response at remote: the address is proven, and initiations from it get
// cookie replies past cookieReplyCap. Queued, never dropped (queue.go). A
// stale event (the peer is gone) changes nothing.
func (c *Core) LaneConfirmed(sh int, peer shard.PeerID, index int, remote netip.AddrPort) {
	c.events.put(event{kind: evConfirmed, sh: sh, peer: peer, index: index, to: remote})
}

func (c *Core) laneConfirmedLocked(e *event) {
	if p := c.byID[e.peer]; p != nil {
		c.setKnown(p, knownProven, e.to.Addr())
	}
}

// LaneMisplaced: lane index of peer, owned by shard from, proved to
// receive its datagrams on shard via (a NAT rewrote the lane's port and
// the listen group cannot steer it: shard/place.go). Queued; the control
// loop moves the lane there, so its datagrams stop taking a ring hop, and
// tells the other shards its new owner. Only a responder's lanes move: an
// initiator's come back to the lane sockets it owns.
func (c *Core) LaneMisplaced(from int, peer shard.PeerID, index, via int) {
	c.events.put(event{kind: evMisplaced, sh: from, peer: peer, index: index, via: via})
}

func (c *Core) laneMisplacedLocked(e *event) {
	from, index, via := e.sh, e.index, e.via
	p := c.byID[e.peer]
	if p == nil || p.sess == nil || p.initiator || index >= len(p.place) || p.place[index] != from || via < 0 || via >= c.shards {
		return
	}
	p.place[index] = via
	c.log.Debug("lane moves to the shard its datagrams arrive on", zap.String("peer", p.cfg.PublicKey.String()),
		zap.Int("lane", index), zap.Int("from", from), zap.Int("to", via))
	c.dp.MoveLane(from, e.peer, p.lanes, index, via)
}

// applyLocked applies one queued event. Caller holds mu.
func (c *Core) applyLocked(e *event) {
	switch e.kind {
	case evNoSession:
		c.noSessionLocked(e)
	case evMoved:
		c.peerMovedLocked(e)
	case evSilent:
		c.peerSilentLocked(e)
	case evMisplaced:
		c.laneMisplacedLocked(e)
	case evConfirmed:
		c.laneConfirmedLocked(e)
	}
}
