package udp

// Opening sockets: the SO_REUSEPORT listen group, steered by lane remote
// (ListenSteered, with its strangers' sockets) or, where the kernel refuses
// eBPF, by the classic BPF port program (ListenGroup), and the per-lane
// sockets on ephemeral ports (ListenLane).

import (
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// LaneBits bounds a group to 1<<LaneBits sockets. The port steering
// program (ListenGroup, used where the kernel refuses eBPF) returns
// (source port & LaneMask): a datagram from a port whose low bits are i
// reaches socket i, from any other port the kernel's hash picks.
const (
	LaneBits = 6
	LaneMask = 1<<LaneBits - 1
)

// skfNetOff is the kernel's SKF_NET_OFF: BPF loads relative to the network
// header. The reuseport program otherwise sees the skb past the UDP header.
const skfNetOff = -0x100000

// steeringProgram returns (UDP source port & LaneMask). If that is not
// below the group's size the kernel falls back to its hash, which is fine
// for handshakes (any shard may take them). The UDP header follows an
// IPv4 header without options (20 bytes) or an IPv6 header without
// extension headers (40); a dual-stack group reads the IP version first.
func steeringProgram(v6, dual bool) ([]unix.SockFilter, error) {
	const v4Len, v6Len = 20, 40
	net := int32(skfNetOff) // loads are relative to the network header
	port := func(ipLen int32) []bpf.Instruction {
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: uint32(net + ipLen), Size: 2},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: LaneMask},
			bpf.RetA{},
		}
	}
	var prog []bpf.Instruction
	switch {
	case dual:
		prog = append(prog,
			bpf.LoadAbsolute{Off: uint32(net), Size: 1},
			bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 6, SkipTrue: 3},
		)
		prog = append(append(prog, port(v4Len)...), port(v6Len)...)
	case v6:
		prog = port(v6Len)
	default:
		prog = port(v4Len)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, err
	}
	f := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		f[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return f, nil
}

// NoIPv6 reports whether err says the kernel has no IPv6 (booted with
// ipv6.disable=1), so a caller that asked for :: can fall back to IPv4.
func NoIPv6(err error) bool { return errors.Is(err, unix.EAFNOSUPPORT) }

// ListenGroup binds n sockets to local in one SO_REUSEPORT group and
// attaches the port steering program, so a datagram whose source port's
// low LaneBits bits are i < n reaches socket i (the kernel numbers sockets
// in the order they joined). local's port 0 picks a free port for all.
// Routers steer by lane remote instead (ListenSteered) and use this when
// the kernel refuses eBPF.
func ListenGroup(local netip.AddrPort, n int) ([]*Conn, error) {
	return listenGroup(local, n, nil)
}

// ListenSteered binds like ListenGroup but steers by st's maps: n lane
// sockets, then n strangers' sockets and n known sockets (steer_linux.go),
// these with a receive buffer of strangerBuffer.
func ListenSteered(local netip.AddrPort, n int, st *Steering) (lanes, strangers, known []*Conn, err error) {
	conns, err := listenGroup(local, n, st)
	if err != nil {
		return nil, nil, nil, err
	}
	return conns[:n:n], conns[n : 2*n : 2*n], conns[2*n:], nil
}

// strangerBuffer is a strangers' (or known) socket's receive buffer: a few
// milliseconds of handshakes and roaming peers' first datagrams. A flood
// overflows it (counted as its kernel drops) instead of taking a lane
// socket's buffer or the shard's time.
const strangerBuffer = 256 << 10

func listenGroup(local netip.AddrPort, n int, st *Steering) ([]*Conn, error) {
	if n < 1 || n > 1<<LaneBits {
		return nil, fmt.Errorf("udp: group of %d sockets out of range 1..%d", n, 1<<LaneBits)
	}
	// SO_REUSEPORT would let a second router (same user) silently join a
	// port another one is using and split its traffic: refuse a port that
	// a plain socket cannot bind.
	if local.Port() != 0 {
		probe, err := newSocket(local, false)
		if err != nil {
			if errors.Is(err, unix.EADDRINUSE) {
				return nil, fmt.Errorf("udp: port %d is already in use (another yip-router or program): %w", local.Port(), err)
			}
			return nil, err
		}
		probe.Close()
	}
	var conns []*Conn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	total := n
	if st != nil {
		total = steeredSets * n // and the strangers' and known sockets
	}
	for i := range total {
		c, err := newSocket(local, true)
		if err != nil {
			closeAll()
			if errors.Is(err, unix.EADDRINUSE) {
				return nil, fmt.Errorf("udp: port %d is in use by another program: %w", local.Port(), err)
			}
			return nil, err
		}
		if i == 0 {
			local = c.local // port 0: every socket joins the port the first got
		}
		if i >= n {
			_ = unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, strangerBuffer)
		}
		if st != nil {
			if err := st.attach(c, i); err != nil {
				c.Close()
				closeAll()
				return nil, fmt.Errorf("udp %s: %w", local, err)
			}
		} else if i == 0 {
			prog, err := steeringProgram(c.v6, c.dual)
			if err != nil {
				c.Close()
				return nil, err
			}
			fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
			if err := unix.SetsockoptSockFprog(c.fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fp); err != nil {
				c.Close()
				return nil, fmt.Errorf("udp %s: SO_ATTACH_REUSEPORT_CBPF: %w", local, err)
			}
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// ListenLane binds a socket on ip to a port the kernel picks from its
// ephemeral range, as it would for any client: a peer steering by lane
// remote (ListenSteered) learns the port from the lane offer, so the port
// itself carries nothing.
func ListenLane(ip netip.Addr) (*Conn, error) {
	c, err := newSocket(netip.AddrPortFrom(ip, 0), false)
	if err != nil {
		return nil, fmt.Errorf("udp: lane socket on %s: %w", ip, err)
	}
	return c, nil
}
