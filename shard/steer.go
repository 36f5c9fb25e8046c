package shard

import (
	"net/netip"

	"github.com/yip-router/yip-router/shard/udp"
)

// Steerer is the listen group's map of lane remotes to sockets
// (udp.Steering). Ingress finds a lane by its remote address; the same
// address is steered to the socket the lane is on, so the kernel delivers
// the lane's datagrams to the shard that owns it whatever their source
// port. Both calls are syscalls, made when a lane is installed, moves or
// goes, never per packet.
type Steerer interface {
	// Steer sends remote's datagrams to c, if c is a group member, and
	// reports whether the map holds the entry (false: full, or c is not a
	// group socket).
	Steer(remote netip.AddrPort, c *udp.Conn) bool
	// Unsteer forgets remote if it still leads to c.
	Unsteer(remote netip.AddrPort, c *udp.Conn)
}

// bindRemote makes ln the lane ingress finds at addr and steers addr to
// ln's socket.
func (s *Shard) bindRemote(addr netip.AddrPort, ln *lane) {
	s.lanes[addr] = ln
	if s.cfg.Steer != nil {
		ln.steered = s.cfg.Steer.Steer(addr, s.cfg.Conns[ln.cfg.Conn])
	}
}

// unbindRemote forgets the lane at addr and its steering.
func (s *Shard) unbindRemote(addr netip.AddrPort) {
	ln := s.lanes[addr]
	delete(s.lanes, addr)
	if ln != nil && s.cfg.Steer != nil {
		s.cfg.Steer.Unsteer(addr, s.cfg.Conns[ln.cfg.Conn])
		ln.steered = false
	}
}
