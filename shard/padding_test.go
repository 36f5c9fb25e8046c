package shard

import (
	"bytes"
	"testing"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// padDgram is one datagram padTraffic sent, as its receiver deframed it.
type padDgram struct {
	n    int // wire length
	kind crypto.Kind
	pad  int
}

// padTraffic sends rounds batches of bulk (1300-byte) and small (60-byte)
// packets from a to b under mode, with b announcing features (in this
// session's hello if heard, else only carried over from an earlier
// session), and returns a's datagrams as b's lane deframes them; every
// packet must reach b's TUN intact.
func padTraffic(t *testing.T, mode PadMode, features uint8, heard bool, rounds int) []padDgram {
	t.Helper()
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 2})
	sa, sb := a.shards[0], b.shards[0]
	sa.cfg.Padding = Padding{Mode: mode, MaxWire: padMaxWire}
	sa.table.lanes[addrB].peerFeatures, sa.table.lanes[addrB].heardPeer = features, heard
	var out []padDgram
	var want [][]byte
	for round := range rounds {
		for i := range 16 {
			n := 1300
			if i%4 == 3 {
				n = 60
			}
			pkt := ipPacket("10.1.0.5", "10.2.0.9", n, round*16+i)
			want = append(want, pkt)
			inject(t, sa, pkt)
		}
		sa.flushAll()
		for _, d := range a.sent[0] {
			h, _, err := sb.table.lanes[addrA].cur.rxf.Deframe(bytes.Clone(d.data))
			if err != nil {
				t.Fatalf("%v: b cannot deframe a %d-byte datagram: %v", mode, len(d.data), err)
			}
			out = append(out, padDgram{len(d.data), h.Kind, int(h.Pad)})
		}
		deliverAll(t, a, b, nil)
	}
	got := b.tun[0]
	if len(got) != len(want) {
		t.Fatalf("%v: %d of %d packets arrived", mode, len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%v: packet %d arrived changed", mode, i)
		}
	}
	if n := sb.stats.c[DropBadHeader] + sb.stats.c[DropBadTag]; n != 0 {
		t.Fatalf("%v: b dropped %d datagrams", mode, n)
	}
	return out
}

// padMaxWire is the padTraffic shards' Padding.MaxWire: a 1400-byte TUN MTU.
const padMaxWire = 1400 + crypto.DataOverhead + 2 + crypto.PadHeadroom

// Without padding, or to a peer that does not read it, a data datagram is
// its inner packet + DataOverhead, every time.
func TestPaddingOffOrUnannounced(t *testing.T) {
	for _, c := range []struct {
		mode  PadMode
		feat  uint8
		heard bool
	}{{PadOff, Features, true}, {PadLight, Features &^ FeatureFramePad, true}, {PadFull, 0, true}} {
		hist := map[int]int{}
		for _, d := range padTraffic(t, c.mode, c.feat, c.heard, 300) {
			if d.pad != 0 {
				t.Fatalf("%v, features %#x: a padded datagram %+v", c.mode, c.feat, d)
			}
			if d.kind == crypto.KindData {
				hist[d.n]++
			}
		}
		if hist[1300+crypto.DataOverhead] != 300*12 || hist[60+crypto.DataOverhead] != 300*4 {
			t.Fatalf("%v, features %#x: data lengths %v", c.mode, c.feat, hist)
		}
	}
}

// PadLight spreads the bulk data datagrams over MinPad..PadHeadroom extra
// bytes, no length carrying more than 5% of them, and draws each parity
// datagram's pad apart from the data beside it. PadFull pads small
// datagrams up to MaxWire, and nothing beyond it.
func TestPaddingSpreadsLengths(t *testing.T) {
	bulk := 1300 + crypto.DataOverhead
	for _, mode := range []PadMode{PadLight, PadFull} {
		ds := padTraffic(t, mode, Features, true, 1000)
		hist := map[int]int{}
		nBulk, parity, sameAsData, small, spread := 0, 0, 0, 0, 0
		lastDataPad := -1
		for _, d := range ds {
			if d.n > padMaxWire || d.pad < crypto.MinPad {
				t.Fatalf("%v: datagram %+v (MaxWire %d)", mode, d, padMaxWire)
			}
			switch {
			case d.kind == crypto.KindData && d.n-d.pad == bulk:
				hist[d.n]++
				nBulk++
				lastDataPad = d.pad
			case d.kind == crypto.KindData:
				small++
				if d.n > 700 {
					spread++
				}
			case d.kind == crypto.KindParity:
				parity++
				if d.pad == lastDataPad {
					sameAsData++
				}
			}
		}
		if mode == PadFull {
			// Uniform from ~102 to MaxWire: more than half above 700.
			if spread < small/2 {
				t.Fatalf("full: %d of %d small packets' datagrams above 700 bytes", spread, small)
			}
			continue
		}
		for n, c := range hist {
			if n < bulk+crypto.MinPad || n > bulk+crypto.PadHeadroom || c > nBulk/20 {
				t.Fatalf("light: %d of %d bulk datagrams at %d bytes (hist %v)", c, nBulk, n, hist)
			}
		}
		if len(hist) != crypto.PadHeadroom-crypto.MinPad+1 {
			t.Fatalf("light: bulk datagrams took %d lengths", len(hist))
		}
		if parity == 0 || sameAsData > parity/10 {
			t.Fatalf("light: %d of %d parity datagrams have the pad of the data before them", sameAsData, parity)
		}
	}
}

// A full sizes ring samples one packet in sizeEvery, so the few small
// packets that end a bulk transfer leave it mostly bulk-sized, while a
// lasting change of sizes still takes it over.
func TestNoteSizeSamplesOnceFull(t *testing.T) {
	ln := &lane{sizeRand: 12345}
	for range len(ln.sizes) {
		ln.noteSize(60)
	}
	if ln.sizeN != uint32(len(ln.sizes)) {
		t.Fatalf("%d writes to fill a ring of %d", ln.sizeN, len(ln.sizes))
	}
	before := ln.sizeN
	for range 8000 {
		ln.noteSize(1300)
	}
	if got := ln.sizeN - before; got < 8000/sizeEvery*8/10 || got > 8000/sizeEvery*12/10 {
		t.Fatalf("%d of 8000 packets written, want about %d", got, 8000/sizeEvery)
	}
	for _, n := range ln.sizes {
		if n != 1300 {
			t.Fatalf("after 8000 bulk packets the ring still holds %d", n)
		}
	}
	// The end of a transfer: 12 small packets.
	for range 12 {
		ln.noteSize(52)
	}
	small := 0
	for _, n := range ln.sizes {
		if n == 52 {
			small++
		}
	}
	if small > 8 {
		t.Fatalf("12 closing packets took %d of %d slots", small, len(ln.sizes))
	}
}

// A control frame takes the peer's lengths, those it sent us included,
// but never beyond what our own MTU lets out: with a smaller TUN MTU than
// the peer's, padded keepalives stay within our MaxWire.
func TestControlFramesWithinOurMTU(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa, sb := a.shards[0], b.shards[0]
	maxWire := 1000 + crypto.DataOverhead + 2 + crypto.PadHeadroom // B's TUN MTU: 1000
	sb.cfg.Padding = Padding{Mode: PadLight, MaxWire: maxWire}
	lb := sb.table.lanes[addrA]
	lb.cfg.Lens = new(WireLens)
	sb.control(lb, []byte{ctlKeepalive, Features, 0, 0})
	for i := range 40 {
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 1400, i)) // A's MTU is larger
	}
	deliverAll(t, a, b, nil)
	sb.publish()
	sb.flushAll()
	b.sent[0] = nil
	for range 50 {
		if !sb.sendControl(lb, lb.keepalive(nil)) {
			t.Fatal("keepalive not sent")
		}
	}
	sb.flushAll()
	longest := 0
	for _, d := range b.sent[0] {
		longest = max(longest, len(d.data))
	}
	if longest > maxWire || longest < 1000+crypto.DataOverhead {
		t.Fatalf("keepalives up to %d bytes: want up to B's %d, and padded to its longest inner packet", longest, maxWire)
	}
	if n, ok := lb.cfg.Lens.DrawLen(0, 2000); !ok || n > maxWire {
		t.Fatalf("handshake length drawn %d (%v), beyond B's %d", n, ok, maxWire)
	}
	// Without the peer's sample (the lane's own ring, which holds A's
	// 1400-byte packets), the same bound.
	lb.cfg.Lens = nil
	b.sent[0] = nil
	for range 50 {
		sb.sendControl(lb, lb.keepalive(nil))
	}
	sb.flushAll()
	for _, d := range b.sent[0] {
		if len(d.data) > maxWire {
			t.Fatalf("a %d-byte keepalive from the lane's own sizes, beyond B's %d", len(d.data), maxWire)
		}
	}
}

// Until the peer's hello in this session says it reads padded datagrams,
// control frames go unpadded (features carried over a rekey may be a
// restarted older router's, which would fail a padded hello's tag and
// never confirm the session), with the pad in their plaintext instead, so
// their lengths are those of padded ones; after the hello they are padded.
func TestControlFramesPaddedOnlyAfterHello(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa, sb := a.shards[0], b.shards[0]
	sa.cfg.Padding = Padding{Mode: PadLight, MaxWire: padMaxWire}
	la, lb := sa.table.lanes[addrB], sb.table.lanes[addrA]
	la.peerFeatures = Features // carried over, not heard
	for i := range 8 {
		inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 500, i))
	}
	sa.flushAll()
	a.sent[0] = nil
	send := func() map[int]bool {
		lens := map[int]bool{}
		for range 300 {
			sa.sendControl(la, la.keepalive(nil))
		}
		sa.flushAll()
		for _, d := range a.sent[0] {
			h, _, err := lb.cur.rxf.Deframe(bytes.Clone(d.data))
			if err != nil || h.Kind != crypto.KindControl {
				t.Fatalf("b cannot read a control datagram: %v %+v", err, h)
			}
			if (h.Pad != 0) != la.heardPeer {
				t.Fatalf("heard %v: a keepalive with Pad %d", la.heardPeer, h.Pad)
			}
			lens[len(d.data)] = true
			if n := len(d.data) - 500 - crypto.DataOverhead; n < crypto.MinPad || n > crypto.PadHeadroom {
				t.Fatalf("heard %v: a %d-byte keepalive, want 500+%d and a pad of %d..%d", la.heardPeer, len(d.data), crypto.DataOverhead, crypto.MinPad, crypto.PadHeadroom)
			}
		}
		a.sent[0] = nil
		return lens
	}
	if lens := send(); len(lens) < 25 {
		t.Fatalf("unheard: keepalives took %d lengths", len(lens))
	}
	sa.control(la, []byte{ctlKeepalive, Features, 0, 0}) // b's hello
	if lens := send(); len(lens) < 25 {
		t.Fatalf("heard: keepalives took %d lengths", len(lens))
	}
}

// Data datagrams of one length to one lane in one socket batch share a
// pad in runs of padRunLen, so UDP GSO can still send them as one
// superpacket; a datagram of another length starts a new run, and so does
// the next batch.
func TestPaddingRuns(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 32, R: 0})
	sa, sb := a.shards[0], b.shards[0]
	sa.cfg.Padding = Padding{Mode: PadLight, MaxWire: padMaxWire}
	sa.table.lanes[addrB].peerFeatures = Features
	pads := func() []int {
		sa.flushAll()
		var out []int
		for _, d := range a.sent[0] {
			h, _, err := sb.table.lanes[addrA].cur.rxf.Deframe(bytes.Clone(d.data))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, int(h.Pad))
		}
		a.sent[0] = nil
		return out
	}
	distinct := map[int]bool{}
	for round := range 200 {
		for i := range 2 * padRunLen {
			inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 1300, round*100+i))
		}
		p := pads()
		if len(p) != 2*padRunLen {
			t.Fatalf("%d datagrams", len(p))
		}
		for i := 1; i < padRunLen; i++ {
			if p[i] != p[0] || p[padRunLen+i] != p[padRunLen] {
				t.Fatalf("pads within runs of %d differ: %v", padRunLen, p)
			}
		}
		distinct[p[0]], distinct[p[padRunLen]] = true, true
	}
	if len(distinct) != crypto.PadHeadroom-crypto.MinPad+1 {
		t.Fatalf("runs took %d pads", len(distinct))
	}
}

// Lengths from the network are bounded before they set a control frame's:
// a symbol shorter than a sealed packet is not sampled, and none beyond
// MaxInner.
func TestNoteSizeBounds(t *testing.T) {
	ln := &lane{sizeRand: 1}
	ln.noteSize(-20)
	ln.noteSize(0)
	if ln.sizeN != 0 {
		t.Fatalf("non-positive lengths sampled: %d", ln.sizeN)
	}
	ln.noteSize(1 << 20)
	if ln.sizeN != 1 || ln.sizes[0] != MaxInner || ln.padLen() != MaxInner {
		t.Fatalf("a huge length sampled as %d (padLen %d)", ln.sizes[0], ln.padLen())
	}
}
