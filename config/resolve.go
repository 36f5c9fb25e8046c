// Host names: the resolve step, which looks up the Endpoint host names the
// parse step found and picks an address the underlay sockets can reach.

package config

import (
	"context"
	"net"
	"net/netip"
)

// defaultLookup resolves with net.DefaultResolver.
func defaultLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// resolve looks up each Endpoint host name with lookup, each within
// lookupTimeout. Of its addresses it takes one of the family of a specific
// ListenAddress, and an IPv4 one over IPv6 when the sockets carry both.
// Problems are reported at the Endpoint line.
func (p *parser) resolve(lookup lookupFunc) {
	family := p.listenFamily()
	for _, ps := range p.peers {
		if ps.epHost == "" {
			continue
		}
		if len(p.errs) >= maxErrors {
			return // not worth a slow lookup: nothing more can be shown
		}
		l := ps.seen["Endpoint"]
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		addrs, err := lookup(ctx, ps.epHost)
		cancel()
		if err != nil {
			p.errorf(l, secPeer, "Endpoint", "cannot resolve %q: %v", ps.epHost, err)
			continue
		}
		var pick netip.Addr
		for _, a := range addrs {
			a = a.Unmap()
			if !a.IsValid() || !fitsFamily(a, family) {
				continue
			}
			if !pick.IsValid() || (a.Is4() && !pick.Is4()) {
				pick = a
			}
		}
		if !pick.IsValid() {
			if family != "" {
				p.errorf(l, secPeer, "Endpoint", "%q has no %s address to match ListenAddress %s (line %d)",
					ps.epHost, family, p.iface.ListenAddress.Unmap(), p.ifaceSeen["ListenAddress"])
			} else {
				p.errorf(l, secPeer, "Endpoint", "%q resolves to no IP address", ps.epHost)
			}
			continue
		}
		ps.Endpoint = netip.AddrPortFrom(pick, ps.epPort)
	}
}
