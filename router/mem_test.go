package router

import (
	"net/netip"
	"testing"

	"go.uber.org/zap"

	"github.com/yip-router/yip-router/control"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
	"github.com/yip-router/yip-router/shard/udp"
)

// newTestRouter is a Router on loopback sockets with one shard that never
// runs and no TUN device: enough for Reload and the shard group, which the
// control core's own tests fake.
func newTestRouter(t testing.TB) *Router {
	t.Helper()
	priv, err := crypto.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	r := &Router{log: zap.NewNop(), local: crypto.NewLocal(priv, true), stop: make(chan struct{})}
	t.Cleanup(r.closeResources)
	lo := netip.MustParseAddr("127.0.0.1")
	if r.group, err = udp.ListenGroup(netip.AddrPortFrom(lo, 0), 1); err != nil {
		t.Fatal(err)
	}
	lc, err := udp.ListenLane(lo)
	if err != nil {
		t.Fatal(err)
	}
	r.laneSk = []*udp.Conn{lc}
	if r.plane, err = shard.NewGroup(1, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.plane.Add(shard.Config{CPU: -1,
		Conns: []shard.Socket{shard.ConnGroup: r.group[0], shard.ConnLane: lc}}); err != nil {
		t.Fatal(err)
	}
	r.shards = r.plane.Shards()
	r.core = control.New(control.Deps{Local: r.local, Plane: r.plane, Log: r.log})
	return r
}
