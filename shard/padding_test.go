package shard

import (
	"bytes"
	"slices"
	"testing"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// padRun sends rounds batches of bulk (1300-byte) and small (60-byte) packets
// from a to b under mode, with b announcing features, and returns the
// lengths of a's datagrams per batch; every packet must reach b's TUN
// intact.
func padRun(t *testing.T, mode PadMode, features uint8, rounds int) [][]int {
	t.Helper()
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 2})
	sa, sb := a.shards[0], b.shards[0]
	sa.cfg.Padding = Padding{Mode: mode, MaxWire: 1400 + crypto.DataOverhead + crypto.PadHeadroom + 2}
	sa.lanes[addrB].peerFeatures = features
	var batches [][]int
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
		var lens []int
		for _, d := range a.sent[0] {
			lens = append(lens, len(d.data))
		}
		batches = append(batches, lens)
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
	return batches
}

// Without padding, or to a peer that does not read it, a bulk data
// datagram is its inner packet + DataOverhead, every time.
func TestPaddingOffOrUnannounced(t *testing.T) {
	for _, c := range []struct {
		mode PadMode
		feat uint8
	}{{PadOff, Features}, {PadLight, Features &^ FeatureFramePad}, {PadFull, 0}} {
		hist := map[int]int{}
		for _, b := range padRun(t, c.mode, c.feat, 300) {
			for _, n := range b {
				hist[n]++
			}
		}
		if hist[1300+crypto.DataOverhead] != 300*12 || hist[60+crypto.DataOverhead] != 300*4 {
			t.Fatalf("%v, features %#x: lengths %v", c.mode, c.feat, hist)
		}
	}
}

// PadLight spreads the bulk datagrams over MinPad..crypto.PadHeadroom extra
// bytes (no length carries more than 5% of them), keeps datagrams of one
// length in one batch at one length (GSO), and draws parity apart from
// data. PadFull pads small datagrams up to MaxWire.
func TestPaddingSpreadsLengths(t *testing.T) {
	bulk := 1300 + crypto.DataOverhead
	small := 60 + crypto.DataOverhead
	for _, mode := range []PadMode{PadLight, PadFull} {
		batches := padRun(t, mode, Features, 2000)
		hist := map[int]int{}
		total, parityAt2 := 0, 0
		maxWire := 1400 + crypto.DataOverhead + crypto.PadHeadroom + 2
		for _, b := range batches {
			// A batch starts with a bulk data datagram; its 12 bulk
			// packets share one length.
			bulkLen, same := b[0], 0
			for _, n := range b {
				if n == bulkLen {
					same++
				}
			}
			if mode == PadLight {
				if same < 12 {
					t.Fatalf("light: bulk lengths differ within one batch: %v", b)
				}
				hist[bulkLen]++
				total++
				// Parity of the bulk groups, unpadded, is 2 bytes
				// longer than their data.
				if slices.Contains(b, bulkLen+2) {
					parityAt2++
				}
			}
			for _, n := range b {
				if n > maxWire || n < small+crypto.MinPad {
					t.Fatalf("%v: a %d-byte datagram (bounds %d..%d)", mode, n, small+crypto.MinPad, maxWire)
				}
			}
		}
		if mode == PadLight {
			for n, c := range hist {
				if n < bulk+crypto.MinPad || n > bulk+crypto.PadHeadroom || c > total/20 {
					t.Fatalf("light: %d batches of %d at %d bytes (hist %v)", c, total, n, hist)
				}
			}
			if len(hist) < 25 {
				t.Fatalf("light: bulk datagrams took only %d lengths", len(hist))
			}
			if parityAt2 > total/5 {
				t.Fatalf("light: %d of %d batches had parity exactly 2 bytes over the data", parityAt2, total)
			}
			continue
		}
		// Full: the small packets' datagrams spread far beyond their own
		// length.
		over := 0
		for _, b := range batches {
			for _, n := range b {
				if n > 700 && n < bulk {
					over++
				}
			}
		}
		if over < len(batches)/4 {
			t.Fatalf("full: only %d datagrams between 700 bytes and the bulk length over %d batches", over, len(batches))
		}
	}
}
