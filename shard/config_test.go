package shard

// What a shard, a mesh and a lane refuse to be built from, what the
// devices they are given change, and the counters' names.

import (
	"crypto/rand"
	"net/netip"
	"regexp"
	"sync/atomic"
	"testing"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/offload"
	"github.com/yip-router/yip-router/shard/udp"
)

// stubSocket is a Socket that receives nothing and takes every datagram,
// with UDP GRO or not; gone, if set, is reported as a local address the
// host lost (udp.Batch.LocalGone) on every send. sent keeps each datagram's
// destination and source address.
type stubSocket struct {
	gro  bool
	gone netip.Addr
	sent []stubSent
}

type stubSent struct {
	to    netip.AddrPort
	local netip.Addr
}

func (s *stubSocket) Fd() int                                           { return -1 }
func (s *stubSocket) Recv(*udp.Batch, int) (int, error)                 { return 0, nil }
func (s *stubSocket) GRO() bool                                         { return s.gro }
func (s *stubSocket) LocalAddr() netip.AddrPort                         { return netip.AddrPort{} }
func (s *stubSocket) SendTo([]byte, netip.AddrPort) error               { return nil }
func (s *stubSocket) SendFrom([]byte, netip.AddrPort, netip.Addr) error { return nil }
func (s *stubSocket) Send(b *udp.Batch, n int) (int, error) {
	for i := range n {
		s.sent = append(s.sent, stubSent{b.Addrs[i], b.Local[i]})
		b.Sent[i] = true
	}
	b.LocalGone = s.gone
	return n, nil
}

// vnetTUN is a TUN queue whose reads and writes carry the virtio-net
// header; it reads nothing.
type vnetTUN struct{}

func (vnetTUN) Fd() int                  { return -1 }
func (vnetTUN) Read([]byte) (int, error) { return 0, nil }
func (vnetTUN) Write([]byte) error       { return nil }
func (vnetTUN) VnetHdr() bool            { return true }

// meshAndTable is a mesh of two shards and a route table, for shards made
// by hand; the mesh is closed when the test ends.
func meshAndTable(t *testing.T) (*Mesh, *atomic.Pointer[Table]) {
	t.Helper()
	m, err := NewMesh(2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	table := new(atomic.Pointer[Table])
	table.Store(NewTable(routesA))
	return m, table
}

func TestNewRefusesBadConfig(t *testing.T) {
	m, table := meshAndTable(t)
	for name, cfg := range map[string]Config{
		"no mesh":        {ID: 0, Table: table},
		"negative id":    {ID: -1, Mesh: m, Table: table},
		"id beyond mesh": {ID: 2, Mesh: m, Table: table},
		"no table":       {ID: 0, Mesh: m},
	} {
		if s, err := New(cfg); err == nil || s != nil {
			t.Errorf("%s: New = %v, %v; want an error", name, s, err)
		}
	}
	for _, n := range []int{0, -1, crypto.MaxLanes + 1} {
		if _, err := NewMesh(n); err == nil {
			t.Errorf("NewMesh(%d) made a mesh: one lane per shard allows 1..%d", n, crypto.MaxLanes)
		}
	}
}

// The devices decide the buffers: a socket with UDP GRO needs receive
// buffers for a whole 64 KB message, one without one byte more than any
// datagram (so a longer one shows); a TUN queue with the virtio-net header
// turns on the splitter and coalescer with the offloads granted.
func TestNewSizesForDevices(t *testing.T) {
	m, table := meshAndTable(t)
	plain, err := New(Config{ID: 0, CPU: -1, Conns: []Socket{&stubSocket{}}, Mesh: m, Table: table, Pool: 64})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(plain.rx.Bufs[0]); n != BufSize+1 || plain.vnet != nil || plain.cfg.Batch != DefaultBatch {
		t.Fatalf("plain socket: receive buffers of %d bytes, vnet %v, batch %d", n, plain.vnet != nil, plain.cfg.Batch)
	}
	gro, err := New(Config{ID: 1, CPU: -1, TUN: vnetTUN{}, CoalesceTCP: true, Batch: 8,
		Conns: []Socket{&stubSocket{}, &stubSocket{gro: true}}, Mesh: m, Table: table, Pool: 64})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(gro.rx.Bufs[0]); n != offload.MaxPacket || len(gro.rx.Bufs) != 8 {
		t.Fatalf("GRO socket: %d receive buffers of %d bytes, want 8 of %d", len(gro.rx.Bufs), n, offload.MaxPacket)
	}
	if gro.vnet == nil || gro.tunIn == nil {
		t.Fatal("a TUN queue with the virtio-net header did not turn on offloads")
	}
}

// A lane config the shard cannot run is refused whole: no lane, and the
// peer's waiting packets keep waiting for a good install.
func TestInstallLaneRefusesBadConfig(t *testing.T) {
	sd := newSide(t, 1, routesA)
	s := sd.shards[0]
	inject(t, s, ipPacket("10.1.0.5", "10.2.0.9", 60, 1))
	var k [32]byte
	rand.Read(k[:])
	keys := crypto.NewSessionKeys(k, k, true)
	good := LaneConfig{Peer: 2, Index: 0, Lanes: 1, Remote: addrB, Conn: 0,
		Send: keys.SendLane(0), Recv: keys.RecvLane(0), FEC: fec.EncoderConfig{K: 8, R: 2}}
	for name, change := range map[string]func(*LaneConfig){
		"conn beyond the sockets": func(c *LaneConfig) { c.Conn = 1 },
		"negative conn":           func(c *LaneConfig) { c.Conn = -1 },
		"index beyond the lanes":  func(c *LaneConfig) { c.Index = 1 },
		"negative index":          func(c *LaneConfig) { c.Index = -1 },
		"no data symbols":         func(c *LaneConfig) { c.FEC.K = 0 },
		"too much parity":         func(c *LaneConfig) { c.FEC.R = fec.MaxR + 1 },
	} {
		cfg := good
		change(&cfg)
		if err := s.InstallLane(cfg); err == nil {
			t.Errorf("%s: installed", name)
		}
		if st := s.LaneStatuses(); len(st) != 0 {
			t.Fatalf("%s: refused, yet lanes %+v", name, st)
		}
	}
	s.flushAll()
	if len(sd.sent[0]) != 0 || s.waitTotal != 1 {
		t.Fatalf("after refused installs: %d datagrams sent, %d packets waiting; want 0 and 1", len(sd.sent[0]), s.waitTotal)
	}
	if err := s.InstallLane(good); err != nil {
		t.Fatal(err)
	}
	s.flushAll()
	if len(sd.sent[0]) != 1 || s.waitTotal != 0 {
		t.Fatalf("after the install: %d datagrams sent, %d packets waiting; want 1 and 0", len(sd.sent[0]), s.waitTotal)
	}
}

// Every counter has its own name, in the metric names' form, and only the
// two high-water marks are gauges.
func TestCounterNames(t *testing.T) {
	cs := Counters()
	if len(cs) != int(numCounters) {
		t.Fatalf("%d counters listed, %d defined", len(cs), numCounters)
	}
	form := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[string]Counter{}
	for i, c := range cs {
		if c != Counter(i) {
			t.Fatalf("Counters()[%d] = %d", i, c)
		}
		name := c.String()
		if !form.MatchString(name) {
			t.Errorf("counter %d is named %q", c, name)
		}
		if o, dup := seen[name]; dup {
			t.Errorf("counters %d and %d are both %q", o, c, name)
		}
		seen[name] = c
		if c.IsGauge() != (c == PoolHighWater || c == RingHighWater) {
			t.Errorf("%s: gauge %v", name, c.IsGauge())
		}
	}
	for c, want := range map[Counter]string{TunIn: "tun_in", DropNoSession: "drop_no_session", StrangersIn: "strangers_in"} {
		if c.String() != want {
			t.Errorf("counter %d is %q, want %q", c, c.String(), want)
		}
	}
}
