package shard

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

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
	steer  *udp.Steering // the responder's lane map
	// strangers and known are the responder's strangers' and known
	// sockets, one each per shard.
	strangers, known []*udp.Conn
}

// setupGateway creates the TUN device and sockets inside ns. initiator
// gateways use lane sockets (ports the kernel picks); responders an
// SO_REUSEPORT group on port 51820 steered by lane remote.
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
			for range n {
				c, err := udp.ListenLane(ip)
				if err != nil {
					return err
				}
				g.conns = append(g.conns, []*udp.Conn{c})
			}
		} else {
			if g.steer, err = udp.NewSteering(n, 64); err != nil {
				return err
			}
			cs, strangers, known, err := udp.ListenSteered(netip.AddrPortFrom(ip, 51820), n, g.steer)
			if err != nil {
				return err
			}
			g.strangers, g.known = strangers, known
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
		if g.steer != nil {
			g.steer.Close()
		}
		for _, cs := range append(g.conns, g.strangers, g.known) {
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
		cfg := Config{ID: i, CPU: i % 2, TUN: g.dev.Queues[i], Conns: []Socket{g.conns[i][0]}, Mesh: g.mesh, Table: &g.table}
		if g.steer != nil {
			cfg.Steer, cfg.Strangers, cfg.Known = g.steer, g.strangers[i], g.known[i]
		}
		s, err := New(cfg)
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

// flowResult is what one direction's flows measured.
type flowResult struct {
	sent, arrived int
	rxDrops       uint64 // dropped by the kernel at the receiving socket
}

// flows sends count datagrams on each of nflows UDP flows from namespace
// src to dst:port through the tunnel and reports how many arrived intact.
// It paces itself (one datagram per flow, then a millisecond's sleep) so an
// idle machine drops nothing, but it cannot stop a busy one from starving a
// shard while the sender's TUN queue overflows: the caller accounts for
// what the kernel reports dropped.
func flows(t *testing.T, src, dst string, srcIP, dstIP string, nflows, count int) flowResult {
	t.Helper()
	var rx *net.UDPConn
	err := netns.Do(dst, func() error {
		var err error
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(dstIP), 9000)))
		if err != nil {
			return err
		}
		// Beyond rmem_max (we are root): the test's own reader being
		// slow is not what it measures.
		return control(rx, func(fd int) error {
			return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		})
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
	for range count {
		for _, c := range txs {
			if _, err := c.Write(payload); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Millisecond)
	}
	for _, c := range txs {
		c.Close()
	}
	res := flowResult{sent: nflows * count, arrived: <-got}
	if err := control(rx, func(fd int) error { res.rxDrops = sockDrops(t, fd); return nil }); err != nil {
		t.Fatal(err)
	}
	return res
}

// control runs f on c's file descriptor.
func control(c *net.UDPConn, f func(fd int) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// sockDrops is how many datagrams the kernel dropped at socket fd (its
// receive buffer was full): SO_MEMINFO's SK_MEMINFO_DROPS.
func sockDrops(t *testing.T, fd int) uint64 {
	t.Helper()
	var mem [unix.SK_MEMINFO_VARS]uint32
	n := uint32(unsafe.Sizeof(mem))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&n)), 0)
	if errno != 0 {
		t.Fatalf("SO_MEMINFO: %v", errno)
	}
	return uint64(mem[unix.SK_MEMINFO_DROPS])
}

// devDrops returns, per interface of namespace ns, the packets the kernel
// dropped on it, received and sent (/proc/net/dev; a TUN device counts
// what overflowed its queue while the shard reading it was not running as
// transmit drops).
func devDrops(t *testing.T, ns string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := netns.Do(ns, func() error {
		// thread-self: /proc/net is the namespace of the process's main
		// thread, not of this one.
		b, err := os.ReadFile("/proc/thread-self/net/dev")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n")[2:] {
			name, rest, ok := strings.Cut(line, ":")
			f := strings.Fields(rest)
			if !ok || len(f) < 12 {
				continue
			}
			rxDrop, err1 := strconv.ParseUint(f[3], 10, 64)
			txDrop, err2 := strconv.ParseUint(f[11], 10, 64)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("/proc/net/dev: %q", line)
			}
			out[strings.TrimSpace(name)] = rxDrop + txDrop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// loss is every drop the kernel and the shard report on one gateway: its
// namespace's interfaces, the shards' sockets and the shards' drop
// counters. Not drop_duplicate (not a loss) nor drop_no_route: the test's
// traffic always has a route, and what has none is the kernel's own IPv6
// multicast on the TUN device, which would only hide real losses.
func (g *gw) loss(t *testing.T) uint64 {
	n := sum(devDrops(t, g.ns))
	for i, s := range g.shards {
		for _, c := range g.conns[i] {
			n += sockDrops(t, c.Fd())
		}
		sn := s.Snapshot()
		for _, c := range Counters() {
			if strings.HasPrefix(c.String(), "drop_") && c != DropDuplicate && c != DropNoRoute {
				n += sn.Get(c)
			}
		}
	}
	return n
}

// TestNamespaceShards runs two gateways in two namespaces over veth with
// real multiqueue TUN devices and steered UDP sockets, and checks IPv4 and
// IPv6 inner traffic both ways and that each lane's datagrams are handled
// by the shard that owns it on both ends.
//
// It must hold on a loaded 2-core machine, where a starved shard lets its
// TUN queue overflow: every datagram that did not arrive must be one the
// kernel or a shard reports dropped, and per lane, what A's shard i sent is
// what B's shard i received plus what its socket dropped (and back).
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
							recv := x.keys.RecvLane(i)
							s.SetLaneOwner(x.peer, n, i, i, x.remote, &recv)
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
				before := a.loss(t) + b.loss(t)
				r := flows(t, c.src, c.dst, c.srcIP, c.dstIP, nflows, count)
				// flows waited a second for stragglers: the shards have
				// published their counters since (every 50 ms).
				dropped := a.loss(t) + b.loss(t) - before + r.rxDrops
				t.Logf("%s → %s: %d of %d datagrams arrived, %d drops reported", c.srcIP, c.dstIP, r.arrived, want, dropped)
				if r.arrived == 0 || uint64(want-r.arrived) > dropped {
					t.Errorf("%s → %s: %d of %d datagrams arrived; only %d drops reported",
						c.srcIP, c.dstIP, r.arrived, want, dropped)
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
			// shard i received or its socket dropped, and back. Whatever
			// else is missing the veth pair must have dropped (it does
			// not on this test's loads, but says so if it does).
			vethDrops := devDrops(t, nsA)["ua"] + devDrops(t, nsB)["ub"]
			var missing int64
			for i := range n {
				for _, d := range []struct {
					from, to *gw
					name     string
				}{{a, b, "A → B"}, {b, a, "B → A"}} {
					sf, st := d.from.shards[i].Snapshot(), d.to.shards[i].Snapshot()
					out, in := sf.Get(UDPOut), st.Get(UDPIn)
					sock := sockDrops(t, d.to.conns[i][0].Fd())
					gap := int64(out) - int64(in) - int64(sock)
					missing += gap
					if gap != 0 {
						t.Logf("lane %d %s: sent %d, received %d, socket dropped %d", i, d.name, out, in, sock)
					}
					if gap < 0 {
						t.Errorf("lane %d %s: shard %d received %d (and its socket dropped %d) but its peer's shard %d sent only %d: datagrams of another lane",
							i, d.name, i, in, sock, i, out)
					}
				}
			}
			if missing > int64(vethDrops) {
				t.Errorf("%d datagrams sent by one shard neither reached the lane's shard on the other end nor were dropped by its socket (veth dropped %d)",
					missing, vethDrops)
			}
		})
	}
}
