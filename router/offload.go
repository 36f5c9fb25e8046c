package router

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"

	"github.com/yip-router/yip-router/shard/udp"
)

// offloadState says, per offload name, "on" or "off: why".
func (r *Router) offloadState() map[string]string {
	dis := r.offDisabled
	st := map[string]string{}
	set := func(name string, disabled, granted bool, refused error) {
		switch {
		case disabled:
			st[name] = "off: DisableOffload"
		case refused != nil:
			st[name] = "off: " + refused.Error()
		case !granted:
			st[name] = "off: not offered by this kernel"
		default:
			st[name] = "on"
		}
	}
	set("tso", dis.TSO, r.dev.Offloads.TSO, nil)
	set("uso", dis.USO, r.dev.Offloads.USO, nil)
	var groErr error
	for _, s := range r.shards {
		if s.CoalesceRefused() {
			groErr = errGRORefused
		}
	}
	set("gro", dis.GRO, r.dev.Offloads.VnetHdr, groErr)
	gso, gro := true, true
	var gsoErr error
	for _, c := range r.conns() {
		gso = gso && c.GSO()
		gro = gro && c.GRO()
		if err := c.GSOError(); err != nil {
			gsoErr = err
		}
	}
	set("udp-gso", dis.UDPGSO, gso, gsoErr)
	set("udp-gro", dis.UDPGRO, gro, nil)
	return st
}

var errGRORefused = errors.New("the kernel refused a TUN superpacket write")

// conns are every shard's sockets that send: its listen-group member and
// its lane socket (allSockets adds the strangers').
func (r *Router) conns() []*udp.Conn {
	return append(append([]*udp.Conn{}, r.group...), r.laneSk...)
}

// allSockets is every underlay socket: conns and the strangers' and known
// sockets (which only receive).
func (r *Router) allSockets() []*udp.Conn { return slices.Concat(r.conns(), r.strangers, r.known) }

// KernelDrops are the drops the kernel counts outside the shards: packets
// the TUN device dropped because a shard did not read its queue in time
// (tx) or refused (rx), and datagrams the shards' sockets dropped with a
// full receive buffer. With the shards' own drop counters, no drop point
// is invisible.
type KernelDrops struct {
	TUNTxDropped uint64 `json:"tun_tx_dropped"`
	TUNRxDropped uint64 `json:"tun_rx_dropped"`
	SocketDrops  uint64 `json:"socket_drops"`
	// StrangerDrops are the strangers' sockets' (steering by lane
	// remote): datagrams from sources no lane has that a full buffer
	// refused, what a flood costs instead of lane drops.
	StrangerDrops uint64 `json:"stranger_drops"`
	// KnownDrops are the known sockets': unsteered datagrams from peers'
	// known addresses that a full buffer refused (a flood from such an
	// address, or spoofing one).
	KnownDrops uint64 `json:"known_drops"`
}

func (r *Router) kernelDrops() KernelDrops {
	var d KernelDrops
	r.resMu.RLock()
	defer r.resMu.RUnlock()
	if r.resClosed {
		return d
	}
	if l, err := netlink.LinkByName(r.dev.Name); err == nil && l.Attrs().Statistics != nil {
		d.TUNTxDropped, d.TUNRxDropped = l.Attrs().Statistics.TxDropped, l.Attrs().Statistics.RxDropped
	}
	for _, c := range r.conns() {
		d.SocketDrops += c.Drops()
	}
	for _, c := range r.strangers {
		d.StrangerDrops += c.Drops()
	}
	for _, c := range r.known {
		d.KnownDrops += c.Drops()
	}
	return d
}

// watchOffloads logs, once each, an offload the kernel refused at run time
// (the data path has already turned it off and carries on without it).
func (r *Router) watchOffloads() {
	logged := map[string]bool{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		for name, s := range r.offloadState() {
			if off, ok := strings.CutPrefix(s, "off: "); ok && !logged[name] && off != "DisableOffload" && off != "not offered by this kernel" {
				logged[name] = true
				r.log.Warn("offload turned off", zap.String("offload", name), zap.String("why", off))
			}
		}
	}
}

// warnShortBuffers says once if a socket got less buffer than it asked
// for: the router could not force it past the host's maximum (it runs
// without CAP_NET_ADMIN in the host's user namespace, as in an
// unprivileged container), so bursts a shard cannot drain at once are
// dropped, counted as kernel socket drops.
func (r *Router) warnShortBuffers() {
	for _, c := range r.conns() {
		if rcv, snd, short := c.Buffers(); short {
			r.log.Warn("socket buffers smaller than asked for: without CAP_NET_ADMIN in the host's user namespace the host's net.core.rmem_max/wmem_max cap them, and bursts beyond them are dropped",
				zap.Int("rcvbuf", rcv), zap.Int("sndbuf", snd), zap.Int("rcvbuf_asked", 2*udp.RecvBuffer), zap.Int("sndbuf_asked", 2*udp.SendBuffer),
				zap.String("fix", "on the host: tuning/yip-tune apply"))
			return
		}
	}
}
