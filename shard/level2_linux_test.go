package shard

import (
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/shard/udp"
)

// BenchmarkLevel2 is the reference's "level 2": N running shards (Run, real
// poll loop, recvmmsg on a steered SO_REUSEPORT group on loopback) fed by a
// blaster that replays pre-built datagrams of N lanes with sendmmsg from
// lane sockets, each datagram once (distinct counters: a replay would be
// refused). The shards run to completion up to the TUN write (a counting
// sink: no TUN here).
//
// On a 2-core machine the blaster needs a core too: with N=2 it competes
// with the shards, so the efficiency this measures is a floor. Run with
// -benchtime 1x; each run blasts 100,000 datagrams per lane.
func BenchmarkLevel2(b *testing.B) {
	const size = 1400
	for n := 1; n <= runtime.NumCPU(); n++ {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for range b.N {
				level2(b, n, size, 100000)
			}
		})
	}
}

func level2(b *testing.B, n, size, count int) {
	st, err := udp.NewSteering(n, 64)
	if err != nil {
		b.Skipf("steering by lane remote: %v", err)
	}
	defer st.Close()
	group, strangers, known, err := udp.ListenSteered(netip.MustParseAddrPort("127.0.0.1:0"), n, st)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range slices.Concat(group, strangers, known) {
			c.Close()
		}
	}()
	var lanes []*udp.Conn
	for range n {
		c, err := udp.ListenLane(netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		lanes = append(lanes, c)
	}
	m, _ := NewMesh(n)
	defer m.Close()
	var table atomic.Pointer[Table]
	table.Store(NewTable(routesB))
	var delivered atomic.Uint64
	var shards []*Shard
	var sets [][][]byte
	for i := range n {
		s, err := New(Config{ID: i, CPU: i, Conns: []Socket{group[i]}, Strangers: strangers[i], Known: known[i], Mesh: m, Table: &table, Steer: st})
		if err != nil {
			b.Fatal(err)
		}
		s.tunOut = func([]byte) error { delivered.Add(1); return nil }
		var k1, k2 [32]byte
		k1[0], k2[0] = byte(i), byte(i+100)
		ka, kb := crypto.NewSessionKeys(k1, k2, true), crypto.NewSessionKeys(k1, k2, false)
		cfg := LaneConfig{Peer: 1, Index: i, Lanes: n, Remote: lanes[i].LocalAddr(), Conn: 0,
			Send: kb.SendLane(i), Recv: kb.RecvLane(i), FEC: fec.EncoderConfig{K: 16, R: 2}}
		if err := s.InstallLane(cfg); err != nil {
			b.Fatal(err)
		}
		shards = append(shards, s)
		// The blaster's datagrams: what the peer's lane i would send.
		a := newSide(b, 1, routesA)
		var set [][]byte
		a.shards[0].sendHook = func(c int, bt *udp.Batch, k int) {
			for j := range k {
				set = append(set, append([]byte(nil), bt.Bufs[j][:bt.Sizes[j]]...))
			}
		}
		if err := a.shards[0].InstallLane(LaneConfig{Peer: 2, Index: 0, Lanes: 1, Remote: group[0].LocalAddr(), Conn: 0,
			Send: ka.SendLane(i), Recv: ka.RecvLane(i), FEC: fec.EncoderConfig{K: 16, R: 2}}); err != nil {
			b.Fatal(err)
		}
		pkt := ipPacket("10.1.0.5", "10.2.0.9", size, 1)
		for range count {
			inject(b, a.shards[0], pkt)
			a.shards[0].flushAll()
		}
		sets = append(sets, set)
	}
	for i := range shards {
		for j, s := range shards {
			if i != j {
				s.SetLaneOwner(1, n, i, i, lanes[i].LocalAddr(), nil)
			}
		}
	}
	var wg sync.WaitGroup
	for _, s := range shards {
		wg.Add(1)
		go func() { defer wg.Done(); _ = s.Run() }()
	}
	// One blaster per lane, unpinned (the scheduler puts them where it can).
	var sent atomic.Uint64
	var bw sync.WaitGroup
	start := time.Now()
	for i := range n {
		bw.Add(1)
		go func() {
			defer bw.Done()
			batch := udp.NewBatch(64)
			set := sets[i]
			for k := 0; k < len(set); {
				j := 0
				for ; j < 64 && k+j < len(set); j++ {
					batch.Bufs[j] = set[k+j]
					batch.Sizes[j] = len(set[k+j])
					batch.Addrs[j] = group[0].LocalAddr()
				}
				got, _ := lanes[i].Send(batch, j)
				if got == 0 {
					runtime.Gosched() // socket buffer full: let the shard run
				}
				k += got
				sent.Add(uint64(got))
			}
		}()
	}
	bw.Wait()
	// Let the shards drain what is queued, then stop the clock.
	for last := uint64(0); ; {
		time.Sleep(20 * time.Millisecond)
		d := delivered.Load()
		if d == last {
			break
		}
		last = d
	}
	el := time.Since(start) - 20*time.Millisecond
	for _, s := range shards {
		s.Stop()
	}
	wg.Wait()
	for _, s := range shards {
		sn := s.Snapshot()
		var nz []string
		for _, c := range Counters() {
			if sn.Get(c) != 0 {
				nz = append(nz, fmt.Sprintf("%s=%d", c, sn.Get(c)))
			}
		}
		b.Logf("shard %d: %v", s.id, nz)
	}
	got := float64(delivered.Load())
	b.ReportMetric(got*float64(size)*8/el.Seconds()/1e9, "Gbit/s")
	b.ReportMetric(got/el.Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(sent.Load())/el.Seconds()/1e6, "sent-Mpps")
}
