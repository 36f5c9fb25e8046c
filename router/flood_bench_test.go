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
