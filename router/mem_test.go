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
// runs and no TUN device: enough for Reload and the plane, which the
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
	if r.mesh, err = shard.NewMesh(1); err != nil {
		t.Fatal(err)
	}
	s, err := shard.New(shard.Config{ID: 0, CPU: -1, Mesh: r.mesh, Table: &r.table,
		Conns: []shard.Socket{control.ConnGroup: r.group[0], control.ConnLane: lc}})
	if err != nil {
		t.Fatal(err)
	}
	r.shards = []*shard.Shard{s}
	pl := r.newPlane()
	pl.shards = r.shards
	r.core = control.New(control.Deps{Local: r.local, Plane: pl, Log: r.log})
	return r
}
