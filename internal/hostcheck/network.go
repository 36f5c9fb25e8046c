// The checks of the network the router would join: forwarding, where the
// routes go and what a full tunnel sets up, the wg-quick hooks, and the
// underlay interfaces' MTU and receive offloads.

package hostcheck

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/fulltunnel"
)

func (e Env) forwarding(cfg *config.Config) []Finding {
	want4, want6 := true, true
	if cfg != nil {
		want4, want6 = false, false
		for _, p := range cfg.Peers {
			for _, a := range p.AllowedIPs {
				if a.Addr().Is4() {
					want4 = true
				} else {
					want6 = true
				}
			}
		}
	}
	var out []Finding
	for _, f := range []struct {
		want       bool
		file, name string
	}{
		{want4, "sys/net/ipv4/ip_forward", "net.ipv4.ip_forward"},
		{want6, "sys/net/ipv6/conf/all/forwarding", "net.ipv6.conf.all.forwarding"},
	} {
		if !f.want {
			continue
		}
		v, err := e.readInt(filepath.Join(e.Proc, f.file))
		switch {
		case errors.Is(err, os.ErrNotExist):
			out = append(out, Finding{Level: Info, Topic: "forwarding", Msg: f.name + " not present (protocol disabled in this kernel?)"})
		case err != nil:
			out = append(out, Finding{Level: Info, Topic: "forwarding", Msg: fmt.Sprintf("cannot read %s: %v", f.name, err)})
		case v == 1:
			out = append(out, Finding{Level: OK, Topic: "forwarding", Msg: f.name + " = 1"})
		default:
			out = append(out, Finding{Level: Warn, Topic: "forwarding",
				Msg: fmt.Sprintf("%s = %d: this host reaches the peers' AllowedIPs itself, but will not route its LAN's packets through the tunnel", f.name, v),
				Fix: fmt.Sprintf("on a gateway, run: %s apply (or: sysctl -w %s=1)", e.Tune, f.name)})
		}
	}
	return out
}

// underlayMark is the mark the router's sockets carry, for the route
// lookups towards the endpoints: FwMark, else for a full tunnel the mark
// a router starting alone would pick (a running one holds that table, so
// ChooseMark would skip it).
func underlayMark(cfg *config.Config) uint32 {
	if v4, v6 := cfg.FullTunnel(); cfg.Interface.FwMark == 0 && (v4 || v6) {
		return fulltunnel.DefaultMark
	}
	return cfg.Interface.FwMark
}

// routing says where the routes for AllowedIPs go (Table), what a full
// tunnel sets up (as wg-quick: a table, a mark, two rules per family) and
// whether strict reverse-path filtering would kill it.
func (e Env) routing(cfg *config.Config) []Finding {
	const topic = "routes"
	ic := cfg.Interface
	var out []Finding
	add := func(l Level, fix, format string, args ...any) {
		out = append(out, Finding{Level: l, Topic: topic, Msg: fmt.Sprintf(format, args...), Fix: fix})
	}
	switch ic.Table.Mode {
	case config.TableOff:
		add(Info, "", "Table = off: no routes for the peers' AllowedIPs; route them yourself (e.g. in PostUp)")
	case config.TableID:
		add(Info, "", "Table = %s: the peers' AllowedIPs are routed in table %d, and no policy rule sends traffic there: add your own (ip rule, e.g. in PostUp)", ic.Table, ic.Table.ID)
	}
	v4, v6 := cfg.FullTunnel()
	if !v4 && !v6 {
		if ic.FwMark != 0 {
			add(Info, "", "FwMark %#x: every underlay socket carries it, for your own ip rule or firewall", ic.FwMark)
		}
		return out
	}
	var fams []string
	for _, f := range []struct {
		on           bool
		name, prefix string
	}{{v4, "IPv4", "0.0.0.0/0"}, {v6, "IPv6", "::/0"}} {
		if !f.on {
			continue
		}
		for _, p := range cfg.Peers {
			if slices.Contains(p.AllowedIPs, netip.MustParsePrefix(f.prefix)) {
				fams = append(fams, fmt.Sprintf("%s (%s, peer at line %d)", f.name, f.prefix, p.Line))
			}
		}
	}
	m, how := ic.FwMark, "FwMark"
	if m == 0 {
		how = fmt.Sprintf("the first table from %d that holds no route", fulltunnel.DefaultMark)
		var err error
		if m, err = e.FullTunnelMark(0); err != nil {
			add(Warn, "set FwMark", "full tunnel: cannot pick its mark and table: %v", err)
			m = fulltunnel.DefaultMark
		} else if m != fulltunnel.DefaultMark {
			how += fmt.Sprintf("; %d holds routes now: this router's own, if it runs", fulltunnel.DefaultMark)
		}
	}
	rules := fulltunnel.Rules(m)
	add(OK, "", "full tunnel for %s, as wg-quick: the default route goes into table %d, every underlay socket carries fwmark %#x (%s), rules %q then %q",
		strings.Join(fams, " and "), m, m, how, rules[0], rules[1])
	if !v4 {
		return out
	}
	seen := map[string]bool{}
	for _, p := range cfg.Peers {
		if !p.Endpoint.Addr().Is4() {
			continue
		}
		ifname, err := e.RouteTo(p.Endpoint.Addr(), underlayMark(cfg))
		if err != nil || seen[ifname] {
			continue // underlay says what is wrong with the route
		}
		seen[ifname] = true
		if rp, err := fulltunnel.RPFilter(e.Proc, ifname); err == nil && rp == 1 {
			add(Warn, "run: "+fulltunnel.StrictRPFix(ifname),
				"strict reverse-path filtering (rp_filter = 1) on %s: if the main table reaches %s by its default route, up refuses the full tunnel (the peer's datagrams would be dropped: their source routes into the tunnel)",
				ifname, p.Endpoint.Addr())
		}
	}
	return out
}

// hooks reports the PreUp, PostUp, PreDown and PostDown commands, and a
// config file others may change while it holds them.
func hooks(cfg *config.Config) []Finding {
	h := cfg.Interface.Hooks
	if h.Empty() {
		return nil
	}
	out := []Finding{{Level: Info, Topic: "hooks",
		Msg: fmt.Sprintf("%d PreUp, %d PostUp, %d PreDown, %d PostDown command(s): run with /bin/sh -c as the router's user (%%i: the interface's name)",
			len(h.PreUp), len(h.PostUp), len(h.PreDown), len(h.PostDown))}}
	if f := cfg.WritableHookFile(); f != "" {
		out = append(out, Finding{Level: Warn, Topic: "hooks", Msg: f + ": whoever can change it runs commands as the router's user",
			Fix: "chown root " + cfg.Path + "; chmod go-w " + cfg.Path})
	}
	return out
}

// underlay finds the interfaces towards the peers' endpoints and checks
// their MTU against the config's and their receive offloads.
func (e Env) underlay(cfg *config.Config) []Finding {
	const topic = "underlay"
	var out []Finding
	seen := map[string]bool{}
	n := 0
	for _, p := range cfg.Peers {
		if !p.Endpoint.IsValid() {
			continue
		}
		n++
		dst := p.Endpoint.Addr().Unmap()
		ifname, err := e.RouteTo(dst, underlayMark(cfg))
		if err != nil {
			out = append(out, Finding{Level: Warn, Topic: topic, Msg: fmt.Sprintf("no route to peer endpoint %s: %v", p.Endpoint, err),
				Fix: "check the gateway's routing table (ip route get " + dst.String() + ")"})
			continue
		}
		hdr := udp4Headers
		if dst.Is6() {
			hdr = udp6Headers
		}
		mtuPath := filepath.Join(e.Sys, "class/net", ifname, "mtu")
		if mtu, err := e.readInt(mtuPath); err != nil {
			out = append(out, Finding{Level: Info, Topic: topic, Msg: fmt.Sprintf("%s via %s: cannot read its MTU: %v", p.Endpoint, ifname, err)})
		} else if need := cfg.Interface.MTU + datagramOverhead + hdr; int64(need) > mtu {
			out = append(out, Finding{Level: Warn, Topic: topic,
				Msg: fmt.Sprintf("%s via %s (MTU %d): the largest datagram is %d bytes (MTU %d + %d + %d headers) and will be fragmented or dropped (MTU black hole)", p.Endpoint, ifname, mtu, need, cfg.Interface.MTU, datagramOverhead, hdr),
				Fix: fmt.Sprintf("set MTU = %d in [Interface] (see docs/CONFIG.md, MTU)", mtu-int64(datagramOverhead+hdr))})
		} else {
			out = append(out, Finding{Level: OK, Topic: topic, Msg: fmt.Sprintf("%s via %s: MTU %d fits the largest datagram (%d bytes)", p.Endpoint, ifname, mtu, need)})
		}
		if seen[ifname] {
			continue
		}
		seen[ifname] = true
		out = append(out, e.offloads(ifname)...)
	}
	if n == 0 {
		msg := "no peer has an Endpoint (responder only): the underlay interface is not known until peers connect; MTU and offloads not checked"
		for _, p := range cfg.Peers {
			if p.HasEndpoint() {
				msg = "no peer's Endpoint has an address now (a host name that does not resolve): the underlay interface is not known; MTU and offloads not checked"
				break
			}
		}
		out = append(out, Finding{Level: Info, Topic: topic, Msg: msg})
	}
	return out
}

// offloadCheck says which of yip-router's own offloads this kernel grants
// (TUN TSO/USO and coalesced writes, UDP GSO/GRO) and which the config
// turns off. A missing one is a warning: the router runs without it, at a
// cost in throughput per core.
func (e Env) offloadCheck(cfg *config.Config) []Finding {
	const topic = "tunnel offloads"
	if !e.Root {
		return nil
	}
	got, err := e.ProbeOffloads()
	if err != nil {
		return []Finding{{Level: Info, Topic: topic, Msg: fmt.Sprintf("cannot probe: %v", err)}}
	}
	var dis config.OffloadSet
	if cfg != nil {
		dis = cfg.Interface.DisableOffload
	}
	var on, off, missing []string
	for _, n := range config.OffloadNames() {
		switch {
		case dis.Has(n):
			off = append(off, n)
		case got.Has(n):
			on = append(on, n)
		default:
			missing = append(missing, n)
		}
	}
	msg := "on: " + strings.Join(on, ", ")
	if len(on) == 0 {
		msg = "on: none"
	}
	if len(off) > 0 {
		msg += "; off by DisableOffload: " + strings.Join(off, ", ")
	}
	if len(missing) > 0 {
		return []Finding{{Level: Warn, Topic: topic, Msg: msg + "; not offered by this kernel: " + strings.Join(missing, ", "),
			Fix: "a kernel of 6.2 or later has every one (USO arrived in 6.2, UDP GRO is reliable from 5.12)"}}
	}
	return []Finding{{Level: OK, Topic: topic, Msg: msg}}
}

func (e Env) offloads(ifname string) []Finding {
	const topic = "offloads"
	gro, lro, err := e.Offloads(ifname)
	if err != nil {
		return []Finding{{Level: Info, Topic: topic, Msg: fmt.Sprintf("%s: cannot read GRO/LRO: %v", ifname, err)}}
	}
	var out []Finding
	if gro {
		out = append(out, Finding{Level: OK, Topic: topic, Msg: ifname + ": generic-receive-offload on"})
	} else {
		out = append(out, Finding{Level: Warn, Topic: topic, Msg: ifname + ": generic-receive-offload off: the kernel handles every received packet one by one (more softirq time on the CPUs taking the NIC's interrupts)",
			Fix: "ethtool -K " + ifname + " gro on"})
	}
	if lro {
		out = append(out, Finding{Level: Warn, Topic: topic, Msg: ifname + ": large-receive-offload on: LRO merges packets a router must forward unchanged",
			Fix: "ethtool -K " + ifname + " lro off (the kernel also turns it off when forwarding is enabled)"})
	}
	return out
}
