package router

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/yip-router/yip-router/control"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
	"go.uber.org/zap"
)

// handshakeSocket is a shard's socket as the plane uses it: its port, and
// one handshake datagram sent from any goroutine. *udp.Conn; in the pair
// test, internal/memnet's sockets.
type handshakeSocket interface {
	LocalAddr() netip.AddrPort
	SendTo(b []byte, to netip.AddrPort) error
	SendFrom(b []byte, to netip.AddrPort, from netip.Addr) error
}

// plane is the control core's DataPlane: the router's shards and the
// sockets its handshakes leave from. Shard operations are queued with
// Shard.Do and run on the shard's goroutine. New fills every field before
// the shards run (shards last: they need the core, which needs the plane);
// nothing changes them after.
type plane struct {
	log *zap.Logger
	// group and lanes are shard i's listen-group member and lane socket
	// (control.ConnGroup, control.ConnLane).
	group, lanes []handshakeSocket
	// steer, when the group steers by lane remote, points remote at
	// shard owner's group socket (nil: the group steers by port).
	steer  func(remote netip.AddrPort, owner int)
	shards []*shard.Shard
	table  *atomic.Pointer[shard.Table]
}

var _ control.DataPlane = (*plane)(nil)

func (d *plane) Shards() int { return len(d.lanes) }

func (d *plane) ListenPort() uint16 { return d.group[0].LocalAddr().Port() }

func (d *plane) LanePorts() []uint16 {
	ports := make([]uint16, len(d.lanes))
	for i, c := range d.lanes {
		ports[i] = c.LocalAddr().Port()
	}
	return ports
}

func (d *plane) SendHandshake(sh, conn int, b []byte, to netip.AddrPort, from netip.Addr) error {
	if conn == control.ConnLane {
		return d.lanes[sh].SendTo(b, to)
	}
	return d.group[sh].SendFrom(b, to, from)
}

func (d *plane) InstallLane(owner int, lc shard.LaneConfig, confirm bool) {
	log := d.log
	// Steer the lane's remote now, before the core sends the response:
	// the shard installs the lane when it next polls its commands, and
	// the initiator's first datagram may come sooner and would land by
	// hash on another shard. Unproven: it never takes another's entry.
	if d.steer != nil && lc.Conn == control.ConnGroup {
		d.steer(lc.Remote, owner)
	}
	d.shards[owner].Do(func(s *shard.Shard) {
		if err := s.InstallLane(lc); err != nil {
			log.Error("install lane", zap.Int("lane", lc.Index), zap.Error(err))
			return
		}
		if confirm {
			s.SendKeepalive(lc.Peer, lc.Index)
		}
	})
}

func (d *plane) SetLaneOwner(sh int, peer shard.PeerID, lanes, index, owner int, remote netip.AddrPort, recv *crypto.LaneKeys) {
	d.shards[sh].Do(func(s *shard.Shard) { s.SetLaneOwner(peer, lanes, index, owner, remote, recv) })
}

func (d *plane) MoveLane(from int, peer shard.PeerID, index, to int) {
	dst := d.shards[to]
	d.shards[from].Do(func(s *shard.Shard) { s.MoveLane(peer, index, dst) })
}

func (d *plane) RemovePeer(peer shard.PeerID) {
	d.each(func(s *shard.Shard) { s.RemovePeer(peer) })
}

func (d *plane) SetKeepalive(peer shard.PeerID, ka time.Duration) {
	d.each(func(s *shard.Shard) { s.SetKeepalive(peer, ka) })
}

func (d *plane) MoveRemote(peer shard.PeerID, from, to netip.AddrPort) {
	d.each(func(s *shard.Shard) { s.MoveRemote(peer, from, to) })
}

func (d *plane) FollowPeer(except int, peer shard.PeerID, index int, from, to netip.AddrPort) {
	for i, s := range d.shards {
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

func (d *plane) SetRoutes(t *shard.Table) { d.table.Store(t) }

// each queues f on every shard.
func (d *plane) each(f func(*shard.Shard)) {
	for _, s := range d.shards {
		s.Do(f)
	}
}

// withCore is a shard's Config with its hooks into the control core c:
// the handshake path and the lane events. New wires every shard through
// it, and the pair test (pair_test.go) its in-memory ones.
func withCore(cfg shard.Config, c *control.Core) shard.Config {
	// The handshake path: it takes the core's lock only for a handshake
	// message that passed its mac1.
	cfg.Unmatched = c.Unmatched
	// Lane events: queued for the control loop without the core's lock,
	// so a shard never waits for it.
	cfg.NoSession = c.NoSession
	cfg.Moved = func(sh int, p shard.PeerID, i int, from, to netip.AddrPort) {
		c.FollowMoved(sh, p, i, from, to) // the other shards follow now, in order
		c.PeerMoved(sh, p, i, from, to)
	}
	cfg.Silent = c.PeerSilent
	cfg.Misplaced = c.LaneMisplaced
	cfg.Confirmed = c.LaneConfirmed
	return cfg
}

// controlLoop is the core's only caller of Step and Tick: the shards'
// lane events as they come (Wake), the timers at each tick, until stop.
// Start runs it on a ticker every control.TimerPeriod; the pair test
// sends its fake clock's times.
func controlLoop(c *control.Core, stop <-chan struct{}, ticks <-chan time.Time) {
	for {
		select {
		case <-stop:
			return
		case <-c.Wake():
			c.Step()
		case now := <-ticks:
			c.Tick(now)
		}
	}
}
