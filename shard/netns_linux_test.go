package shard

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/internal/netns"
	"github.com/yip-router/yip-router/shard/tun"
	"github.com/yip-router/yip-router/shard/udp"
)

// gw is one gateway of the namespace test: a TUN device with one queue per
// shard, the shards' sockets, and the running shards.
type gw struct {
	ns     string
	dev    *tun.Device
	conns  [][]*udp.Conn
	wg     sync.WaitGroup
	errs   chan error
	table  atomic.Pointer[Table]
	shards []*Shard
	mesh   *Mesh
}

func randIntn(n int) int {
	v, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return int(v.Int64())
}

// setupGateway creates the TUN device and sockets inside ns. initiator
// gateways use lane sockets (port low bits = lane); responders a steered
// SO_REUSEPORT group on port 51820.
func setupGateway(t *testing.T, ns, underlay string, n int, initiator bool, inner4, inner6, route4, route6 string) *gw {
	t.Helper()
	g := &gw{ns: ns, errs: make(chan error, n)}
	err := netns.Do(ns, func() error {
		var err error
		g.dev, err = tun.Open("yip%d", n, tun.Offloads{})
		if err != nil {
			return err
		}
		ip := netip.MustParseAddr(underlay)
		if initiator {
			for i := range n {
				c, err := udp.ListenLane(ip, i, randIntn)
				if err != nil {
					return err
				}
				g.conns = append(g.conns, []*udp.Conn{c})
			}
		} else {
			cs, err := udp.ListenGroup(netip.AddrPortFrom(ip, 51820), n)
			if err != nil {
				return err
			}
			for _, c := range cs {
				g.conns = append(g.conns, []*udp.Conn{c})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range [][]string{
		{"-n", ns, "link", "set", g.dev.Name, "mtu", "1400", "up"},
		{"-n", ns, "addr", "add", inner4, "dev", g.dev.Name},
		{"-n", ns, "addr", "add", inner6, "dev", g.dev.Name, "nodad"},
		{"-n", ns, "route", "add", route4, "dev", g.dev.Name},
		{"-n", ns, "route", "add", route6, "dev", g.dev.Name},
	} {
		if err := netns.IP(s...); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewMesh(n)
	if err != nil {
		t.Fatal(err)
	}
	g.mesh = m
	t.Cleanup(func() {
		m.Close()
		g.dev.Close()
		for _, cs := range g.conns {
			for _, c := range cs {
				c.Close()
			}
		}
	})
	return g
}

func (g *gw) start(t *testing.T, routes []Route) {
	t.Helper()
	g.table.Store(NewTable(routes))
	for i := range g.dev.Queues {
		s, err := New(Config{ID: i, CPU: i % 2, TUN: g.dev.Queues[i], Conns: g.conns[i], Mesh: g.mesh, Table: &g.table})
		if err != nil {
			t.Fatal(err)
		}
		g.shards = append(g.shards, s)
	}
}

func (g *gw) run() {
	for _, s := range g.shards {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			if err := s.Run(); err != nil {
				g.errs <- err
			}
		}()
	}
}

func (g *gw) stop(t *testing.T) {
	for _, s := range g.shards {
		s.Stop()
	}
	g.wg.Wait()
	close(g.errs)
	for err := range g.errs {
		t.Error(err)
	}
}

// flows sends count datagrams on each of nflows UDP flows from namespace
// src to dst:port through the tunnel and returns how many arrived intact.
func flows(t *testing.T, src, dst string, srcIP, dstIP string, nflows, count int) int {
	t.Helper()
	var rx *net.UDPConn
	err := netns.Do(dst, func() error {
		var err error
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(dstIP), 9000)))
		if err == nil {
			err = rx.SetReadBuffer(8 << 20)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	got := make(chan int)
	go func() {
		n := 0
		buf := make([]byte, 2000)
		for {
			rx.SetReadDeadline(time.Now().Add(time.Second))
			k, _, err := rx.ReadFromUDP(buf)
			if err != nil {
				break
			}
			if k == 700 && buf[0] == 0xa5 && buf[699] == 0x5a {
				n++
			}
		}
		got <- n
	}()
	payload := make([]byte, 700)
	payload[0], payload[699] = 0xa5, 0x5a
	var txs []*net.UDPConn
	err = netns.Do(src, func() error {
		for range nflows {
			c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(srcIP), 0)),
				net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(dstIP), 9000)))
			if err != nil {
				return err
			}
			txs = append(txs, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		for _, c := range txs {
			if _, err := c.Write(payload); err != nil {
				t.Fatal(err)
			}
		}
		if i%2 == 1 {
			// Pace the burst: the test measures the tunnel, not how
			// fast this goroutine's reader drains its socket.
			time.Sleep(time.Millisecond)
		}
	}
	for _, c := range txs {
		c.Close()
	}
	return <-got
}

// TestNamespaceShards runs two gateways in two namespaces over veth with
// real multiqueue TUN devices and steered UDP sockets, and checks IPv4 and
// IPv6 inner traffic both ways and that each lane's datagrams are handled
// by the shard that owns it on both ends.
func TestNamespaceShards(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip("namespace test skipped: ", err)
	}
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("shards=%d", n), func(t *testing.T) {
			suffix := fmt.Sprintf("%d%d", time.Now().UnixNano()%100000, n)
			nsA, nsB := "yipA"+suffix, "yipB"+suffix
			for _, ns := range []string{nsA, nsB} {
				if err := netns.Add(ns); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { netns.Del(ns) })
			}
			if err := netns.Veth(nsA, "ua", "172.31.99.1/24", nsB, "ub", "172.31.99.2/24"); err != nil {
				t.Fatal(err)
			}
			a := setupGateway(t, nsA, "172.31.99.1", n, true, "10.1.0.1/16", "fd00:1::1/64", "10.2.0.0/16", "fd00:2::/64")
			b := setupGateway(t, nsB, "172.31.99.2", n, false, "10.2.0.1/16", "fd00:2::1/64", "10.1.0.0/16", "fd00:1::/64")
			a.start(t, routesA)
			b.start(t, routesB)

			var k1, k2 [32]byte
			rand.Read(k1[:])
			rand.Read(k2[:])
			ka, kb := crypto.NewSessionKeys(k1, k2, true), crypto.NewSessionKeys(k1, k2, false)
			bAddr := b.conns[0][0].LocalAddr()
			for i := range n {
				aAddr := a.conns[i][0].LocalAddr()
				for _, x := range []struct {
					g      *gw
					keys   crypto.SessionKeys
					peer   PeerID
					remote netip.AddrPort
				}{{a, ka, 2, bAddr}, {b, kb, 1, aAddr}} {
					if err := x.g.shards[i].InstallLane(LaneConfig{Peer: x.peer, Index: i, Lanes: n, Remote: x.remote,
						Send: x.keys.SendLane(i), Recv: x.keys.RecvLane(i), FEC: fec.EncoderConfig{K: 8, R: 1}}); err != nil {
						t.Fatal(err)
					}
					for j, s := range x.g.shards {
						if j != i {
							s.SetLaneOwner(x.peer, n, i, i, x.remote)
						}
					}
				}
			}
			a.run()
			b.run()

			const nflows, count = 16, 50
			want := nflows * count
			for _, c := range []struct{ src, dst, srcIP, dstIP string }{
				{nsA, nsB, "10.1.0.1", "10.2.0.1"},
				{nsB, nsA, "10.2.0.1", "10.1.0.1"},
				{nsA, nsB, "fd00:1::1", "fd00:2::1"},
				{nsB, nsA, "fd00:2::1", "fd00:1::1"},
			} {
				got := flows(t, c.src, c.dst, c.srcIP, c.dstIP, nflows, count)
				if got < want*99/100 {
					t.Errorf("%s → %s: %d of %d datagrams arrived", c.srcIP, c.dstIP, got, want)
				}
			}
			a.stop(t)
			b.stop(t)
			for _, g := range []*gw{a, b} {
				for i, s := range g.shards {
					sn := s.Snapshot()
					t.Logf("%s shard %d: tun_in %d udp_out %d udp_in %d tun_out %d handed_off %d foreign %d parity %d",
						g.ns, i, sn.Get(TunIn), sn.Get(UDPOut), sn.Get(UDPIn), sn.Get(TunOut), sn.Get(HandedOff), sn.Get(ForeignLane), sn.Get(ParityOut))
					if sn.Get(ForeignLane) != 0 || sn.Get(DropUnknownLane) != 0 || sn.Get(DropBadTag) != 0 {
						t.Errorf("%s shard %d got datagrams of a lane it does not own: %v", g.ns, i, sn)
					}
					if sn.Get(UDPIn) == 0 || sn.Get(TunOut) == 0 {
						t.Errorf("%s shard %d carried no traffic: lanes not spread over shards", g.ns, i)
					}
				}
			}
			// Lane i is shard i on both ends: what A's shard i sent, B's
			// shard i received, and back (veth loses nothing).
			for i := range n {
				sa, sb := a.shards[i].Snapshot(), b.shards[i].Snapshot()
				if sa.Get(UDPOut) != sb.Get(UDPIn) || sb.Get(UDPOut) != sa.Get(UDPIn) {
					t.Errorf("lane %d: A sent %d, B's shard %d got %d; B sent %d, A's shard got %d",
						i, sa.Get(UDPOut), i, sb.Get(UDPIn), sb.Get(UDPOut), sa.Get(UDPIn))
				}
			}
		})
	}
}
