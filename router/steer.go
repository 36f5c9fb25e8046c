package router

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/shard"
	"github.com/yip-router/yip-router/shard/udp"
)

// steerLanes bounds the listen group's lane map: 16 lanes for each of
// 4096 peers, or 2 for each of 32768. The map is not preallocated, so the
// bound costs nothing until lanes fill it; a lane beyond it is placed by
// the kernel's hash and moved to the shard its datagrams reach, as under a
// port-rewriting NAT.
const steerLanes = 1 << 16

// listen opens the listen group on local, steered by lane remote, with a
// strangers' socket per shard (r.strangers): a flood from sources no lane
// has overflows only those (udp/steer_linux.go); and a known socket per
// shard (r.known) for the addresses peers are known at, so their
// handshakes do not queue behind such a flood. Where
// the kernel refuses the eBPF program or the group (no CAP_BPF, a kernel
// before 4.19, RLIMIT_MEMLOCK before 5.11, a seccomp or LSM policy) it
// steers by source port: peers' lanes (on ports the kernel picked, not
// ports that name their lane) then land by the kernel's hash and are moved
// to the shard their datagrams reach, so two lanes of one peer can share a
// shard, and strangers share the lane sockets (no flood isolation; show
// and check say so).
func (r *Router) listen(local netip.AddrPort, n int) ([]*udp.Conn, error) {
	for _, c := range slices.Concat(r.strangers, r.known) {
		c.Close() // a first try's
	}
	r.strangers, r.known = nil, nil
	if r.steer != nil {
		r.steer.Close() // a first try's, before the IPv4-only retry
		r.steer = nil
	}
	if r.opts.SteerByPort {
		r.steerMode = steerByPort("YIP_TEST_STEER_BY_PORT")
		return udp.ListenGroup(local, n)
	}
	st, err := udp.NewSteering(n, steerLanes)
	if err == nil {
		var g, strangers, known []*udp.Conn
		if g, strangers, known, err = udp.ListenSteered(local, n, st); err == nil {
			r.steer, r.strangers, r.known = st, strangers, known
			r.steerMode = "by lane remote (eBPF); strangers, and peers' known addresses, on sockets of their own"
			return g, nil
		}
		st.Close()
		if !errors.Is(err, udp.ErrSteering) {
			return nil, err // the port, not the program
		}
	}
	if errors.Is(err, unix.EPERM) {
		err = fmt.Errorf("%w (loading eBPF needs CAP_BPF)", err)
	}
	r.steerMode = steerByPort(err.Error())
	r.log.Warn("steering by lane remote is unavailable: lanes are placed by the kernel's hash and moved to the shard their datagrams reach",
		zap.Error(err))
	return udp.ListenGroup(local, n)
}

// steerer is what the shards update: nil (not a nil *udp.Steering in an
// interface) when the group steers by port.
func (r *Router) steerer() shard.Steerer {
	if r.steer == nil {
		return nil
	}
	return r.steer
}

// sockAt is shard i's socket of cs (r.strangers, r.known), or nil (a nil
// interface, not a nil *udp.Conn: the shard has none) when the group
// steers by port.
func sockAt(cs []*udp.Conn, i int) shard.Socket {
	if i < len(cs) {
		return cs[i]
	}
	return nil
}

// steerByPort is show's steering line for a group that steers by source
// port, and why.
func steerByPort(why string) string {
	return "by source port (strangers share the lane sockets: no flood isolation): " + why
}
