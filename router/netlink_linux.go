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
	return replaceRoutes(name, routes, nil)
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
	for _, p := range add {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(p)}
		if err := netlink.RouteAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("interface %s: route %s: %w", name, p, err)
		}
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
