package crypto

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func testLaneKeys(seed byte) LaneKeys {
	var s SessionKeys
	s.send[0], s.recv[0] = seed, seed+1
	return s.SendLane(0)
}

// lanePair returns a sending and a receiving end of one lane.
func lanePair(seed byte) (*Sealer, Framer, *Opener, Framer) {
	k := testLaneKeys(seed)
	return NewSealer(&k.AEAD), NewFramer(&k), NewOpener(&k.AEAD), NewFramer(&k)
}

// sealFrame runs the egress path on pt: seal in place, then frame.
func sealFrame(t testing.TB, s *Sealer, f *Framer, buf, pt []byte, h Header) []byte {
	t.Helper()
	copy(buf[HeaderLen+CounterLen:], pt)
	sym, err := s.SealSymbol(buf[HeaderLen:], nil, buf[HeaderLen+CounterLen:HeaderLen+CounterLen+len(pt)])
	if err != nil {
		t.Fatal(err)
	}
	return f.Frame(buf, h, len(sym))
}

func TestFrameRoundTrip(t *testing.T) {
	s, fs, o, fr := lanePair(1)
	buf := make([]byte, 2048)
	for _, n := range []int{1, 7, 8, 20, 64, 512, 1400} {
		for _, kind := range []Kind{KindData, KindControl} {
			pt := bytes.Repeat([]byte{0x45}, n)
			h := Header{Kind: kind, Group: 0xfffffffe, Index: 3, K: 8, R: 2}
			d := sealFrame(t, s, &fs, buf, pt, h)
			if len(d) != n+DataOverhead {
				t.Fatalf("len %d, want %d", len(d), n+DataOverhead)
			}
			gh, sym, err := fr.Deframe(d)
			if err != nil || gh != h {
				t.Fatalf("deframe: %v %+v", err, gh)
			}
			got, err := o.OpenSymbol(nil, sym)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("open %d: %v", n, err)
			}
		}
	}
	// A parity symbol is opaque bytes; the frame carries it exactly.
	p := []byte{0, 0, 0, 0, 1, 2, 3}
	copy(buf[HeaderLen:], p)
	d := fs.Frame(buf, Header{Kind: KindParity, Group: 9, Index: 9, K: 8, R: 2}, len(p))
	h, sym, err := fr.Deframe(d)
	if err != nil || h.Kind != KindParity || !bytes.Equal(sym, p) {
		t.Fatalf("parity: %v %+v %x", err, h, sym)
	}
}

// tagCovers reports whether the tag covers byte pos of a datagram whose
// symbol is symLen bytes and whose padding is pad bytes: the header, the
// symbol's first 24 and last 16 bytes, the Pad field and the tag itself.
func tagCovers(pos, symLen, pad int) bool {
	end := HeaderLen + symLen
	switch {
	case pos < HeaderLen:
		return true
	case pos < end:
		return pos < HeaderLen+tagHead || pos >= end-tagTail
	}
	// After the symbol: the tag, and with padding the Pad field before
	// it; the junk between carries nothing.
	return pad == 0 || pos >= end+pad-2
}

// Changing any covered byte of a datagram (header, the symbol's first 24
// and last 16 bytes, tag) makes it rejected, and the rejected datagram is
// left exactly as it was. Changing a byte between passes the tag, and the
// data symbol then fails its AEAD open: nothing changed is ever accepted.
func TestFrameTamperAnyByte(t *testing.T) {
	s, fs, o, fr := lanePair(2)
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 2048)
	for _, n := range []int{1, 2, 16, 17, 100, 1400} {
		pt := make([]byte, n)
		for i := range pt {
			pt[i] = byte(rng.Uint32())
		}
		d := bytes.Clone(sealFrame(t, s, &fs, buf, pt, Header{Kind: KindData, Group: 1, Index: 2, K: 3, R: 4}))
		symLen := n + SymbolOverhead
		passed := 0
		for pos := range d {
			for _, flip := range []byte{1, 0x80, byte(rng.IntN(255) + 1)} {
				d[pos] ^= flip
				before := bytes.Clone(d)
				_, sym, err := fr.Deframe(d)
				if tagCovers(pos, symLen, 0) {
					if err != ErrTag || !bytes.Equal(before, d) {
						t.Fatalf("n=%d: flipping %#x at covered %d: err %v (or the datagram changed)", n, flip, pos, err)
					}
				} else {
					if err != nil {
						t.Fatalf("n=%d: flipping %#x at uncovered %d: err %v", n, flip, pos, err)
					}
					if _, err := o.OpenSymbol(nil, sym); err == nil {
						t.Fatalf("n=%d: payload changed at %d opened", n, pos)
					}
					passed++
					copy(d, before) // undo the unmask
				}
				d[pos] ^= flip
			}
		}
		if want := max(0, symLen-tagHead-tagTail); passed != 3*want {
			t.Fatalf("n=%d: %d flips passed the tag, want %d", n, passed, 3*want)
		}
		if _, _, err := fr.Deframe(d); err != nil {
			t.Fatalf("untampered datagram rejected: %v", err)
		}
	}
	// Symbols of 40 bytes or less (parity can be that short) are covered
	// whole.
	for _, n := range []int{1, 10, 24, 25, 40} {
		sym := make([]byte, n)
		copy(buf[HeaderLen:], sym)
		d := fs.Frame(buf, Header{Kind: KindParity, Group: 1, Index: 4, K: 3, R: 4}, n)
		for pos := range d {
			d[pos] ^= 0x10
			if _, _, err := fr.Deframe(d); err != ErrTag {
				t.Fatalf("parity n=%d: flip at %d: %v", n, pos, err)
			}
			d[pos] ^= 0x10
		}
	}
}

// The tag costs the same at any length: its input is at most tagInputMax
// bytes, and the bytes it skips are exactly the middle of a long symbol.
func TestTagInputBounded(t *testing.T) {
	_, fs, _, _ := lanePair(9)
	b := make([]byte, HeaderLen+65507)
	for _, n := range []int{1, 40, 41, 1400, 65507} {
		base := fs.tag(b[:HeaderLen+n], n, 0)
		if n > tagHead+tagTail {
			mid := HeaderLen + tagHead + (n-tagHead-tagTail)/2
			b[mid] ^= 1
			if fs.tag(b[:HeaderLen+n], n, 0) != base {
				t.Fatalf("n=%d: the middle of the symbol changed the tag", n)
			}
			b[mid] ^= 1
		}
		if fs.tag(b[:HeaderLen+n], n, 1) == base {
			t.Fatalf("n=%d: Pad not covered", n)
		}
	}
}

func TestFrameWrongKeyShortAndBadKind(t *testing.T) {
	_, fs, _, _ := lanePair(3)
	_, _, _, other := lanePair(4)
	buf := make([]byte, 256)
	d := fs.Frame(buf, Header{}, 40)
	if _, _, err := other.Deframe(d); err != ErrTag {
		t.Fatalf("other lane's key: %v", err)
	}
	for n := range FrameOverhead + 1 {
		if _, _, err := fs.Deframe(make([]byte, n)); err != ErrShort {
			t.Fatalf("len %d: %v", n, err)
		}
	}
	// Kind 3 is authenticated but invalid: a broken peer, reported as such.
	d = fs.Frame(buf, Header{Kind: 3}, 40)
	if _, _, err := fs.Deframe(d); err != ErrHeader {
		t.Fatalf("kind 3: %v", err)
	}
}

// Identical headers and symbols give different-looking datagrams only
// through the tag; with a counter in every data symbol no two data
// datagrams of a lane share their masked prefix.
func TestMaskHidesConstantHeader(t *testing.T) {
	s, fs, _, fr := lanePair(5)
	buf := make([]byte, 256)
	seen := map[[MaskLen]byte]bool{}
	for range 1000 {
		d := sealFrame(t, s, &fs, buf, make([]byte, 40), Header{Kind: KindData, K: 8, R: 2})
		var p [MaskLen]byte
		copy(p[:], d)
		if seen[p] {
			t.Fatal("two data datagrams share their first 32 bytes")
		}
		seen[p] = true
		h, _, err := fr.Deframe(d)
		if err != nil || h.K != 8 {
			t.Fatal(err)
		}
	}
}

func TestDataPathZeroAlloc(t *testing.T) {
	s, fs, o, fr := lanePair(6)
	buf := make([]byte, 2048)
	pt := make([]byte, 1400)
	h := Header{Kind: KindData, K: 8, R: 1}
	allocs := testing.AllocsPerRun(1000, func() {
		copy(buf[HeaderLen+CounterLen:], pt)
		sym, err := s.SealSymbol(buf[HeaderLen:], nil, buf[HeaderLen+CounterLen:HeaderLen+CounterLen+len(pt)])
		if err != nil {
			panic(err)
		}
		d := fs.Frame(buf, h, len(sym))
		_, sym, err = fr.Deframe(d)
		if err != nil {
			panic(err)
		}
		if _, err := o.OpenSymbol(nil, sym); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("seal+frame+deframe+open allocates %.1f times per packet", allocs)
	}
}

// Matches tells a datagram of its lane from others and never changes it.
func TestFrameMatches(t *testing.T) {
	s, fs, _, fr := lanePair(1)
	_, _, _, other := lanePair(7)
	buf := make([]byte, 2048)
	d := sealFrame(t, s, &fs, buf, []byte("inner packet"), Header{Kind: KindData, Group: 5, K: 4})
	orig := bytes.Clone(d)
	if !fr.Matches(d) || !bytes.Equal(d, orig) {
		t.Fatal("own lane: no match, or the datagram changed")
	}
	if other.Matches(d) || !bytes.Equal(d, orig) {
		t.Fatal("other lane: matched, or the datagram changed")
	}
	if fr.Matches(d[:FrameOverhead]) {
		t.Fatal("a too-short datagram matched")
	}
	if _, _, err := fr.Deframe(d); err != nil {
		t.Fatalf("the datagram no longer deframes after Matches: %v", err)
	}
}

// The tag's digest is what the wire format documents: header 8, symbol
// length 4, Pad 2, the symbol's first 24 and last 16 bytes, 54 in all,
// and the mask covers the header and those first 24 bytes.
func TestTagDigestShape(t *testing.T) {
	if tagHead != 24 || tagTail != 16 || tagInputMax != 54 || MaskLen != HeaderLen+tagHead {
		t.Fatalf("digest: head %d, tail %d, max %d, mask %d", tagHead, tagTail, tagInputMax, MaskLen)
	}
}

// The symbol's length is covered: deleting or inserting a byte in the
// uncovered middle of a long symbol, keeping header, ends and tag, fails.
func TestFrameLengthCovered(t *testing.T) {
	_, fs, _, fr := lanePair(10)
	buf := make([]byte, 2048)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for _, n := range []int{100, 1400} {
		d := bytes.Clone(fs.Frame(buf, Header{Kind: KindData, K: 4, R: 1}, n))
		mid := HeaderLen + n/2
		del := append(bytes.Clone(d[:mid]), d[mid+1:]...)
		ins := append(append(bytes.Clone(d[:mid]), d[mid]), d[mid:]...)
		for name, x := range map[string][]byte{"deleted": del, "inserted": ins} {
			if _, _, err := fr.Deframe(x); err != ErrTag {
				t.Fatalf("n=%d, a middle byte %s: %v", n, name, err)
			}
		}
		if _, _, err := fr.Deframe(d); err != nil {
			t.Fatalf("n=%d: untouched: %v", n, err)
		}
	}
}

// layout finds the symbol a Pad field delimits, and refuses a Pad below
// MinPad or one that leaves no byte of symbol.
func TestLayout(t *testing.T) {
	for _, c := range []struct {
		body       int // bytes after the header, Pad field included
		pad        uint16
		sym, wantP int
		ok         bool
	}{
		{10, 9, 1, 9, true}, // a one-byte symbol
		{10, 10, 0, 0, false},
		{10, 2, 8, 2, true},
		{10, 1, 0, 0, false},
		{10, 0, 0, 0, false},
		{1, 0, 0, 0, false}, // no room for a Pad field
	} {
		b := make([]byte, HeaderLen+c.body)
		b[0] = flagPadded
		if c.body >= 2 {
			binary.LittleEndian.PutUint16(b[len(b)-2:], c.pad)
		}
		sym, pad, ok := layout(b)
		if sym != c.sym || pad != c.wantP || ok != c.ok {
			t.Errorf("%+v: layout %d %d %v", c, sym, pad, ok)
		}
	}
	if sym, pad, ok := layout(make([]byte, HeaderLen+5)); sym != 5 || pad != 0 || !ok {
		t.Errorf("unpadded: %d %d %v", sym, pad, ok)
	}
}

// A version 1 datagram never passes version 2's tag, and MatchesV1 tells
// it (and only it) apart, padded or not, leaving it untouched.
func TestMatchesV1(t *testing.T) {
	_, fs, _, fr := lanePair(11)
	_, _, _, other := lanePair(12)
	buf := make([]byte, 2048)
	for _, n := range []int{1, 40, 1400} {
		for _, pad := range []uint16{0, MinPad, 30} {
			h := Header{Kind: KindData, Group: 3, K: 4, R: 1, Pad: pad}
			v1 := bytes.Clone(fs.FrameV1(buf, h, n))
			orig := bytes.Clone(v1)
			if _, _, err := fr.Deframe(v1); err != ErrTag {
				t.Fatalf("n=%d pad=%d: v1 datagram deframed: %v", n, pad, err)
			}
			if !fr.MatchesV1(v1) || !bytes.Equal(v1, orig) {
				t.Fatalf("n=%d pad=%d: v1 datagram not recognised, or changed", n, pad)
			}
			if other.MatchesV1(v1) {
				t.Fatalf("n=%d pad=%d: another lane's key recognised it", n, pad)
			}
			if fr.MatchesV1(fs.Frame(buf, h, n)) {
				t.Fatalf("n=%d pad=%d: a v2 datagram taken for v1", n, pad)
			}
		}
	}
}
