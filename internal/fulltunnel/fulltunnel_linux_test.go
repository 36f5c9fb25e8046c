package fulltunnel

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/netns"
)

// inNamespace runs f in a fresh network namespace with two links up (veth
// ends: this kernel may lack dummy links): "under" holds the main table's
// default routes (the underlay), "tun" stands for the tunnel.
func inNamespace(t *testing.T, f func(under, tun netlink.Link)) {
	t.Helper()
	if err := netns.Available(); err != nil {
		t.Skip("needs a network namespace: ", err)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	ns := "yipft-" + hex.EncodeToString(b[:])
	if err := netns.Add(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = netns.Del(ns) })
	err := netns.Do(ns, func() error {
		var links []netlink.Link
		for _, name := range []string{"under", "tun"} {
			l := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "-p"}
			if err := netlink.LinkAdd(l); err != nil {
				return err
			}
			for _, n := range []string{name, name + "-p"} {
				if err := netlink.LinkSetUp(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: n}}); err != nil {
					return err
				}
			}
			link, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			links = append(links, link)
		}
		for _, a := range []string{"192.0.2.1/24", "2001:db8::1/64"} {
			p := netip.MustParsePrefix(a)
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Flags: unix.IFA_F_NODAD}
			if err := netlink.AddrAdd(links[0], addr); err != nil {
				return err
			}
		}
		for _, gw := range []string{"192.0.2.254", "2001:db8::fe"} {
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: links[0].Attrs().Index, Gw: net.ParseIP(gw)}); err != nil {
				return err
			}
		}
		f(links[0], links[1])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// via names the link the kernel picks for dst with the given mark (ip
// route get DST mark M).
func via(t *testing.T, dst string, mark uint32) string {
	t.Helper()
	rs, err := netlink.RouteGetWithOptions(net.ParseIP(dst), &netlink.RouteGetOptions{Mark: mark})
	if err != nil || len(rs) == 0 {
		t.Fatalf("route get %s mark %#x: %v", dst, mark, err)
	}
	l, err := netlink.LinkByIndex(rs[0].LinkIndex)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Name
}

// Up makes everything unmarked take the tunnel and marked datagrams the
// main table's default route, in both families, while a more specific
// route in main still wins; Down takes it all back.
func TestUpDown(t *testing.T) {
	inNamespace(t, func(under, tun netlink.Link) {
		m, err := ChooseMark(0)
		if err != nil || m != DefaultMark {
			t.Fatalf("ChooseMark(0) = %d, %v", m, err)
		}
		ft, err := Up(tun.Attrs().Index, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}, m)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			dst  string
			mark uint32
			want string
		}{
			{"198.51.100.7", 0, "tun"}, {"198.51.100.7", m, "under"}, {"198.51.100.7", m + 1, "tun"},
			{"2001:db8:ffff::7", 0, "tun"}, {"2001:db8:ffff::7", m, "under"},
			{"192.0.2.77", 0, "under"}, {"2001:db8::77", 0, "under"}, // on-link: main's more specific route
		} {
			if got := via(t, c.dst, c.mark); got != c.want {
				t.Errorf("%s with mark %#x goes via %s, want %s", c.dst, c.mark, got, c.want)
			}
		}
		// The table is taken now: a second tunnel picks the next.
		if m2, err := ChooseMark(0); err != nil || m2 != m+1 {
			t.Errorf("ChooseMark with table %d in use = %d, %v", m, m2, err)
		}
		if m2, _ := ChooseMark(7); m2 != 7 {
			t.Errorf("ChooseMark(7) = %d", m2)
		}
		for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rules, _ := netlink.RuleList(family)
			var got []string
			for _, r := range rules {
				got = append(got, ruleText(r))
			}
			want := []string{"0 table 255", "32764 table 254 suppress 0", "32765 not fwmark 51820 table 51820", "32766 table 254", "32767 table 253"}
			if family == netlink.FAMILY_V6 {
				want = append(want[:1:1], want[1:4]...) // no rule for table default
			}
			if strings.Join(got, "; ") != strings.Join(want, "; ") {
				t.Errorf("family %d rules:\n%s\nwant\n%s", family, strings.Join(got, "; "), strings.Join(want, "; "))
			}
		}
		if err := ft.Down(); err != nil {
			t.Fatal(err)
		}
		if got := via(t, "198.51.100.7", 0); got != "under" {
			t.Errorf("after Down, unmarked goes via %s", got)
		}
		for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rules, _ := netlink.RuleList(family)
			for _, r := range rules {
				if r.Table == int(m) || r.SuppressPrefixlen == 0 {
					t.Errorf("after Down: %s", ruleText(r))
				}
			}
			if rs, _ := netlink.RouteListFiltered(family, &netlink.Route{Table: int(m)}, netlink.RT_FILTER_TABLE); len(rs) != 0 {
				t.Errorf("after Down, table %d holds %v", m, rs)
			}
		}
	})
}

// A FwMark whose table has a default route through another link is
// refused, naming the table and the link, and leaves nothing behind.
func TestUpRefusesTakenTable(t *testing.T) {
	inNamespace(t, func(under, tun netlink.Link) {
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: under.Attrs().Index, Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Table: 100}); err != nil {
			t.Fatal(err)
		}
		_, err := Up(tun.Attrs().Index, []netip.Prefix{netip.MustParsePrefix("::/0"), netip.MustParsePrefix("0.0.0.0/0")}, 100)
		if err == nil || !strings.Contains(err.Error(), "full tunnel (IPv4): table 100: already has a default route (dev under)") {
			t.Fatalf("Up into a taken table: %v", err)
		}
		for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rules, _ := netlink.RuleList(family)
			for _, r := range rules {
				if r.Table == 100 || r.SuppressPrefixlen == 0 {
					t.Errorf("left behind: %s", ruleText(r))
				}
			}
		}
		if rs, _ := netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: 100}, netlink.RT_FILTER_TABLE); len(rs) != 0 {
			t.Errorf("the IPv6 route stayed: %v", rs)
		}
	})
}

func ruleText(r netlink.Rule) string {
	s := strconv.Itoa(r.Priority)
	if r.Invert {
		s += " not"
	}
	if r.Mark != 0 {
		s += " fwmark " + strconv.Itoa(int(r.Mark))
	}
	s += " table " + strconv.Itoa(r.Table)
	if r.SuppressPrefixlen >= 0 {
		s += " suppress " + strconv.Itoa(r.SuppressPrefixlen)
	}
	return s
}

// fakeProc writes conf/{all,under}/rp_filter under a temporary /proc.
func fakeProc(t *testing.T, all, under int) string {
	t.Helper()
	proc := t.TempDir()
	for dev, v := range map[string]int{"all": all, "under": under} {
		dir := filepath.Join(proc, "sys/net/ipv4/conf", dev)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "rp_filter"), []byte(strconv.Itoa(v)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proc
}

// The larger of all and the interface's value counts.
func TestRPFilter(t *testing.T) {
	for _, c := range [][3]int{{0, 0, 0}, {1, 0, 1}, {0, 1, 1}, {1, 2, 2}, {2, 1, 2}} {
		if got, err := RPFilter(fakeProc(t, c[0], c[1]), "under"); err != nil || got != c[2] {
			t.Errorf("all %d, under %d: %d, %v", c[0], c[1], got, err)
		}
	}
	if _, err := RPFilter(t.TempDir(), "under"); err == nil {
		t.Error("no error without the files")
	}
}

// Strict reverse-path filtering on the underlay is refused for an endpoint
// reached by the default route (its replies' source then routes into the
// tunnel), not for one on a subnet of its own, nor when it is loose.
func TestCheckReturnPath(t *testing.T) {
	inNamespace(t, func(under, tun netlink.Link) {
		ft, err := Up(tun.Attrs().Index, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, DefaultMark)
		if err != nil {
			t.Fatal(err)
		}
		defer ft.Down()
		far, near := netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr("192.0.2.9")
		err = ft.CheckReturnPath(fakeProc(t, 0, 1), []netip.Addr{near, far})
		if err == nil || !strings.Contains(err.Error(), "strict reverse-path filtering on under") || !strings.Contains(err.Error(), "198.51.100.9") ||
			!strings.Contains(err.Error(), "sysctl -w net.ipv4.conf.under.rp_filter=2") {
			t.Fatalf("strict, far endpoint: %v", err)
		}
		for _, c := range []struct {
			proc string
			eps  []netip.Addr
		}{{fakeProc(t, 1, 1), []netip.Addr{near}}, {fakeProc(t, 1, 2), []netip.Addr{far}}, {fakeProc(t, 0, 0), []netip.Addr{far}}} {
			if err := ft.CheckReturnPath(c.proc, c.eps); err != nil {
				t.Errorf("%v: %v", c.eps, err)
			}
		}
	})
}
