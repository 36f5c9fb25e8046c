package router

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/shard"
	"github.com/yip-router/yip-router/shard/udp"
)

// steerLanes bounds the listen group's lane map: 16 lanes for each of
// 4096 peers, or 2 for each of 32768. The map is not preallocated, so the
// bound costs nothing until lanes fill it; a lane beyond it is placed by
// the kernel's hash and moved to the shard its datagrams reach, as under a
// port-rewriting NAT.
const steerLanes = 1 << 16

// listen opens the listen group on local, steered by lane remote. Where
// the kernel refuses the eBPF program (no CAP_BPF, a kernel before 4.19)
// it steers by source port: peers' lanes then land by the kernel's hash
// and are moved to the shard their datagrams reach.
func (r *Router) listen(local netip.AddrPort, n int) ([]*udp.Conn, error) {
	st, err := udp.NewSteering(n, steerLanes)
	if err != nil {
		r.steerMode = "by source port: " + err.Error()
		r.log.Warn("steering by lane remote is unavailable: lanes are placed by the kernel's hash and moved to the shard their datagrams reach",
			zap.Error(err))
		return udp.ListenGroup(local, n)
	}
	g, err := udp.ListenSteered(local, n, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	if r.steer != nil {
		r.steer.Close() // the first try's, before the IPv4 fallback
	}
	r.steer, r.steerMode = st, "by lane remote (eBPF)"
	return g, nil
}

// steerer is what the shards update: nil (not a nil *udp.Steering in an
// interface) when the group steers by port.
func (r *Router) steerer() shard.Steerer {
	if r.steer == nil {
		return nil
	}
	return r.steer
}

// steerRefused counts lanes the map had no room for.
func (r *Router) steerRefused() uint64 {
	if r.steer == nil {
		return 0
	}
	return r.steer.Refused.Load()
}
