// Host names: the resolve step, which looks up the Endpoint host names the
// parse step found, and ResolveEndpoint, the one rule for turning a name
// into an address the underlay sockets can reach, which the router uses
// again while it runs.

package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// LookupTimeout bounds one lookup of an Endpoint host name.
const LookupTimeout = lookupTimeout

// Lookup resolves a host name to its addresses.
type Lookup func(ctx context.Context, host string) ([]netip.Addr, error)

// DefaultLookup resolves with net.DefaultResolver.
func DefaultLookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// HostPort is an Endpoint written as a host name and a port.
type HostPort struct {
	Host string
	Port uint16
}

// IsZero reports whether h names no host.
func (h HostPort) IsZero() bool { return h.Host == "" }

func (h HostPort) String() string { return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port))) }

// noAddressError is a lookup that succeeded without an address the
// underlay sockets can use.
type noAddressError struct{ host, family string }

func (e *noAddressError) Error() string {
	if e.family != "" {
		return fmt.Sprintf("%q has no %s address", e.host, e.family)
	}
	return fmt.Sprintf("%q resolves to no IP address", e.host)
}

// ResolveEndpoint looks up h.Host and picks one of its addresses: one of
// family (as FamilyOf names it; "" = both), and an IPv4 one over IPv6 when
// the sockets carry both. The caller bounds ctx (LookupTimeout).
func ResolveEndpoint(ctx context.Context, lookup Lookup, h HostPort, family string) (netip.AddrPort, error) {
	addrs, err := lookup(ctx, h.Host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("cannot resolve %q: %w", h.Host, err)
	}
	var pick netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if !a.IsValid() || a.Zone() != "" || !fitsFamily(a, family) {
			continue
		}
		if !pick.IsValid() || (a.Is4() && !pick.Is4()) {
			pick = a
		}
	}
	if !pick.IsValid() {
		return netip.AddrPort{}, &noAddressError{h.Host, family}
	}
	return netip.AddrPortFrom(pick, h.Port), nil
}

// resolve looks up each Endpoint host name with lookup, each within
// lookupTimeout. A name that does not resolve is a warning at its
// Endpoint line, not an error: the peer starts without an address, and
// the router looks the name up again while it runs.
func (p *parser) resolve(lookup Lookup) {
	family := p.listenFamily()
	for _, ps := range p.peers {
		if ps.EndpointName.IsZero() {
			continue
		}
		if len(p.errs) >= maxErrors {
			return // not worth a slow lookup: nothing more can be shown
		}
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		ep, err := ResolveEndpoint(ctx, lookup, ps.EndpointName, family)
		cancel()
		if err != nil {
			msg := err.Error()
			if na := (*noAddressError)(nil); errors.As(err, &na) && family != "" {
				msg = fmt.Sprintf("%q has no %s address to match ListenAddress %s (line %d)",
					ps.EndpointName.Host, family, p.iface.ListenAddress.Unmap(), p.ifaceSeen["ListenAddress"])
			}
			p.warnf(ps.seen["Endpoint"], secPeer, "Endpoint",
				"%s; the peer has no address until a lookup succeeds (the router looks the name up again while it runs; the peer can still start handshakes)", msg)
			continue
		}
		ps.Endpoint = ep
	}
}
