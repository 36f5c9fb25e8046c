package config

import (
	"fmt"
	"strings"
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
