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
	// Steer sends remote's datagrams to c if c is a group member; an
	// unproven claim (proven false) does not take an entry another
	// socket holds.
	Steer(remote netip.AddrPort, c *udp.Conn, proven bool) udp.SteerResult
	// Unsteer forgets remote if it still leads to c.
	Unsteer(remote netip.AddrPort, c *udp.Conn)
}

// bindRemote makes ln the lane ingress finds at addr and steers addr to
// ln's socket. proven: a datagram under ln's keys came from addr (a
// handshake's source address, or a follow of another lane's move, is
// not proof).
func (s *Shard) bindRemote(addr netip.AddrPort, ln *lane, proven bool) {
	if old := s.lanes[addr]; old != nil && old != ln {
		old.steered = false // the entry is ln's now
	}
	s.lanes[addr] = ln
	s.steer(addr, ln, proven)
}

// steer points addr at ln's socket in the group's map.
func (s *Shard) steer(addr netip.AddrPort, ln *lane, proven bool) {
	if s.cfg.Steer == nil {
		return
	}
	switch s.cfg.Steer.Steer(addr, s.cfg.Conns[ln.cfg.Conn], proven) {
	case udp.Steered:
		// A proven claim may have just taken the entry back from another
		// socket: the datagrams in flight still go there for a moment.
		if !ln.steered || proven {
			ln.steeredAt = s.now
		}
		ln.steered = true
	case udp.Full:
		ln.steered = false
		if !ln.steerFull {
			ln.steerFull = true // once per lane, not per retry
			s.count(SteerRefused)
		}
	default:
		ln.steered = false
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

// unbindLane forgets ln's remote if ingress finds ln there.
func (s *Shard) unbindLane(ln *lane) {
	if s.lanes[ln.cfg.Remote] == ln {
		s.unbindRemote(ln.cfg.Remote)
	}
}
