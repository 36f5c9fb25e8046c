package fulltunnel

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// markSearch bounds the tables ChooseMark tries.
const markSearch = 1024

// ChooseMark returns fwmark when it is set, else the first table number
// from DefaultMark on that holds no route in either family.
func ChooseMark(fwmark uint32) (uint32, error) {
	if fwmark != 0 {
		return fwmark, nil
	}
	used := map[int]bool{}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := dump(func() ([]netlink.Route, error) {
			return netlink.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		})
		if errors.Is(err, unix.EAFNOSUPPORT) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return 0, fmt.Errorf("full tunnel: listing the routing tables to pick a mark: %w", err)
		}
		for _, r := range rs {
			used[r.Table] = true
		}
	}
	for m := DefaultMark; m < DefaultMark+markSearch; m++ {
		if !used[m] {
			return uint32(m), nil
		}
	}
	return 0, fmt.Errorf("full tunnel: tables %d to %d all hold routes; set FwMark", DefaultMark, DefaultMark+markSearch-1)
}

// Tunnel is what Up added, for Down.
type Tunnel struct {
	Mark uint32
	undo []func() error // in the order they were added
}

// Up routes each of defaults (0.0.0.0/0, ::/0) into the link with index
// ifindex through table mark, behind the family's two rules. A failed step
// undoes the ones before it and is named in the error: no half tunnel.
// The rules take the two priorities just below the family's lowest
// non-zero one (the main table's 32766 on a stock host), as ip rule add
// without a priority does, the suppressing rule first; it is added first,
// so no packet ever meets the other rule without it.
func Up(ifindex int, defaults []netip.Prefix, mark uint32) (*Tunnel, error) {
	t := &Tunnel{Mark: mark}
	for _, d := range defaults {
		if err := t.up(ifindex, d); err != nil {
			if uerr := t.Down(); uerr != nil {
				err = fmt.Errorf("%w (undoing the rest: %w)", err, uerr)
			}
			return nil, err
		}
	}
	return t, nil
}

func (t *Tunnel) up(ifindex int, d netip.Prefix) error {
	family, name := netlink.FAMILY_V4, "IPv4"
	if d.Addr().Is6() {
		family, name = netlink.FAMILY_V6, "IPv6"
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("full tunnel (%s): %s: %w", name, what, err)
	}
	dst := &net.IPNet{IP: d.Addr().AsSlice(), Mask: net.CIDRMask(0, d.Addr().BitLen())}
	if err := taken(ifindex, family, dst, t.Mark); err != nil {
		return fail(fmt.Sprintf("table %d", t.Mark), err)
	}
	pref, err := freePrefs(family)
	if err != nil {
		return fail("choosing rule priorities", err)
	}
	rules := Rules(t.Mark)
	suppress := netlink.NewRule()
	suppress.Family, suppress.Priority = family, pref-2
	suppress.Table, suppress.SuppressPrefixlen = unix.RT_TABLE_MAIN, 0
	if err := netlink.RuleAdd(suppress); err != nil {
		return fail(fmt.Sprintf("rule %q (priority %d)", rules[0], suppress.Priority), err)
	}
	t.undo = append(t.undo, func() error { return ignoreGone(netlink.RuleDel(suppress)) })

	route := &netlink.Route{LinkIndex: ifindex, Dst: dst, Table: int(t.Mark)}
	if err := netlink.RouteAdd(route); err != nil && !errors.Is(err, unix.EEXIST) { // EEXIST: ours, taken said
		return fail(fmt.Sprintf("route %s into table %d", d, t.Mark), err)
	}
	// The kernel removes the route with the device; a failed start
	// removes it here.
	t.undo = append(t.undo, func() error { return ignoreGone(netlink.RouteDel(route)) })

	notMarked := netlink.NewRule()
	notMarked.Family, notMarked.Priority = family, pref-1
	notMarked.Mark, notMarked.Invert, notMarked.Table = t.Mark, true, int(t.Mark)
	if err := netlink.RuleAdd(notMarked); err != nil {
		return fail(fmt.Sprintf("rule %q (priority %d)", rules[1], notMarked.Priority), err)
	}
	t.undo = append(t.undo, func() error { return ignoreGone(netlink.RuleDel(notMarked)) })
	return nil
}

// Down removes what Up added, the last first, and reports what it could
// not remove. A nil Tunnel has nothing to remove.
func (t *Tunnel) Down() error {
	if t == nil {
		return nil
	}
	var errs []error
	for i := len(t.undo) - 1; i >= 0; i-- {
		if err := t.undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	t.undo = nil
	if len(errs) > 0 {
		return fmt.Errorf("full tunnel: removing its rules and routes: %w", errors.Join(errs...))
	}
	return nil
}

// taken refuses a default route in table another link already has
// (FwMark chose a table in use); one into our own link is a leftover.
func taken(ifindex, family int, dst *net.IPNet, table uint32) error {
	rs, err := dump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(family, &netlink.Route{Dst: dst, Table: int(table)}, netlink.RT_FILTER_DST|netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return fmt.Errorf("listing it: %w", err)
	}
	for _, r := range rs {
		if r.LinkIndex == ifindex {
			continue
		}
		via := "another route"
		if l, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
			via = "dev " + l.Attrs().Name
		}
		return fmt.Errorf("already has a default route (%s): set FwMark to a mark whose table is free, or leave FwMark unset to have one picked", via)
	}
	return nil
}

// freePrefs returns the family's lowest rule priority above 0: the two
// below it are the full tunnel's.
func freePrefs(family int) (int, error) {
	rules, err := dump(func() ([]netlink.Rule, error) { return netlink.RuleList(family) })
	if err != nil {
		return 0, err
	}
	low := 32766 // the main table's rule, should it be gone
	for _, r := range rules {
		if r.Priority > 0 && r.Priority < low {
			low = r.Priority
		}
	}
	if low < 3 {
		return 0, fmt.Errorf("a rule has priority %d: no two priorities free below it", low)
	}
	return low, nil
}

// dump runs a netlink dump again when the kernel says it was interrupted
// by a change (its answer may then be inconsistent).
func dump[T any](f func() ([]T, error)) ([]T, error) {
	var out []T
	var err error
	for range 3 {
		if out, err = f(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return out, err
}

// ignoreGone treats a rule or route already gone as removed.
func ignoreGone(err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// CheckReturnPath refuses a full tunnel for IPv4 that strict reverse-path
// filtering would kill: a peer's datagrams arrive on the interface the
// marked route to its endpoint leaves by, but the kernel checks their
// source without the mark, which now leads into the tunnel, and drops
// them (wg-quick restores the mark on them with nftables; this router
// does not). proc is normally /proc; endpoints are the peers' IPv4
// endpoints. An endpoint the main table routes more specifically than by
// its default route is fine.
func (t *Tunnel) CheckReturnPath(proc string, endpoints []netip.Addr) error {
	for _, ep := range endpoints {
		marked, err := routeDev(ep, t.Mark)
		if err != nil {
			return fmt.Errorf("full tunnel (IPv4): the route to endpoint %s: %w", ep, err)
		}
		plain, err := routeDev(ep, 0)
		if err != nil {
			return fmt.Errorf("full tunnel (IPv4): the route to endpoint %s: %w", ep, err)
		}
		if plain == marked {
			continue
		}
		rp, err := RPFilter(proc, marked)
		if err != nil {
			return fmt.Errorf("full tunnel (IPv4): reading the reverse-path filter of %s: %w", marked, err)
		}
		if rp == 1 {
			return fmt.Errorf("full tunnel (IPv4): strict reverse-path filtering on %s (net.ipv4.conf rp_filter = 1, all or %s) would drop the peer's datagrams from %s: "+
				"their source routes into the tunnel without the router's mark; run: %s", marked, marked, ep, StrictRPFix(marked))
		}
	}
	return nil
}

// routeDev names the interface the kernel sends to dst by, with mark.
func routeDev(dst netip.Addr, mark uint32) (string, error) {
	rs, err := netlink.RouteGetWithOptions(dst.AsSlice(), &netlink.RouteGetOptions{Mark: mark})
	if err != nil {
		return "", err
	}
	if len(rs) == 0 || rs[0].LinkIndex == 0 {
		return "", errors.New("no route")
	}
	l, err := netlink.LinkByIndex(rs[0].LinkIndex)
	if err != nil {
		return "", err
	}
	return l.Attrs().Name, nil
}
