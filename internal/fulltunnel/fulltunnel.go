// Package fulltunnel routes a whole address family into the tunnel as
// wg-quick does when Table = auto and a peer's AllowedIPs hold 0.0.0.0/0
// or ::/0. The default route goes into a routing table of its own,
// numbered like the firewall mark M on every underlay socket, behind two
// policy rules per family, consulted in this order:
//
//	lookup main suppress_prefixlength 0    the main table, except its default route
//	not fwmark M lookup M                  then everything but the router's own datagrams: the tunnel
//
// So the host's more specific routes (its LAN, the underlay's subnet, the
// other AllowedIPs) still win, everything else takes the tunnel, and the
// router's datagrams, marked M, leave by the main table's default route
// instead of looping into their own tunnel. The main table's default
// route is left as it is.
package fulltunnel

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultMark is the first mark (and table) tried without FwMark, as
// wg-quick: 51820, or the first number above it whose table holds no route
// in either family. The mark never leaves the host, so it says nothing on
// the wire.
const DefaultMark = 51820

// Rules are the two rules of a full tunnel with mark m, as ip rule
// spells them, in the order they are consulted.
func Rules(m uint32) [2]string {
	return [2]string{"lookup main suppress_prefixlength 0", fmt.Sprintf("not fwmark %#x lookup %d", m, m)}
}

// RPFilter reads the reverse-path filter that applies to IPv4 datagrams
// arriving on ifname, from proc (normally /proc): the larger of
// conf/all/rp_filter and conf/IFNAME/rp_filter; 1 is strict, 2 loose.
func RPFilter(proc, ifname string) (int, error) {
	v := 0
	for _, dev := range []string{"all", ifname} {
		b, err := os.ReadFile(filepath.Join(proc, "sys/net/ipv4/conf", dev, "rp_filter"))
		if err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, fmt.Errorf("net.ipv4.conf.%s.rp_filter: %q", dev, b)
		}
		v = max(v, n)
	}
	return v, nil
}

// StrictRPFix is the fix for strict reverse-path filtering on ifname:
// loose is enough, and the larger value counts, so ifname alone.
func StrictRPFix(ifname string) string {
	return "sysctl -w net.ipv4.conf." + ifname + ".rp_filter=2 (loose)"
}
