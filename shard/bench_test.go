package shard

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/udp"
)

var benchSizes = []int{64, 512, 1400}

const benchFEC = 16 // K; R = 2 in the benchmarks (12.5%)

// BenchmarkEgress is the per-packet egress pipeline in process (no
// syscalls): route lookup, seal in place, FEC (parity every 16), frame,
// stage in the sendmmsg batch. MB/s counts inner bytes.
func BenchmarkEgress(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			benchEgress(b, n, PadOff)
			reportGbps(b, n)
		})
	}
}

// BenchmarkEgressPadding is BenchmarkEgress by Padding mode, to a peer
// that reads padding: what drawing the pad and its junk costs per packet.
func BenchmarkEgressPadding(b *testing.B) {
	for _, mode := range []PadMode{PadOff, PadLight, PadFull} {
		for _, n := range []int{64, 1400} {
			b.Run(fmt.Sprintf("%v/%d", mode, n), func(b *testing.B) { benchEgress(b, n, mode) })
		}
	}
}

// benchEgress runs n-byte packets through one shard's egress, padded by
// mode to a peer that reads padding.
func benchEgress(b *testing.B, n int, mode PadMode) {
	a, bb := newSide(b, 1, routesA), newSide(b, 1, routesB)
	connect(b, a, bb, fec.EncoderConfig{K: benchFEC, R: 2})
	s := a.shards[0]
	s.cfg.Padding = Padding{Mode: mode, MaxWire: 1410 + crypto.DataOverhead + 2}
	s.table.lanes[addrB].peerFeatures, s.table.lanes[addrB].heardPeer = Features, true
	s.sendHook = func(int, *udp.Batch, int) {}
	pkt := ipPacket("10.1.0.5", "10.2.0.9", n, 1)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := s.pool.Get()
		p.N = copy(p.Buf[headroom:], pkt)
		s.egress(p)
		if i++; i%DefaultBatch == 0 {
			s.flushAll()
		}
	}
	s.flushAll()
}

func reportGbps(b *testing.B, n int) {
	if e := b.Elapsed(); e > 0 {
		b.ReportMetric(float64(b.N)*float64(n)*8/e.Seconds()/1e9, "Gbit/s")
	}
}

// ingressSet is a pass of pre-built datagrams of one lane, and a way to
// start the receiving lane afresh (its replay window and FEC window would
// otherwise refuse the second pass).
type ingressSet struct {
	dgrams [][]byte
	reset  func()
	s      *Shard
}

func newIngressSet(b *testing.B, n, count int) *ingressSet {
	return newIngressSetOf(b, ipPacket("10.1.0.5", "10.2.0.9", n, 1), count)
}

// newIngressSetOf is newIngressSet with count copies of pkt.
func newIngressSetOf(b *testing.B, pkt []byte, count int) *ingressSet {
	a, bb := newSide(b, 1, routesA), newSide(b, 1, routesB)
	connect(b, a, bb, fec.EncoderConfig{K: benchFEC, R: 2})
	sa, sb := a.shards[0], bb.shards[0]
	var set ingressSet
	sa.sendHook = func(c int, bt *udp.Batch, k int) {
		for j := range k {
			set.dgrams = append(set.dgrams, append([]byte(nil), bt.Bufs[j][:bt.Sizes[j]]...))
		}
	}
	for range count {
		p := sa.pool.Get()
		p.N = copy(p.Buf[headroom:], pkt)
		sa.egress(p)
		sa.flushAll()
	}
	ln := sb.table.lanes[addrA]
	cfg := ln.cfg
	set.reset = func() {
		if err := sb.InstallLane(cfg); err != nil {
			b.Fatal(err)
		}
	}
	sb.tunOut = func([]byte) error { return nil }
	set.s = sb
	return &set
}

// run feeds the set once through ingress, returning data packets delivered.
func (set *ingressSet) run(i int) {
	s := set.s
	d := set.dgrams[i]
	p := s.pool.Get()
	p.N, p.Addr = copy(p.Buf, d), addrA
	s.ingress(0, p.Buf[:p.N], p.Addr)
	s.pool.Put(p)
}

// BenchmarkIngress is the per-datagram ingress pipeline in process: lane
// lookup, tag verify, unmask, FEC window (data passes straight through;
// parity is absorbed), open, replay commit, source check, TUN hand-off.
// The copy of each pre-built datagram into a pool buffer stands in for
// recvmmsg's. ns/op is per datagram (1 in 9 is parity at 16:2).
func BenchmarkIngress(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			benchIngress(b, newIngressSet(b, n, 4096), n)
		})
	}
}

// benchIngress runs set's datagrams through ingress in a loop (the lane
// installed anew each time they run out), and reports the delivered
// inner packets' rate of n bytes each: parity datagrams cost time and
// deliver nothing.
func benchIngress(b *testing.B, set *ingressSet, n int) {
	b.ReportAllocs()
	i := 0
	b.StopTimer()
	set.reset()
	b.StartTimer()
	for b.Loop() {
		if i == len(set.dgrams) {
			b.StopTimer()
			set.reset()
			b.StartTimer()
			i = 0
		}
		set.run(i)
		i++
	}
	if e := b.Elapsed(); e > 0 {
		got := float64(set.s.stats.c[TunOut])
		b.ReportMetric(got*float64(n)*8/e.Seconds()/1e9, "Gbit/s")
		b.ReportMetric(e.Seconds()*1e9/got, "ns/pkt")
	}
}

// BenchmarkIngressTCP is BenchmarkIngress with TCP segments carrying
// timestamps, 1400 bytes: the lane receives parity, so every delivered
// segment is noted in its flow table (timestamps.go), the most the
// per-flow timestamp costs a packet.
func BenchmarkIngressTCP(b *testing.B) {
	const n = 1400
	benchIngress(b, newIngressSetOf(b, tcpSegment(1, 1000, n-20-32), 4096), n)
}

// BenchmarkIngressScaling is the reference's "level 1": N workers, each
// pinned to its own CPU with its own shard, lane and pre-built datagrams,
// run the real ingress chain in parallel. Scaling efficiency is
// Gbit/s(N) / (N × Gbit/s(1)); docs/BENCHMARKS.md records it. Run it with
// -cpu equal to the core count, so the workers have a P each.
func BenchmarkIngressScaling(b *testing.B) {
	const n = 1400
	for workers := 1; workers <= runtime.NumCPU(); workers++ {
		b.Run(fmt.Sprintf("N=%d", workers), func(b *testing.B) {
			sets := make([]*ingressSet, workers)
			for w := range sets {
				sets[w] = newIngressSet(b, n, 4096)
				sets[w].reset()
			}
			per := b.N / workers
			if per == 0 {
				per = 1
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			b.ResetTimer()
			t0 := time.Now()
			for w, set := range sets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := Pin(w); err != nil {
						b.Error(err)
						return
					}
					defer runtime.UnlockOSThread()
					<-start
					i := 0
					for range per {
						if i == len(set.dgrams) {
							set.reset() // rare: once per 4096 datagrams
							i = 0
						}
						set.run(i)
						i++
					}
				}()
			}
			close(start)
			wg.Wait()
			el := time.Since(t0)
			b.StopTimer()
			var got float64
			for _, set := range sets {
				got += float64(set.s.stats.c[TunOut])
			}
			b.ReportMetric(got*n*8/el.Seconds()/1e9, "Gbit/s")
			b.ReportMetric(got/el.Seconds()/1e6, "Mpps")
		})
	}
}

// BenchmarkTickIdle is one timer round (tick and counter publication) of a
// shard owning 10,000 idle lanes, as on a hub with that many sessions: the
// cost every shard pays up to 20 times a second whatever the traffic.
func BenchmarkTickIdle(b *testing.B) {
	sd := newSide(b, 1, routesA)
	s := sd.shards[0]
	var k [32]byte
	keys := crypto.NewSessionKeys(k, k, true)
	for i := range 10000 {
		if err := s.InstallLane(LaneConfig{
			Peer: PeerID(i + 1), Lanes: 1, Conn: 0,
			Remote: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), uint16(i+1)),
			Send:   keys.SendLane(0), Recv: keys.RecvLane(0),
			FEC: fec.EncoderConfig{K: 8, R: 1}, Mode: fec.Mode{Kind: fec.ModeAuto},
		}); err != nil {
			b.Fatal(err)
		}
	}
	s.now = time.Now()
	for b.Loop() {
		s.now = s.now.Add(50 * time.Millisecond)
		s.tick()
		s.publish()
	}
}

// BenchmarkInstallLane is what installing a new peer's lane costs a
// shard, as a hub pays it per handshake: 10,000 lanes installed one after
// another (the GC sees the table grow as a hub's does). ns/op and B/op
// are per lane.
func BenchmarkInstallLane(b *testing.B) {
	sd := newSide(b, 1, routesB)
	s := sd.shards[0]
	var k [32]byte
	keys := crypto.NewSessionKeys(k, k, false)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := s.InstallLane(LaneConfig{Peer: PeerID(i), Index: 0, Lanes: 1,
			Remote: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 40000),
			Send:   keys.SendLane(0), Recv: keys.RecvLane(0),
			FEC: fec.EncoderConfig{K: 16, R: 2}, Mode: fec.Mode{Kind: fec.ModeAuto}}); err != nil {
			b.Fatal(err)
		}
	}
}
