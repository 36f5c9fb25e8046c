package udp

import (
	"net/netip"
	"slices"
	"testing"
)

// BenchmarkGroupSteering is the cost of the listen group's steering per
// datagram: a lane socket sends batches of 32 small datagrams over
// loopback to a group of two sockets (the kernel runs the receive path,
// and the group's program, inside sendmmsg), and the receiving socket
// reads them. port: the classic BPF program on the source port; remote:
// the eBPF lookup of (address, port) in a map holding 10,000 other lanes.
func BenchmarkGroupSteering(b *testing.B) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, mode := range []string{"port", "remote"} {
		b.Run(mode, func(b *testing.B) {
			var group []*Conn
			var err error
			var st *Steering
			if mode == "port" {
				group, err = ListenGroup(netip.AddrPortFrom(lo, 0), 2)
			} else {
				if st, err = NewSteering(2, 1<<16); err != nil {
					b.Skipf("eBPF steering: %v", err)
				}
				defer st.Close()
				var strangers, known []*Conn
				group, strangers, known, err = ListenSteered(netip.AddrPortFrom(lo, 0), 2, st)
				for _, c := range slices.Concat(strangers, known) {
					defer c.Close()
				}
			}
			if err != nil {
				b.Fatal(err)
			}
			defer group[0].Close()
			defer group[1].Close()
			// A sender whose port's low bits are 1 (what port steering
			// needs) and, for the map, an entry naming socket 1.
			var snd *Conn
			for p := uint16(40001); snd == nil; p += 64 {
				snd, _ = newSocket(netip.AddrPortFrom(lo, p), false)
			}
			defer snd.Close()
			if st != nil {
				for i := range 10000 {
					st.Steer(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), 4000), group[0], true)
				}
				if r := st.Steer(snd.LocalAddr(), group[1], true); r != Steered {
					b.Fatal(r)
				}
			}
			const n = 32
			sb, rb := NewBatch(n), NewBatch(n)
			for i := range n {
				sb.Bufs[i] = make([]byte, 64)
				sb.Sizes[i] = 64
				sb.Addrs[i] = group[0].LocalAddr()
				rb.Bufs[i] = make([]byte, 128)
			}
			b.ResetTimer()
			got := 0
			for range b.N {
				if sent, err := snd.Send(sb, n); err != nil || sent != n {
					b.Fatalf("sent %d: %v", sent, err)
				}
				for k := 0; k < n; {
					m, err := group[1].Recv(rb, n)
					if err != nil || m == 0 {
						b.Fatalf("received %d of %d: %v", k, n, err)
					}
					k += m
				}
				got += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(got), "ns/datagram")
		})
	}
}
