package router

import (
	"net/netip"
	"testing"
	"time"
)

// BenchmarkFloodInitiation is what one spoofed initiation with a valid
// mac1 costs the shard that receives it while the router is under load
// (it answers with a cookie reply): the work that competes with data on
// that shard during a handshake flood.
func BenchmarkFloodInitiation(b *testing.B) {
	resp := newMemRouter(b, "192.0.2.1:51820")
	init := attackerInitiation(b, resp)
	sink, err := netip.ParseAddrPort("127.0.0.1:9") // discard; nothing listens
	if err != nil {
		b.Fatal(err)
	}
	for _, send := range []string{"staged", "sendto"} {
		b.Run(send, func(b *testing.B) {
			if send == "staged" {
				resp.testSend = func(int, int, []byte, netip.AddrPort) error { return nil }
			} else {
				resp.testSend = nil
			}
			from := netip.MustParseAddrPort("10.64.0.1:40000")
			resp.initSlot.Store(time.Now().Unix())
			resp.initCount.Store(1 << 30)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				from = netip.AddrPortFrom(from.Addr().Next(), uint16(i))
				_ = sink
				resp.unmatched(0, connGroup, init, from)
			}
		})
	}
}

// Garbage that matches no lane — the bulk of any flood — is refused
// without allocating, whatever its length (short, cookie-reply length,
// handshake length with a wrong mac1).
func TestGarbageCostsNoAllocation(t *testing.T) {
	resp := newMemRouter(t, "192.0.2.1:51820")
	resp.testSend = func(int, int, []byte, netip.AddrPort) error { return nil }
	from := netip.MustParseAddrPort("10.64.0.1:40000")
	for _, n := range []int{30, 70, 200, 400} {
		junk := make([]byte, n)
		for i := range junk {
			junk[i] = byte(i*7 + n)
		}
		resp.unmatched(0, connGroup, junk, from) // warm up
		if a := testing.AllocsPerRun(100, func() { resp.unmatched(0, connGroup, junk, from) }); a != 0 {
			t.Errorf("%d-byte garbage datagram: %.1f allocations", n, a)
		}
	}
}
