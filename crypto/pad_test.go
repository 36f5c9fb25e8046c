package crypto

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// padFrame frames sym (any bytes) with pad bytes of junk, as the egress
// path does: symbol and junk written, then Frame.
func padFrame(f *Framer, buf, sym []byte, h Header, rng *rand.Rand) []byte {
	copy(buf[HeaderLen:], sym)
	if h.Pad >= MinPad {
		for i := range int(h.Pad) - 2 {
			buf[HeaderLen+len(sym)+i] = byte(rng.Uint32())
		}
	}
	return f.Frame(buf, h, len(sym))
}

// A padded datagram is exactly Pad bytes longer and gives back its header
// (with Pad) and its symbol, for every kind and any symbol length.
func TestFramePaddedRoundTrip(t *testing.T) {
	s, fs, o, fr := lanePair(11)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4096)
	for _, n := range []int{1, 3, 10, 23, 24, 25, 100, 1400} {
		for _, pad := range []uint16{0, MinPad, 3, 17, 33, 1000} {
			for _, kind := range []Kind{KindData, KindParity, KindControl} {
				sym := make([]byte, n)
				for i := range sym {
					sym[i] = byte(rng.Uint32())
				}
				h := Header{Kind: kind, Group: rng.Uint32(), Index: 1, K: 16, R: 4, Pad: pad}
				d := padFrame(&fs, buf, sym, h, rng)
				if len(d) != n+FrameOverhead+int(pad) {
					t.Fatalf("n=%d pad=%d: len %d", n, pad, len(d))
				}
				if !fr.Matches(d) {
					t.Fatalf("n=%d pad=%d: no match", n, pad)
				}
				gh, gs, err := fr.Deframe(d)
				if err != nil || gh != h || !bytes.Equal(gs, sym) {
					t.Fatalf("n=%d pad=%d %v: %v %+v", n, pad, kind, err, gh)
				}
			}
		}
	}
	// A sealed packet padded still opens.
	pt := []byte("inner packet")
	copy(buf[HeaderLen+CounterLen:], pt)
	sym, err := s.SealSymbol(buf[HeaderLen:], nil, buf[HeaderLen+CounterLen:HeaderLen+CounterLen+len(pt)])
	if err != nil {
		t.Fatal(err)
	}
	d := fs.Frame(buf, Header{Kind: KindData, K: 1, Pad: 9}, len(sym))
	_, sym, err = fr.Deframe(d)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := o.OpenSymbol(nil, sym); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("open: %v %q", err, got)
	}
}

// Flipping any covered byte of a padded datagram (header, symbol, Pad
// field or tag: the symbols here are short enough to be covered whole)
// makes it rejected and leaves it as it was; Matches agrees. The junk
// carries nothing and is not covered: flipping it changes no symbol.
func TestFramePaddedTamperAnyByte(t *testing.T) {
	_, fs, _, fr := lanePair(12)
	rng := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 2048)
	for _, n := range []int{1, 20, 40} {
		for _, pad := range []uint16{MinPad, 7, 40} {
			d := padFrame(&fs, buf, make([]byte, n), Header{Kind: KindParity, K: 4, R: 2, Pad: pad}, rng)
			for pos := range d {
				for _, flip := range []byte{1, 4, 0x80} {
					d[pos] ^= flip
					before := bytes.Clone(d)
					if !tagCovers(pos, n, int(pad)) {
						_, sym, err := fr.Deframe(d)
						if err != nil || !bytes.Equal(sym, make([]byte, n)) {
							t.Fatalf("n=%d pad=%d: flip in the junk at %d: %v %x", n, pad, pos, err, sym)
						}
						copy(d, before)
						d[pos] ^= flip
						continue
					}
					if _, _, err := fr.Deframe(d); err != ErrTag {
						t.Fatalf("n=%d pad=%d: flip %#x at %d: %v", n, pad, flip, pos, err)
					}
					if fr.Matches(d) || !bytes.Equal(before, d) {
						t.Fatalf("n=%d pad=%d: flip at %d matched or changed the datagram", n, pad, pos)
					}
					d[pos] ^= flip
				}
			}
			if _, _, err := fr.Deframe(d); err != nil {
				t.Fatalf("untampered: %v", err)
			}
		}
	}
}

// rawFrame tags and masks b (header and body, unmasked) exactly as Frame
// would, whatever its header says: authenticated datagrams no honest
// sender makes. Its Pad field must delimit a symbol (layout), or nothing
// could tag it.
func rawFrame(f *Framer, b []byte) []byte {
	symLen, pad, ok := layout(b)
	if !ok {
		panic("rawFrame: no symbol")
	}
	tag := f.tag(b, symLen, pad)
	f.mask(b, tag)
	return binary.LittleEndian.AppendUint64(b, tag)
}

// A padded datagram whose Pad leaves no symbol, or is below MinPad, cannot
// be authenticated (the tag covers the symbol the Pad delimits): ErrTag,
// whoever framed it. One that sets the reserved bits is a broken peer:
// ErrHeader.
func TestFramePadBadLength(t *testing.T) {
	_, fs, _, fr := lanePair(13)
	for _, c := range []struct {
		body int    // bytes after the header, Pad field included
		pad  uint16 // the Pad field's value
		b0   byte
		want error
	}{
		{body: 10, pad: 10, b0: flagPadded, want: ErrTag}, // no symbol left
		{body: 10, pad: 11, b0: flagPadded, want: ErrTag},
		{body: 10, pad: 0xffff, b0: flagPadded, want: ErrTag},
		{body: 10, pad: 1, b0: flagPadded, want: ErrTag},
		{body: 10, pad: 0, b0: flagPadded, want: ErrTag},
		{body: 1, pad: 0, b0: flagPadded, want: ErrTag}, // no room for a Pad field
		{body: 10, pad: 2, b0: flagPadded | 1<<3, want: ErrHeader},
		{body: 10, pad: 2, b0: 0x80, want: ErrHeader},
	} {
		b := make([]byte, HeaderLen+c.body)
		b[0] = c.b0
		if c.body >= 2 {
			binary.LittleEndian.PutUint16(b[len(b)-2:], c.pad)
		}
		var d []byte
		if c.want == ErrTag {
			// Framed as the honest sender would frame the datagram it
			// meant: the same bytes with Pad 2, then the Pad field
			// rewritten under the mask.
			if c.body < 3 {
				d = binary.LittleEndian.AppendUint64(b, 0)
			} else {
				binary.LittleEndian.PutUint16(b[len(b)-2:], 2)
				d = rawFrame(&fs, b)
				mask := siphashPadMask(&fs, binary.LittleEndian.Uint64(d[len(d)-TagLen:]))
				binary.LittleEndian.PutUint16(d[len(d)-TagLen-2:], c.pad^mask)
			}
		} else {
			d = rawFrame(&fs, b)
		}
		before := bytes.Clone(d)
		if _, _, err := fr.Deframe(d); err != c.want || (c.want == ErrTag && !bytes.Equal(before, d)) {
			t.Errorf("%+v: %v, want %v", c, err, c.want)
		}
	}
	// The edge that is fine: a one-byte symbol.
	b := make([]byte, HeaderLen+10)
	b[0] = flagPadded
	binary.LittleEndian.PutUint16(b[len(b)-2:], 9)
	if h, sym, err := fr.Deframe(rawFrame(&fs, b)); err != nil || len(sym) != 1 || h.Pad != 9 {
		t.Fatalf("one-byte symbol: %v %d %+v", err, len(sym), h)
	}
}

// siphashPadMask is the 16-bit mask maskPad XORs over a Pad field.
func siphashPadMask(f *Framer, tag uint64) uint16 { return f.padMask(tag) }

// The Pad field is masked: the same Pad on many datagrams leaves no fixed
// byte where it sits (nor in the junk, which the caller draws).
func TestFramePadFieldMasked(t *testing.T) {
	s, fs, _, _ := lanePair(14)
	rng := rand.New(rand.NewPCG(7, 8))
	buf := make([]byte, 512)
	seen := map[[2]byte]int{}
	const n = 2000
	for range n {
		pt := make([]byte, 100)
		copy(buf[HeaderLen+CounterLen:], pt)
		sym, err := s.SealSymbol(buf[HeaderLen:], nil, buf[HeaderLen+CounterLen:HeaderLen+CounterLen+len(pt)])
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			buf[HeaderLen+len(sym)+i] = byte(rng.Uint32())
		}
		d := fs.Frame(buf, Header{Kind: KindData, K: 8, Pad: 10}, len(sym))
		var f [2]byte
		copy(f[:], d[len(d)-TagLen-2:])
		seen[f]++
	}
	for f, c := range seen {
		if c > n/50 {
			t.Fatalf("Pad field bytes %x on %d of %d datagrams", f, c, n)
		}
	}
}

func TestFramePaddedZeroAlloc(t *testing.T) {
	_, fs, _, fr := lanePair(15)
	buf := make([]byte, 2048)
	allocs := testing.AllocsPerRun(1000, func() {
		d := fs.Frame(buf, Header{Kind: KindData, K: 8, R: 1, Pad: 20}, 1400)
		if !fr.Matches(d) {
			panic("no match")
		}
		if _, _, err := fr.Deframe(d); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("padded frame+matches+deframe allocates %.1f times", allocs)
	}
}
