package shard

import (
	"testing"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// A lane adds the wire lengths of the data datagrams it sends to its peer's
// WireLens when the shard publishes (not before), and draws from it follow
// what was sent, restricted to the range asked for.
func TestWireLensSampleSentData(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa := a.shards[0]
	w := new(WireLens)
	sa.table.lanes[addrB].cfg.Lens = w
	sent := map[int]int{}
	for i := range 12 {
		n := []int{60, 300, 300, 700}[i%4]
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", n, i))
	}
	sa.flushAll()
	for _, d := range a.sent[0] {
		sent[len(d.data)]++
	}
	if len(sent) != 3 || sent[300+crypto.DataOverhead] != 6 {
		t.Fatalf("sent datagram lengths %v", sent)
	}
	if _, ok := w.DrawLen(0, 2000); ok {
		t.Fatal("lengths in the sample before the shard published")
	}
	sa.publish()
	drawn := map[int]int{}
	for range 4000 {
		n, ok := w.DrawLen(0, 2000)
		if !ok || sent[n] == 0 {
			t.Fatalf("drew %d (%v), not a length sent %v", n, ok, sent)
		}
		drawn[n]++
	}
	if len(drawn) != len(sent) || drawn[300+crypto.DataOverhead] < 1800 || drawn[300+crypto.DataOverhead] > 2200 {
		t.Fatalf("drew %v from sent %v", drawn, sent)
	}
	for range 100 {
		if n, ok := w.DrawLen(200, 400); !ok || n != 300+crypto.DataOverhead {
			t.Fatalf("restricted to 200..400: drew %d %v", n, ok)
		}
	}
	if n, ok := w.DrawLen(800, 1024); ok {
		t.Fatalf("restricted to 800..1024: drew %d, nothing sent there", n)
	}
	// Published once: a second publication adds nothing.
	before := w.next.Load()
	sa.publish()
	if w.next.Load() != before {
		t.Fatal("publish added lengths already published")
	}
	if a := testing.AllocsPerRun(100, func() { w.DrawLen(0, 2000) }); a != 0 {
		t.Fatalf("DrawLen: %.1f allocations", a)
	}
	ln := sa.table.lanes[addrB]
	if a := testing.AllocsPerRun(100, func() { ln.noteSize(500); sa.publish() }); a != 0 {
		t.Fatalf("publish with new lengths: %.1f allocations", a)
	}
}

// With padding on, every draw adds a fresh pad to a sampled length, so one
// sampled length gives the spread of padded data; lengths the lane
// received are sampled as well as those it sent.
func TestWireLensPaddedAndReceived(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa, sb := a.shards[0], b.shards[0]
	sb.cfg.Padding = Padding{Mode: PadLight}
	lb := sb.table.lanes[addrA]
	w := new(WireLens)
	lb.cfg.Lens = w
	sb.control(lb, []byte{ctlKeepalive, Features, 0, 0}) // A's hello
	// A sends B 500-byte packets; B sends nothing.
	for i := range 8 {
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 500, i))
	}
	deliverAll(t, a, b, nil)
	sb.publish()
	base := 500 + crypto.DataOverhead
	drawn := map[int]int{}
	for range 3000 {
		n, ok := w.DrawLen(0, 2000)
		if !ok || n < base+crypto.MinPad || n > base+crypto.PadHeadroom {
			t.Fatalf("drew %d (%v), want %d + %d..%d", n, ok, base, crypto.MinPad, crypto.PadHeadroom)
		}
		drawn[n]++
	}
	if len(drawn) != crypto.PadHeadroom-crypto.MinPad+1 {
		t.Fatalf("drew %d distinct lengths from one sampled length: %v", len(drawn), drawn)
	}
	// A range the pad may leave: only draws inside it are returned.
	for range 200 {
		if n, ok := w.DrawLen(0, base+10); ok && n > base+10 {
			t.Fatalf("drew %d above the range's top %d", n, base+10)
		}
	}
	if !w.LongHandshakes() {
		t.Fatal("the peer announced long handshakes; its sample does not say so")
	}
	// The peer restarts as an older router (its keepalive is one byte):
	// draws are the sample again, and handshakes stay short.
	sb.control(lb, []byte{ctlKeepalive})
	lb.noteSize(500)
	sb.publish()
	if n, ok := w.DrawLen(0, 2000); !ok || n != base {
		t.Fatalf("unpadded: drew %d %v, want %d", n, ok, base)
	}
	if w.LongHandshakes() {
		t.Fatal("an older peer's sample says it takes long handshakes")
	}
}
