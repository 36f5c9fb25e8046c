package shard

import (
	"bytes"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// The datagram tag covers a symbol's ends, not its payload
// (crypto/frame.go): an on-path change to a data datagram's payload passes
// the tag and must cost exactly what a drop costs. Group of 16:4, one
// inner packet per data symbol, all the same size (one size class).

// tamperRun sends 16 packets of 600 bytes from a to b through a wire that
// changes (or drops) datagrams as pass says, and returns what b's TUN got
// and the packets sent.
func tamperRun(t *testing.T, pass func(k int, d []byte) bool) (a, b *side, sent [][]byte) {
	t.Helper()
	a, b = newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 16, R: 4})
	for i := range 16 {
		pkt := ipPacket("10.1.0.5", "10.2.0.9", 600, 1000+i)
		sent = append(sent, pkt)
		inject(t, a.shards[0], pkt)
	}
	if n := deliverEach(t, a, b, pass); n < 16 {
		t.Fatalf("fed %d datagrams", n)
	}
	return a, b, sent
}

// middle changes a byte in the middle of a long datagram: past the 24
// symbol bytes the tag covers up front, before the 16 it covers at the end.
func middle(d []byte) { d[len(d)/2] ^= 0x20 }

// A data datagram changed on the path fails its AEAD open, is forgotten as
// an erasure and recovered from parity: each packet reaches the TUN once,
// unchanged.
func TestChangedDataRecoveredFromParity(t *testing.T) {
	_, b, sent := tamperRun(t, func(k int, d []byte) bool {
		if k == 6 {
			middle(d)
		}
		return true
	})
	got := b.tun[0]
	if len(got) != len(sent) {
		t.Fatalf("TUN got %d packets, want %d", len(got), len(sent))
	}
	for i := range sent {
		n := 0
		for _, g := range got {
			if bytes.Equal(g, sent[i]) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("packet %d delivered %d times", i, n)
		}
	}
	b.shards[0].publish()
	sn := b.shards[0].Snapshot()
	if sn.Get(DropDecrypt) != 1 || sn.Get(DropBadTag) != 0 || sn.Get(FECRecovered) != 1 {
		t.Fatalf("drop_decrypt %d, drop_bad_tag %d, fec_recovered %d", sn.Get(DropDecrypt), sn.Get(DropBadTag), sn.Get(FECRecovered))
	}
}

// A parity datagram changed on the path can only spoil a reconstruction:
// what it yields is counted and dropped, nothing changed reaches the TUN,
// the lost packet is recovered from the next parity, each packet reaches
// the TUN once, and the lane goes on.
func TestChangedParityNeverDelivered(t *testing.T) {
	a, b, sent := tamperRun(t, func(k int, d []byte) bool {
		switch k {
		case 4:
			return false // lost
		case 17: // the first parity
			middle(d)
		}
		return true
	})
	got := b.tun[0]
	if len(got) != 16 {
		t.Fatalf("TUN got %d packets, want 16", len(got))
	}
	seen := map[string]bool{}
	for _, g := range got {
		found := false
		for _, s := range sent {
			found = found || bytes.Equal(g, s)
		}
		if !found || seen[string(g)] {
			t.Fatal("a changed or duplicated packet reached the TUN")
		}
		seen[string(g)] = true
	}
	s := b.shards[0]
	s.publish()
	if sn := s.Snapshot(); sn.Get(DropDecrypt) == 0 {
		t.Fatal("the spoiled reconstruction was not counted")
	}
	// The next group, with a genuine loss, is recovered whole.
	for i := range 16 {
		inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 600, 2000+i))
	}
	deliverEach(t, a, b, func(k int, _ []byte) bool { return k != 3 })
	if len(b.tun[0]) != 32 {
		t.Fatalf("after the spoiled group: %d packets delivered, want 32", len(b.tun[0]))
	}
}

// A lane whose peer's datagrams arrive framed by wire version 1 (its
// handshakes complete, nothing after them passes the tag) is reported
// silent with oldFraming, so the router can say so; a peer that is merely
// gone, or one whose datagrams are junk, is not.
func TestSilentTellsOldFraming(t *testing.T) {
	for _, c := range []struct {
		name        string
		wire, heard bool // v1 datagrams (else junk with a wrong tag); heard before
		send        bool // the peer sends anything at all
		want        bool
	}{
		{"version 1 peer", true, false, true, true},
		{"heard, then version 1", true, true, true, true},
		{"junk from its address", false, false, true, false},
		{"gone", false, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
			connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
			sa, sb := a.shards[0], b.shards[0]
			var got []bool
			sb.cfg.Silent = func(_ int, _ PeerID, old bool) { got = append(got, old) }
			if c.heard {
				inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 100, 0))
				deliverAll(t, a, b, nil)
			}
			txf := sa.table.lanes[addrB].cur.txf
			buf := make([]byte, 512)
			start := sb.now
			for step := range 80 {
				sb.now = start.Add(time.Duration(step) * 100 * time.Millisecond)
				inject(t, sb, ipPacket("10.2.0.9", "10.1.0.5", 100, step))
				if c.send {
					d := txf.FrameV1(buf, crypto.Header{Kind: crypto.KindData, Group: uint32(step), K: 4, R: 1}, 200)
					if !c.wire {
						d[len(d)-1] ^= 1
					}
					sb.ingress(0, d, addrA)
				}
				sb.tick()
				sb.flushAll()
				b.sent[0] = nil
			}
			if len(got) == 0 {
				t.Fatal("never reported silent")
			}
			if got[len(got)-1] != c.want {
				t.Fatalf("oldFraming %v, want %v", got, c.want)
			}
		})
	}
}
