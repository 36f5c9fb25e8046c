package shard

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/internal/memnet"
)

// The shards' own loops (Run) over internal/memnet: sockets and TUN queues
// in memory, so poll(2), the readers, the mesh and Stop run as in the
// router, without root.

// loopWait bounds every wait for the loops, in real time (generous for a
// busy machine under -race; a passing run takes milliseconds).
const loopWait = 10 * time.Second

// loopSide is one router's shards with a memnet socket and TUN queue
// each, their loops running until the test ends.
type loopSide struct {
	side
	tuns []*memnet.TUN
	done chan error // the loops' results; nil: not running
}

// newLoopSide makes n shards; shard i's socket is bound at addr(i). Call
// start once the lanes are installed.
func newLoopSide(t *testing.T, w *memnet.Wire, n int, routes []Route, addr func(i int) netip.AddrPort) *loopSide {
	t.Helper()
	m, err := NewMesh(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ls := &loopSide{side: side{mesh: m}}
	ls.table.Store(NewTable(routes))
	for i := range n {
		sock, err := w.Listen(addr(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sock.Close() }) // after the loops stopped (cleanups run last first)
		tun, err := memnet.NewTUN()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tun.Close() })
		s, err := New(Config{ID: i, CPU: -1, TUN: tun, Conns: []Socket{sock}, Mesh: m, Table: &ls.table, Pool: 1024})
		if err != nil {
			t.Fatal(err)
		}
		s.now = time.Now() // connect installs before the loop sets it
		ls.shards = append(ls.shards, s)
		ls.tuns = append(ls.tuns, tun)
	}
	return ls
}

// start runs every shard's loop; the test's cleanup stops them (stop).
func (ls *loopSide) start(t *testing.T) {
	t.Helper()
	ls.done = make(chan error, len(ls.shards))
	for _, s := range ls.shards {
		go func() { ls.done <- s.Run() }()
	}
	t.Cleanup(func() { ls.stop(t) })
}

// stop stops every loop and waits for them, failing the test if one
// returned an error or did not return. Once the loops returned, their
// shards are the test's to read.
func (ls *loopSide) stop(t *testing.T) {
	t.Helper()
	if ls.done == nil {
		return
	}
	for _, s := range ls.shards {
		s.Stop()
	}
	for range ls.shards {
		select {
		case err := <-ls.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(loopWait):
			t.Fatal("a shard's loop did not return after Stop")
		}
	}
	ls.done = nil
}

// takeN collects what the loops write to tun until n packets came (or
// loopWait passed).
func takeN(t *testing.T, tun *memnet.TUN, n int) [][]byte {
	t.Helper()
	var got [][]byte
	for deadline := time.Now().Add(loopWait); len(got) < n && time.Now().Before(deadline); {
		got = append(got, tun.Take()...)
		if len(got) < n {
			time.Sleep(time.Millisecond)
		}
	}
	if len(got) != n {
		t.Fatalf("%d packets written to the TUN queue, want %d", len(got), n)
	}
	return got
}

// seqs are the sequence numbers ipPacket wrote into IPv4 packets.
func seqs(pkts [][]byte) []int {
	var out []int
	for _, p := range pkts {
		out = append(out, int(binary.BigEndian.Uint32(p[20:])))
	}
	return out
}

// Two routers' loops over memnet: A has two shards, B one, so the session
// has one lane, owned by A's shard 0. Packets read from A's second TUN
// queue cross the mesh to shard 0, which sends them with those read from
// its own queue; B writes every one, each queue's in the order read, and
// its answers reach A's shard 0. The buffers shard 1 lent come home, the
// lane's counters and the published counters say what happened, and Stop
// ends every loop.
func TestLoopsCarryPacketsOverMemnet(t *testing.T) {
	w := memnet.NewWire()
	a := newLoopSide(t, w, 2, routesA, func(i int) netip.AddrPort {
		return netip.AddrPortFrom(addrA.Addr(), addrA.Port()+uint16(i))
	})
	b := newLoopSide(t, w, 1, routesB, func(int) netip.AddrPort { return addrB })
	connect(t, &a.side, &b.side, fec.EncoderConfig{K: 8, R: 2})
	a.start(t)
	b.start(t)
	for i, s := range a.shards {
		if s.ID() != i {
			t.Fatalf("shard %d says it is %d", i, s.ID())
		}
	}

	const n = 20
	for i := range n {
		a.tuns[1].Inject(ipPacket("10.1.0.5", "10.2.0.9", 100, 1000+i)) // handed over to shard 0
		a.tuns[0].Inject(ipPacket("10.1.0.5", "10.2.0.9", 100, i))
	}
	var direct, handed []int
	for _, q := range seqs(takeN(t, b.tuns[0], 2*n)) {
		if q >= 1000 {
			handed = append(handed, q-1000)
		} else {
			direct = append(direct, q)
		}
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(direct, want) || !slices.Equal(handed, want) {
		t.Fatalf("B wrote %v from A's queue 0 and %v from queue 1; want each in order %v", direct, handed, want)
	}

	for i := range n / 2 {
		b.tuns[0].Inject(ipPacket("10.2.0.9", "10.1.0.5", 80, i))
	}
	if got := seqs(takeN(t, a.tuns[0], n/2)); !slices.Equal(got, want[:n/2]) {
		t.Fatalf("A wrote %v, want %v", got, want[:n/2])
	}
	if extra := a.tuns[1].Take(); len(extra) != 0 {
		t.Fatalf("A's shard 1, which owns no lane, wrote %d packets", len(extra))
	}

	var st []LaneStatus
	if err := a.shards[0].Query(func(s *Shard) { st = s.LaneStatuses() }, loopWait); err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Peer != 2 || st[0].Index != 0 || st[0].Shard != 0 || st[0].Remote != addrB ||
		st[0].TxPackets != 2*n || st[0].RxPackets != n/2 {
		t.Fatalf("A's shard 0 lanes: %+v; want lane 0 of peer 2 at %v, %d sent, %d received", st, addrB, 2*n, n/2)
	}
	// Shard 0 gives shard 1's buffers back over the return ring; shard 1
	// takes them home in its loop.
	s1 := a.shards[1]
	for deadline := time.Now().Add(loopWait); ; {
		var free, total int
		if err := s1.Query(func(s *Shard) { free, total = s.pool.Free(), s.pool.Cap() }, loopWait); err != nil {
			t.Fatal(err)
		}
		if free == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard 1 has %d of its %d buffers back", free, total)
		}
		time.Sleep(time.Millisecond)
	}

	// Run publishes the counters as it returns.
	a.stop(t)
	b.stop(t)
	s0, h := a.shards[0].Snapshot(), s1.Snapshot()
	if h.Get(TunIn) != n || h.Get(HandedOff) != n || h.Get(UDPOut) != 0 {
		t.Fatalf("shard 1: tun_in %d handed_off %d udp_out %d; want %d, %d, 0",
			h.Get(TunIn), h.Get(HandedOff), h.Get(UDPOut), n, n)
	}
	if s0.Get(TunIn) != n || s0.Get(TakenOver) != n || s0.Get(TunOut) != n/2 {
		t.Fatalf("shard 0: tun_in %d taken_over %d tun_out %d; want %d, %d, %d",
			s0.Get(TunIn), s0.Get(TakenOver), s0.Get(TunOut), n, n, n/2)
	}
	// Every datagram the lane sent is a data packet, a parity symbol or a
	// control frame, and the wire (which loses nothing) delivered what
	// both sides sent.
	if s0.Get(UDPOut) != 2*n+s0.Get(ParityOut)+s0.Get(ControlOut) || s0.Get(ParityOut) == 0 {
		t.Fatalf("shard 0: udp_out %d, parity_out %d, control_out %d for %d packets",
			s0.Get(UDPOut), s0.Get(ParityOut), s0.Get(ControlOut), 2*n)
	}
	sb := b.shards[0].Snapshot()
	if d := w.Stats().Delivered; d != s0.Get(UDPOut)+sb.Get(UDPOut) {
		t.Fatalf("the wire delivered %d datagrams; A sent %d and B %d", d, s0.Get(UDPOut), sb.Get(UDPOut))
	}
	if sb.Get(TunOut) != 2*n {
		t.Fatalf("B: tun_out %d, want %d", sb.Get(TunOut), 2*n)
	}
}

// A shard's loop pinned to a CPU the kernel cannot give it returns the
// error at once instead of running unpinned.
func TestRunReportsPinFailure(t *testing.T) {
	sd := newSide(t, 1, routesA)
	s := sd.shards[0]
	s.cfg.CPU = 1 << 20 // beyond any CPU set: sched_setaffinity refuses an empty mask
	done := make(chan error, 1)
	go func() { done <- s.Run() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "pin to CPU") {
			t.Fatalf("Run = %v, want the pinning error", err)
		}
	case <-time.After(loopWait):
		s.Stop()
		t.Fatal("Run went on without its CPU")
	}
}

// Query on a shard whose loop does not run gives up after its timeout,
// and the command is not lost: the loop runs it when it next runs its
// commands.
func TestQueryTimesOutCommandKept(t *testing.T) {
	s := newSide(t, 1, routesA).shards[0]
	ran := make(chan struct{}, 1)
	err := s.Query(func(*Shard) { ran <- struct{}{} }, 10*time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Query = %v, want ErrTimeout", err)
	}
	select {
	case <-ran:
		t.Fatal("the command ran with no loop")
	default:
	}
	s.runControl()
	select {
	case <-ran:
	default:
		t.Fatal("the timed-out command was dropped")
	}
}
