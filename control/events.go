package control

// Lane events: what the shards report about a peer's lanes (traffic waits
// for a session, a lane moved to a new address, a lane went unanswered, a
// lane's datagrams arrive on another shard). All but FollowMoved take the
// core lock; package router calls PeerMoved, PeerSilent and LaneMisplaced
// on a goroutine of their own, so a shard never waits for that lock.

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// NoSession: traffic waits for peer id. Tick starts the handshake (not
// here: this runs on a shard).
func (c *Core) NoSession(_ int, id shard.PeerID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.byID[id]; p != nil && !p.want {
		p.want = true
		p.wantSince = c.now()
	}
}

// FollowMoved: an authenticated datagram moved lane index of peer, on
// shard sh, from one address to another. The other shards learn where the
// lane is now (their hand-over entry for it: a NAT's new port too, so no
// other peer's datagram can take that address there), and a new IP means
// the peer moved: its lanes on the other shards follow (same ports). It
// takes no lock, so package router calls it on the shard's goroutine,
// keeping moves in their order; PeerMoved then updates the endpoint.
func (c *Core) FollowMoved(sh int, peer shard.PeerID, index int, from, to netip.AddrPort) {
	c.dp.FollowPeer(sh, peer, index, from, to)
}

// PeerMoved: lane index of peer moved from one address to another (see
// FollowMoved). The endpoint for handshakes follows the endpoint's lane
// (the lane whose remote it is), or else the new IP.
func (c *Core) PeerMoved(_ int, peer shard.PeerID, index int, from, to netip.AddrPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.byID[peer]
	if p == nil {
		return
	}
	ep := p.endpoint
	switch {
	case index == p.endpointLane && ep == from:
		ep = to
	case ep.Addr() == from.Addr():
		ep = netip.AddrPortFrom(to.Addr(), ep.Port())
	default:
		return
	}
	if ep != p.endpoint {
		c.log.Info("peer roamed", zap.String("peer", p.cfg.PublicKey.String()), zap.Stringer("from", p.endpoint), zap.Stringer("to", ep))
		c.setEndpoint(p, ep)
	}
}

// PeerSilent: a lane of peer on shard sh has been sending without hearing
// back (shard/timing.go's noReplyAfter). The peer presumably restarted and
// lost its keys, so a new handshake starts, unless one is under way or
// backing off. With oldFraming the peer's datagrams arrive framed by the
// previous wire version (its handshakes complete, nothing after them
// passes the tag), which is worth one WARN per peer: handshakes alone would
// not tell the operator why the tunnel carries nothing.
func (c *Core) PeerSilent(sh int, peer shard.PeerID, oldFraming bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.byID[peer]
	if p == nil {
		return
	}
	if oldFraming && !p.mismatchWarned {
		p.mismatchWarned = true
		c.log.Warn("peer runs a yip-router of wire version 1: handshakes complete but its datagrams fail this version's tag; upgrade both ends",
			zap.String("peer", p.cfg.PublicKey.String()), zap.Int("wire_version", crypto.WireVersion), zap.Int("peer_wire_version", 1), zap.Int("shard", sh))
	}
	if p.sess == nil || (p.init != nil && now.Sub(p.initAt) < HandshakeTimeout) || now.Before(p.nextTry) {
		return
	}
	c.log.Info("peer stopped answering; new handshake", zap.String("peer", p.cfg.PublicKey.String()), zap.Int("shard", sh))
	c.initiate(p, now)
}

// LaneConfirmed: the first datagram under our new keys as responder
// arrived on the lane the initiation came from, so the peer received our
// response at remote: the address is proven, and initiations from it get
// cookie replies past cookieReplyCap. A stale event (the peer is gone)
// changes nothing.
func (c *Core) LaneConfirmed(_ int, peer shard.PeerID, _ int, remote netip.AddrPort) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.byID[peer]; p != nil {
		c.setKnown(p, knownProven, remote.Addr())
	}
}

// LaneMisplaced: lane index of peer, owned by shard from, proved to
// receive its datagrams on shard via (a NAT rewrote the lane's port and
// the listen group cannot steer it: shard/place.go). The lane moves
// there, so its datagrams stop taking a ring hop, and the other shards
// learn its new owner. Only a responder's lanes move: an
// initiator's come back to the lane sockets it owns.
func (c *Core) LaneMisplaced(from int, peer shard.PeerID, index, via int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.byID[peer]
	if p == nil || p.sess == nil || p.initiator || index >= len(p.place) || p.place[index] != from || via < 0 || via >= c.shards {
		return
	}
	p.place[index] = via
	c.log.Debug("lane moves to the shard its datagrams arrive on", zap.String("peer", p.cfg.PublicKey.String()),
		zap.Int("lane", index), zap.Int("from", from), zap.Int("to", via))
	c.dp.MoveLane(from, peer, index, via)
	for j := range c.shards {
		if j != from && j != via {
			c.dp.SetLaneOwner(j, peer, p.lanes, index, via, netip.AddrPort{}, nil)
		}
	}
}
