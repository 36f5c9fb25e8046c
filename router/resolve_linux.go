package router

import (
	"context"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// lookup resolves an Endpoint host name for the resolver. With a mark on
// the underlay sockets (FwMark, or a full tunnel's) the queries carry it
// too, through Go's own resolver: a full tunnel routes every unmarked
// packet into the tunnel, so a name that must be looked up again because
// the tunnel is dead would otherwise be asked through it. A local stub
// resolver (127.0.0.53) forwards unmarked, so it gains nothing from this.
func (r *Router) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if r.mark == 0 {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	return markedResolver(r.mark).LookupNetIP(ctx, "ip", host)
}

// markedResolver is Go's resolver with every query socket marked.
func markedResolver(mark uint32) *net.Resolver {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
		}); err != nil {
			return err
		}
		return serr
	}}
	return &net.Resolver{PreferGo: true, Dial: d.DialContext}
}
