package router

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/fulltunnel"
)

// tunTxQueueLen is the TUN device's queue of packets waiting for a shard to
// read them (the kernel drops when it is full: tun_tx in the kernel drops).
// With TSO a slot holds a superpacket of up to 64 KB, and TCP small queues
// keep each TCP flow to about a megabyte in it; the length matters for
// packets that come one per slot (UDP, small packets): 1000 × 1.4 KB is
// about 4 ms at 3 Gbit/s, longer than a scheduler time slice that a
// starved shard waits for its CPU, short enough not to bloat latency. The
// kernel's default of 500 dropped under load on a busy 2-core machine.
const tunTxQueueLen = 1000

// markSockets puts the firewall mark on every underlay socket: FwMark, or
// for a full tunnel without one the mark fulltunnel.ChooseMark picks.
func (r *Router) markSockets(cfg *config.Config) error {
	mark := cfg.Interface.FwMark
	if v4, v6 := cfg.FullTunnel(); v4 || v6 {
		var err error
		if mark, err = fulltunnel.ChooseMark(mark); err != nil {
			return err
		}
	}
	if mark == 0 {
		return nil
	}
	// The strangers' sockets send nothing, but every underlay socket
	// carries the mark, as the docs and `ss -e` say.
	for _, c := range r.allSockets() {
		if err := c.SetMark(mark); err != nil {
			return fmt.Errorf("FwMark %#x on the underlay socket %s: %w", mark, c.LocalAddr(), err)
		}
	}
	r.mark = mark
	return nil
}

// route routes every peer's AllowedIPs into the interface as Table says
// (routeTable), and a full tunnel's default routes through its own table
// and rules, or stops with an error naming what failed: no half tunnel.
func (r *Router) route(cfg *config.Config) error {
	var all []netip.Prefix
	for _, p := range cfg.Peers {
		all = append(all, p.AllowedIPs...)
	}
	table := routeTable(cfg.Interface.Table)
	routes, defaults := splitRoutes(cfg.Interface.Table, all)
	if err := routeConflicts(r.dev.Name, table, routes); err != nil {
		return err
	}
	if len(routes) > 0 {
		if err := replaceRoutes(r.dev.Name, table, routes, nil); err != nil {
			return err
		}
	}
	if len(defaults) == 0 {
		return nil
	}
	link, err := netlink.LinkByName(r.dev.Name)
	if err != nil {
		return fmt.Errorf("interface %s: %w", r.dev.Name, err)
	}
	if r.full, err = fulltunnel.Up(link.Attrs().Index, defaults, r.mark); err != nil {
		return fmt.Errorf("interface %s: %w", r.dev.Name, err)
	}
	for _, d := range defaults {
		r.fullFamilies = append(r.fullFamilies, map[bool]string{true: "IPv4", false: "IPv6"}[d.Addr().Is4()])
	}
	if v4, _ := cfg.FullTunnel(); v4 {
		var eps []netip.Addr
		for _, p := range cfg.Peers {
			if p.Endpoint.Addr().Is4() {
				eps = append(eps, p.Endpoint.Addr())
			}
		}
		if err := r.full.CheckReturnPath("/proc", eps); err != nil {
			return fmt.Errorf("interface %s: %w", r.dev.Name, err) // New's closeResources takes the rules away
		}
	}
	rules := fulltunnel.Rules(r.mark)
	r.log.Info("full tunnel: the default route goes into a table of its own behind policy rules; the underlay sockets are marked",
		zap.Stringers("prefixes", defaults), zap.Uint32("table", r.mark), zap.String("fwmark", fmt.Sprintf("%#x", r.mark)),
		zap.Strings("rules", rules[:]))
	return nil
}

// configureLink sets the TUN device's MTU and addresses and brings it up,
// over netlink.
func configureLink(name string, mtu int, addrs []netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("interface %s: %w", name, err)
	}
	if err := netlink.LinkSetMTU(link, mtu); err != nil {
		return fmt.Errorf("interface %s: set MTU %d: %w", name, mtu, err)
	}
	if err := netlink.LinkSetTxQLen(link, tunTxQueueLen); err != nil {
		return fmt.Errorf("interface %s: set txqueuelen %d: %w", name, tunTxQueueLen, err)
	}
	for _, p := range addrs {
		a := &netlink.Addr{IPNet: ipNet(p)}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD // a TUN link has no neighbours to clash with
		}
		if err := netlink.AddrAdd(link, a); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("interface %s: add address %s: %w", name, p, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("interface %s: set up: %w", name, err)
	}
	return nil
}

// routeTable is the routing table the peers' AllowedIPs go into, by the
// [Interface] Table: the main table (auto), Table's number, or 0 for none
// (off). A full tunnel's default routes go elsewhere (fulltunnel.Up).
func routeTable(t config.Table) int {
	switch t.Mode {
	case config.TableOff:
		return 0
	case config.TableID:
		return int(t.ID)
	}
	return unix.RT_TABLE_MAIN
}

// splitRoutes separates the full tunnel's default routes
// (config.Table.FullTunnel) from the routes that go into routeTable; with
// Table = off there are neither.
func splitRoutes(t config.Table, prefixes []netip.Prefix) (routes, defaults []netip.Prefix) {
	if t.Mode == config.TableOff {
		return nil, nil
	}
	for _, p := range prefixes {
		if t.FullTunnel(p) {
			defaults = append(defaults, p)
		} else {
			routes = append(routes, p)
		}
	}
	return routes, defaults
}

// tableName names a routing table in messages.
func tableName(table int) string {
	if table == unix.RT_TABLE_MAIN {
		return "the main table"
	}
	return fmt.Sprintf("table %d", table)
}

// routeConflicts reports the prefixes that table already routes through
// another interface, at any metric: ours would lose to a lower metric
// (IPv6 routes get 1024, a NetworkManager default 100) or win over a
// higher one and route the peer's own endpoint into the tunnel. Either
// way part of the traffic is not where AllowedIPs says, so up and a
// reload refuse before changing anything.
func routeConflicts(name string, table int, prefixes []netip.Prefix) error {
	if len(prefixes) == 0 {
		return nil
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range prefixes {
		if err := routeTaken(link, table, p); err != nil {
			errs = append(errs, fmt.Errorf("interface %s: route %s: %w", name, p, err))
		}
	}
	return errors.Join(errs...)
}

// replaceRoutes adds routes into table for added prefixes (an existing
// one is fine) and removes those for removed ones (SIGHUP).
func replaceRoutes(name string, table int, add, del []netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	for _, p := range del {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(p), Table: table}
		_ = netlink.RouteDel(r)
	}
	var errs []error
	for _, p := range add {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(p), Table: table}
		err := netlink.RouteAdd(r)
		if errors.Is(err, unix.EEXIST) {
			err = routeTaken(link, table, p)
		}
		if err != nil {
			// The others are still tried: one failure does not leave
			// the rest unrouted.
			errs = append(errs, fmt.Errorf("interface %s: route %s: %w", name, p, err))
		}
	}
	return errors.Join(errs...)
}

// routeTaken checks p in table: fine if no route has it or one already
// leads into link, else an error naming the interface that has it and the
// fix. Ignoring it gave a half tunnel: a peer's AllowedIPs 0.0.0.0/0 on a
// host with a default route left IPv4 on the host's default while IPv6
// moved into the tunnel, and nothing said so. (With Table = auto a
// default route goes into a table of its own and never gets here.)
func routeTaken(link netlink.Link, table int, p netip.Prefix) error {
	family := netlink.FAMILY_V4
	if p.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	rs, err := netlink.RouteListFiltered(family, &netlink.Route{Dst: ipNet(p), Table: table},
		netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("already routed elsewhere (listing it: %w)", err)
	}
	via := ""
	for _, r := range rs {
		if r.LinkIndex == link.Attrs().Index {
			return nil
		}
		via = "another route"
		if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
			via = "dev " + l.Attrs().Name
		}
	}
	if via == "" {
		return nil
	}
	if p.Bits() == 0 {
		half := "0.0.0.0/1, 128.0.0.0/1"
		if p.Addr().Is6() {
			half = "::/1, 8000::/1"
		}
		return fmt.Errorf("%s already has a default route (%s), which yip-router does not replace: "+
			"for a full tunnel leave Table at auto (the default: a table of its own and policy rules, as wg-quick), "+
			"or list %s in AllowedIPs instead and keep the peer's Endpoint reachable outside the tunnel with a host route (ip route add ENDPOINT via GATEWAY)",
			tableName(table), via, half)
	}
	return fmt.Errorf("already routed through %s in %s: remove that route, or leave %s out of AllowedIPs", via, tableName(table), p)
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
