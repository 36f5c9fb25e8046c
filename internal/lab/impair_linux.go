package lab

import (
	"errors"
	"fmt"
	"os/exec"

	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/netns"
)

// Impaired is a middle namespace whose impair.Bridge (goroutines of this
// process) joins two other namespaces on one Ethernet segment: see
// JoinImpaired. Options.Impair builds one; tests/bench/compare builds one
// for wireguard-go's namespaces.
type Impaired struct {
	NS     string // the middle namespace
	bridge *impair.Bridge
	closed bool
}

// JoinImpaired creates namespace mid and, for each side s, a veth pair
// from link[s] in the existing namespace ns[s] (address addr[s], CIDR,
// up) to "m"+link[s] in mid (no address, up), then bridges the two middle
// links under cfg (Dir[0]: ns[0] to ns[1]). Offloads are off on all four
// ends (the outer ones here, the middle ones by impair.Start), so frames
// cross the bridge one segment at a time with complete checksums whatever
// the programs on either side ask of their link. mid has IPv6 off: it has
// no traffic of its own to bridge. Link names must be at most 14 bytes.
// On error nothing of mid is left.
func JoinImpaired(mid string, ns, link, addr [2]string, cfg *impair.Config) (_ *Impaired, err error) {
	if err := netns.Add(mid); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			// Deleting mid deletes the veth pairs with it.
			_ = netns.Del(mid)
		}
	}()
	for s := range 2 {
		for _, args := range [][]string{
			{"link", "add", link[s], "netns", ns[s], "type", "veth", "peer", "name", "m" + link[s], "netns", mid},
			{"-n", ns[s], "addr", "add", addr[s], "dev", link[s]},
			{"-n", mid, "link", "set", "m" + link[s], "up"},
			{"-n", ns[s], "link", "set", link[s], "up"},
		} {
			if err := netns.IP(args...); err != nil {
				return nil, err
			}
		}
		if err := impair.DisableOffloads(ns[s], link[s]); err != nil {
			return nil, fmt.Errorf("%s: %w", link[s], err)
		}
	}
	for _, ifn := range []string{"all", "default", "m" + link[0], "m" + link[1]} {
		if out, err := exec.Command("ip", "netns", "exec", mid, "sysctl", "-qw", "net.ipv6.conf."+ifn+".disable_ipv6=1").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("disable_ipv6: %v: %s", err, out)
		}
	}
	b, err := impair.Start(mid, "m"+link[0], "m"+link[1], cfg)
	if err != nil {
		return nil, err
	}
	return &Impaired{NS: mid, bridge: b}, nil
}

// Stats returns the bridge's counters per direction ([0]: ns[0] to ns[1]).
func (p *Impaired) Stats() [2]impair.Stats { return p.bridge.Stats() }

// Set changes the running bridge's impairment; counters are kept.
func (p *Impaired) Set(cfg *impair.Config) { p.bridge.Set(cfg) }

// Close stops the bridge and deletes the middle namespace (and with it the
// veth pairs: the outer namespaces lose their links).
func (p *Impaired) Close() error {
	if p.closed {
		return errors.New("lab: impairment bridge already closed")
	}
	p.closed = true
	return errors.Join(p.bridge.Close(), netns.Del(p.NS))
}
