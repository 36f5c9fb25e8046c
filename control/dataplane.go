package control

import (
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/shard"
)

// Socket indexes of a shard (shard.ConnGroup, shard.ConnLane), as the
// core's handshake path names them.
const (
	ConnGroup = shard.ConnGroup
	ConnLane  = shard.ConnLane
)

// DataPlane is what the core asks of the shards and sockets: *shard.Group,
// or the tests' recording fake. Every method returns without waiting for
// a shard: shard operations are queued to the shard's own goroutine, so
// the core never blocks on the data path while it holds its lock.
type DataPlane interface {
	// Size is the number of shards; it never changes.
	Size() int
	// ListenPort is the port of the shards' SO_REUSEPORT group.
	ListenPort() uint16
	// LanePorts are the local ports of the shards' lane sockets, by shard.
	LanePorts() []uint16
	// SendHandshake sends a handshake datagram from shard sh's socket
	// conn (ConnGroup or ConnLane).
	SendHandshake(sh, conn int, b []byte, to netip.AddrPort, from netip.Addr) error
	// InstallSession places a completed handshake's lanes on the shards
	// and returns where each went (lane → shard); every shard learns
	// every lane's owner (shard.Group.InstallSession).
	InstallSession(s shard.Session) []int
	// MoveLane moves lane index of peer (of lanes lanes), with its state,
	// from shard from to shard to; every shard learns the new owner.
	MoveLane(from int, peer shard.PeerID, lanes, index, to int)
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
	// SetKnown says a peer is known at address a (known) or no longer is:
	// the data plane queues such an address's datagrams that no lane
	// claims (a restarted peer's initiations) apart from strangers', so a
	// flood from spoofed sources does not starve them
	// (shard.Group.SetKnown).
	SetKnown(a netip.Addr, known bool) error
}

var _ DataPlane = (*shard.Group)(nil)
