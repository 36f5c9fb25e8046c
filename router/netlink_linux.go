package router

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
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

// configureLink sets the TUN device's MTU and addresses, brings it up and
// routes every peer's AllowedIPs into it (as wg-quick does), over netlink.
func configureLink(name string, mtu int, addrs []netip.Prefix, routes []netip.Prefix) error {
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
	if err := routeConflicts(name, routes); err != nil {
		return err
	}
	return replaceRoutes(name, routes, nil)
}

// routeConflicts reports the prefixes that the main table already routes
// through another interface, at any metric: ours would lose to a lower
// metric (IPv6 routes get 1024, a NetworkManager default 100) or win over
// a higher one and route the peer's own endpoint into the tunnel. Either
// way part of the traffic is not where AllowedIPs says, so up and a
// reload refuse before changing anything.
func routeConflicts(name string, prefixes []netip.Prefix) error {
	if len(prefixes) == 0 {
		return nil
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range prefixes {
		if err := routeTaken(link, p); err != nil {
			errs = append(errs, fmt.Errorf("interface %s: route %s: %w", name, p, err))
		}
	}
	return errors.Join(errs...)
}

// replaceRoutes adds routes for added prefixes (an existing one is fine)
// and removes those for removed ones (SIGHUP).
func replaceRoutes(name string, add, del []netip.Prefix) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	for _, p := range del {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(p)}
		_ = netlink.RouteDel(r)
	}
	var errs []error
	for _, p := range add {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(p)}
		err := netlink.RouteAdd(r)
		if errors.Is(err, unix.EEXIST) {
			err = routeTaken(link, p)
		}
		if err != nil {
			// The others are still tried: one failure does not leave
			// the rest unrouted.
			errs = append(errs, fmt.Errorf("interface %s: route %s: %w", name, p, err))
		}
	}
	return errors.Join(errs...)
}

// routeTaken checks p in the main table: fine if no route has it or one
// already leads into link, else an error naming the interface that has it
// and the fix. Ignoring it gave a half tunnel: a peer's
// AllowedIPs 0.0.0.0/0 on a host with a default route left IPv4 on the
// host's default while IPv6 moved into the tunnel, and nothing said so.
func routeTaken(link netlink.Link, p netip.Prefix) error {
	family := netlink.FAMILY_V4
	if p.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	rs, err := netlink.RouteListFiltered(family, &netlink.Route{Dst: ipNet(p), Table: unix.RT_TABLE_MAIN},
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
		return fmt.Errorf("the main table already has a default route (%s), which yip-router does not replace: "+
			"for a full tunnel list %s in AllowedIPs instead (more specific, so they win over the default), "+
			"and keep the peer's Endpoint reachable outside the tunnel with a host route (ip route add ENDPOINT via GATEWAY)", via, half)
	}
	return fmt.Errorf("already routed through %s in the main table: remove that route, or leave %s out of AllowedIPs", via, p)
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
