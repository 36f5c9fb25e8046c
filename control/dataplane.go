package control

import (
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// Socket indexes of a shard (shard.Config.Conns and LaneConfig.Conn).
const (
	ConnGroup = 0 // the SO_REUSEPORT group member on ListenPort
	ConnLane  = 1 // the shard's lane socket
)

// DataPlane is what the core asks of the shards and sockets. Every method
// returns without waiting for a shard: shard operations are queued to the
// shard's own goroutine, so the core never blocks on the data path while it
// holds its lock.
type DataPlane interface {
	// Shards is the number of shards; it never changes.
	Shards() int
	// ListenPort is the port of the shards' SO_REUSEPORT group.
	ListenPort() uint16
	// LanePorts are the local ports of the shards' lane sockets, by shard.
	LanePorts() []uint16
	// SendHandshake sends a handshake datagram from shard sh's socket
	// conn (ConnGroup or ConnLane).
	SendHandshake(sh, conn int, b []byte, to netip.AddrPort, from netip.Addr) error
	// InstallLane gives a lane to shard owner. confirm: send a keepalive
	// under the new keys at once.
	InstallLane(owner int, lc shard.LaneConfig, confirm bool)
	// SetLaneOwner tells shard sh which shard owns lane index of peer,
	// with the lane's remote and receive keys (zero and nil: unchanged).
	SetLaneOwner(sh int, peer shard.PeerID, lanes, index, owner int, remote netip.AddrPort, recv *crypto.LaneKeys)
	// MoveLane moves lane index of peer, with its state, from shard from
	// to shard to.
	MoveLane(from int, peer shard.PeerID, index, to int)
	// RemovePeer drops peer's lanes and waiting packets on every shard.
	RemovePeer(peer shard.PeerID)
	// SetKeepalive changes peer's persistent keepalive on every shard.
	SetKeepalive(peer shard.PeerID, d time.Duration)
	// MoveRemote moves peer's lanes that talk to from over to to, on
	// every shard.
	MoveRemote(peer shard.PeerID, from, to netip.AddrPort)
	// FollowPeer tells every shard but except that lane index of peer
	// moved from one address to another: their hand-over entry for it
	// follows (shard.Shard.FollowLane), and if the IP changed the peer's
	// lanes there follow it too (shard.Shard.FollowPeer).
	FollowPeer(except int, peer shard.PeerID, index int, from, to netip.AddrPort)
	// SetRoutes installs the route table (prefix → peer).
	SetRoutes(t *shard.Table)
}
