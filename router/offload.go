package router

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"

	"github.com/yip-router/yip-router/shard/udp"
)

// OffloadSet names offloads: the config's DisableOffload, and what `show`
// reports as on.
type OffloadSet struct {
	TSO    bool // TUN reads TCP superpackets (split by the shard)
	USO    bool // TUN reads UDP superpackets
	GRO    bool // TUN writes coalesced TCP/UDP superpackets
	UDPGSO bool // one sendmmsg message carries a run of datagrams
	UDPGRO bool // one recvmmsg slot carries a run of datagrams
}

// offloadNames are the config and show spellings, in display order.
var offloadNames = []string{"tso", "uso", "gro", "udp-gso", "udp-gro"}

func (o *OffloadSet) field(name string) *bool {
	switch name {
	case "tso":
		return &o.TSO
	case "uso":
		return &o.USO
	case "gro":
		return &o.GRO
	case "udp-gso":
		return &o.UDPGSO
	case "udp-gro":
		return &o.UDPGRO
	}
	return nil
}

// OffloadNames are the offloads' names, in display order.
func OffloadNames() []string { return offloadNames }

// Has reports whether the named offload is in the set.
func (o OffloadSet) Has(name string) bool {
	p := o.field(name)
	return p != nil && *p
}

// ParseOffloadSet reads a comma-separated list of offload names, or "all"
// or "none".
func ParseOffloadSet(v string) (OffloadSet, error) {
	var o OffloadSet
	for _, f := range strings.Split(v, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		switch f {
		case "", "none":
			continue
		case "all":
			o = OffloadSet{true, true, true, true, true}
			continue
		}
		p := o.field(f)
		if p == nil {
			return OffloadSet{}, fmt.Errorf("%q is not an offload (want a list of %s, or all or none)", f, strings.Join(offloadNames, ", "))
		}
		*p = true
	}
	return o, nil
}

// String lists the set's names ("none" when empty).
func (o OffloadSet) String() string {
	var on []string
	for _, n := range offloadNames {
		if *o.field(n) {
			on = append(on, n)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

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

// conns are every shard's sockets.
func (r *Router) conns() []*udp.Conn {
	return append(append([]*udp.Conn{}, r.group...), r.laneSk...)
}

// KernelDrops are the drops the kernel counts outside the shards: packets
// the TUN device dropped because a shard did not read its queue in time
// (tx) or refused (rx), and datagrams the shards' sockets dropped with a
// full receive buffer. With the shards' own drop counters, no drop point
// is invisible.
type KernelDrops struct {
	TUNTxDropped uint64 `json:"tun_tx_dropped"`
	TUNRxDropped uint64 `json:"tun_rx_dropped"`
	SocketDrops  uint64 `json:"socket_drops"`
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
