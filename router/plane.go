package router

import (
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/control"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
	"go.uber.org/zap"
)

// plane is the control core's DataPlane: the router's sockets and shards.
// Shard operations are queued with Shard.Do and run on the shard's
// goroutine; the shard list and the sockets never change after New.
type plane struct{ r *Router }

var _ control.DataPlane = plane{}

func (d plane) Shards() int { return len(d.r.laneSk) }

func (d plane) ListenPort() uint16 { return d.r.group[0].LocalAddr().Port() }

func (d plane) LanePorts() []uint16 {
	ports := make([]uint16, len(d.r.laneSk))
	for i, c := range d.r.laneSk {
		ports[i] = c.LocalAddr().Port()
	}
	return ports
}

func (d plane) SendHandshake(sh, conn int, b []byte, to netip.AddrPort, from netip.Addr) error {
	if conn == control.ConnLane {
		return d.r.laneSk[sh].SendTo(b, to)
	}
	return d.r.group[sh].SendFrom(b, to, from)
}

func (d plane) InstallLane(owner int, lc shard.LaneConfig, confirm bool) {
	log := d.r.log
	// Steer the lane's remote now, before the core sends the response:
	// the shard installs the lane when it next polls its commands, and
	// the initiator's first datagram may come sooner and would land by
	// hash on another shard. Unproven: it never takes another's entry.
	if d.r.steer != nil && lc.Conn == control.ConnGroup {
		d.r.steer.Steer(lc.Remote, d.r.group[owner], false)
	}
	d.r.shards[owner].Do(func(s *shard.Shard) {
		if err := s.InstallLane(lc); err != nil {
			log.Error("install lane", zap.Int("lane", lc.Index), zap.Error(err))
			return
		}
		if confirm {
			s.SendKeepalive(lc.Peer, lc.Index)
		}
	})
}

func (d plane) SetLaneOwner(sh int, peer shard.PeerID, lanes, index, owner int, remote netip.AddrPort, recv *crypto.LaneKeys) {
	d.r.shards[sh].Do(func(s *shard.Shard) { s.SetLaneOwner(peer, lanes, index, owner, remote, recv) })
}

func (d plane) MoveLane(from int, peer shard.PeerID, index, to int) {
	dst := d.r.shards[to]
	d.r.shards[from].Do(func(s *shard.Shard) { s.MoveLane(peer, index, dst) })
}

func (d plane) RemovePeer(peer shard.PeerID) {
	d.each(func(s *shard.Shard) { s.RemovePeer(peer) })
}

func (d plane) SetKeepalive(peer shard.PeerID, ka time.Duration) {
	d.each(func(s *shard.Shard) { s.SetKeepalive(peer, ka) })
}

func (d plane) MoveRemote(peer shard.PeerID, from, to netip.AddrPort) {
	d.each(func(s *shard.Shard) { s.MoveRemote(peer, from, to) })
}

func (d plane) FollowPeer(except int, peer shard.PeerID, index int, from, to netip.AddrPort) {
	for i, s := range d.r.shards {
		if i != except {
			s.Do(func(x *shard.Shard) {
				x.FollowLane(peer, index, to)
				if from.Addr() != to.Addr() {
					x.FollowPeer(peer, from.Addr(), to.Addr())
				}
			})
		}
	}
}

func (d plane) SetRoutes(t *shard.Table) { d.r.table.Store(t) }

// each queues f on every shard.
func (d plane) each(f func(*shard.Shard)) {
	for _, s := range d.r.shards {
		s.Do(f)
	}
}
