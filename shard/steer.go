package shard

import (
	"net/netip"
	"time"

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
	// SetKnown adds a to the addresses peers are known at (known), whose
	// unsteered datagrams go to the known sockets, or removes it.
	SetKnown(a netip.Addr, known bool) error
}

// The lane table keeps the listen group's map in step with its lanes
// (table.go): a lane bound to an address (laneTable.lanes) is steered
// there, and unbinding it takes its entry out. These are the only places
// that call the Steerer, save the group's early claim of a responder's
// lane's remote (Group.InstallSession), which the owner keeps by binding
// the lane there or releases (dropEarlySteer).

// groupConn is socket i as the Steerer knows it. The group's map is the
// kernel's, keyed by real sockets; a shard on other sockets
// (internal/memnet) has no Steerer, and this is nil.
func (t *laneTable) groupConn(i int) *udp.Conn {
	c, _ := t.cfg.Conns[i].(*udp.Conn)
	return c
}

// bind makes ln the lane ingress finds at addr and steers addr to ln's
// socket. proven: a datagram under ln's keys came from addr (a
// handshake's source address, or a follow of another lane's move, is
// not proof). Only claim (claim.go) calls it.
func (t *laneTable) bind(addr netip.AddrPort, ln *lane, proven bool, now time.Time) {
	if old := t.lanes[addr]; old != nil && old != ln {
		if old.cfg.Conn != ln.cfg.Conn {
			// ln's socket may be outside the group (an initiator's
			// lane socket): old's entry must not stay behind.
			t.unbindRemote(addr)
		}
		old.steered = false // the entry is ln's now
	}
	t.lanes[addr] = ln
	t.steer(addr, ln, proven, now)
}

// steer points addr at ln's socket in the group's map: when ln is bound
// there, and again with proof when ln's datagrams arrive through another
// shard (place.go's misplaced).
func (t *laneTable) steer(addr netip.AddrPort, ln *lane, proven bool, now time.Time) {
	if t.cfg.Steer == nil {
		return
	}
	switch t.cfg.Steer.Steer(addr, t.groupConn(ln.cfg.Conn), proven) {
	case udp.Steered:
		// A proven claim may have just taken the entry back from another
		// socket: the datagrams in flight still go there for a moment.
		if !ln.steered || proven {
			ln.steeredAt = now
		}
		ln.steered = true
	case udp.Full:
		ln.steered = false
		if !ln.steerFull {
			ln.steerFull = true // once per lane, not per retry
			t.stats.c[SteerRefused]++
		}
	default:
		ln.steered = false
	}
}

// unbindRemote forgets the lane at addr and its steering.
func (t *laneTable) unbindRemote(addr netip.AddrPort) {
	ln := t.lanes[addr]
	delete(t.lanes, addr)
	if ln != nil && t.cfg.Steer != nil {
		t.cfg.Steer.Unsteer(addr, t.groupConn(ln.cfg.Conn))
		ln.steered = false
	}
}

// unbindLane forgets ln's remote if ingress finds ln there.
func (t *laneTable) unbindLane(ln *lane) {
	if t.lanes[ln.cfg.Remote] == ln {
		t.unbindRemote(ln.cfg.Remote)
	}
}

// bound reports whether ingress finds ln at its remote.
func (t *laneTable) bound(ln *lane) bool { return t.lanes[ln.cfg.Remote] == ln }

// dropEarlySteer takes back the group's early claim of addr for socket conn
// (Group.InstallSession claims a responder's lane before the shard installs
// it) when the lane stays elsewhere or is refused the address, unless a
// lane here is bound at addr on that socket.
func (t *laneTable) dropEarlySteer(addr netip.AddrPort, conn int) {
	if t.cfg.Steer == nil {
		return
	}
	if ln := t.lanes[addr]; ln == nil || ln.cfg.Conn != conn {
		t.cfg.Steer.Unsteer(addr, t.groupConn(conn))
	}
}
