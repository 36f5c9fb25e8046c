// The checks of the ports: whether the listen and metrics ports can be
// bound, and what the ListenPort chosen means for peers and for a
// classifier on the path.

package hostcheck

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/yip-router/yip-router/config"
)

func (e Env) ports(cfg *config.Config) []Finding {
	var out []Finding
	bind := cfg.Interface.ListenAddress
	if !bind.IsValid() {
		bind = netip.IPv6Unspecified() // as the router: both families
	}
	ap := netip.AddrPortFrom(bind, cfg.Interface.ListenPort)
	out = append(out, portChoice(cfg)...)
	if cfg.Interface.ListenPort == 0 {
		return append(out, e.metricsPort(cfg)...)
	}
	if err := e.ListenUDP(ap); err != nil {
		fix := fmt.Sprintf("stop what holds it (ss -ulpn 'sport = :%d' names it; if it is this router, already running, that is expected) or change ListenPort", ap.Port())
		if errors.Is(err, errPerm) {
			fix = "run as root, or choose ListenPort >= 1024"
		}
		out = append(out, Finding{Level: Error, Topic: "listen port", Msg: fmt.Sprintf("cannot bind UDP %s: %v", ap, err), Fix: fix})
	} else {
		out = append(out, Finding{Level: OK, Topic: "listen port", Msg: fmt.Sprintf("UDP %s is free; it is the only port peers need to reach (the lane sockets use ephemeral ports)", ap)})
	}
	return append(out, e.metricsPort(cfg)...)
}

// wellKnownUDP are UDP ports that DPI engines (nDPI, OpenGFW) map to a
// protocol by port alone: a tunnel on one of them is classified, and
// blockable, without looking at a byte.
var wellKnownUDP = map[uint16]string{
	51820: "WireGuard", 51821: "WireGuard", 1194: "OpenVPN", 500: "IKE (IPsec)", 4500: "IPsec NAT-T",
	1701: "L2TP", 443: "QUIC", 53: "DNS", 123: "NTP", 3478: "STUN/TURN", 5060: "SIP",
	4789: "VXLAN", 6081: "Geneve", 1812: "RADIUS", 1813: "RADIUS accounting",
}

// portChoice reports what the ListenPort setting means for peers and for
// a classifier on the path.
func portChoice(cfg *config.Config) []Finding {
	port := cfg.Interface.ListenPort
	if port == 0 {
		for _, p := range cfg.Peers {
			if !p.HasEndpoint() {
				return []Finding{{Level: Warn, Topic: "listen port",
					Msg: fmt.Sprintf("no ListenPort: the router listens on a port the kernel picks at each start, but the peer at line %d has no Endpoint and can only reach this router at a fixed port", p.Line),
					Fix: "set ListenPort to a port of your choosing (not a well-known one) and give it to that peer as Endpoint"}}
			}
			if p.Endpoint.Port() == 51820 {
				return []Finding{{Level: Warn, Topic: "listen port",
					Msg: fmt.Sprintf("no ListenPort, and the peer at line %d listens on 51820, the old default: if it has this router as Endpoint at 51820 too, it can no longer reach it (ListenPort has no default any more; the kernel picks a port at each start)", p.Line),
					Fix: "set ListenPort (51820 keeps the old behaviour, but DPI engines classify it as WireGuard; better choose another port on both sides)"}}
			}
		}
		return []Finding{{Level: Info, Topic: "listen port", Msg: "no ListenPort: a port the kernel picks at each start; fine only if no peer initiates to this router (a peer that has it as Endpoint needs a fixed port)"}}
	}
	if proto, ok := wellKnownUDP[port]; ok {
		return []Finding{{Level: Warn, Topic: "listen port",
			Msg: fmt.Sprintf("ListenPort %d is %s's port: DPI engines classify (and may block) the tunnel by the port alone", port, proto),
			Fix: "choose another port (any unregistered high port), and tell the peers"}}
	}
	return nil
}

// metricsPort checks MetricsListen can be bound.
func (e Env) metricsPort(cfg *config.Config) []Finding {
	var out []Finding
	if cfg.Interface.MetricsListen != "" {
		m, err := netip.ParseAddrPort(cfg.Interface.MetricsListen)
		if err == nil {
			err = e.ListenTCP(m)
		}
		if err != nil {
			out = append(out, Finding{Level: Error, Topic: "metrics", Msg: fmt.Sprintf("cannot listen on MetricsListen = %s: %v", cfg.Interface.MetricsListen, err),
				Fix: "free the port or change MetricsListen (the router would refuse to start)"})
		} else {
			out = append(out, Finding{Level: OK, Topic: "metrics", Msg: "TCP " + m.String() + " is free for MetricsListen"})
		}
	}
	return out
}

// errPerm marks a bind refused for lack of privilege.
var errPerm = errors.New("permission denied")

func listen(network string, ap netip.AddrPort) error {
	var err error
	switch network {
	case "udp":
		var c net.PacketConn
		if c, err = net.ListenPacket("udp", ap.String()); err == nil {
			return c.Close()
		}
	default:
		var l net.Listener
		if l, err = net.Listen("tcp", ap.String()); err == nil {
			return l.Close()
		}
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: %v", errPerm, err)
	}
	return err
}
