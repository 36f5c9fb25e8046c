package fec

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// FuzzDecoder feeds arbitrary symbol sequences—what a peer that is broken
// but holds valid keys could send—and checks the decoder's invariants: no
// panic, storage within the cap, no slab leaked or double-owned, and nothing
// delivered outside the symbol length bounds.
//
// Input: records of 7 bytes [kind|flags, group delta, index, K, R, len hi,
// len lo]; the symbol bytes are taken cyclically from the input itself.
func FuzzDecoder(f *testing.F) {
	// A valid 2:1 group with one data symbol lost, then garbage.
	f.Add([]byte{0, 0, 0, 2, 1, 0, 5, 1, 0, 2, 2, 1, 0, 7, 0, 1, 1, 2, 1, 0, 5})
	f.Add([]byte{1, 0x80, 5, 4, 2, 6, 66, 0, 0x7f, 0, 64, 32, 0, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder(DecoderConfig{MaxGroups: 4, MaxBytes: 1, MaxAhead: 3, GroupTTL: 10 * time.Millisecond})
		now := t0
		var g uint32
		pool := append(bytes.Clone(in), make([]byte, MaxParityLen)...)
		off := 0
		// Symbols whose first byte is odd are refused, as a symbol that
		// fails its AEAD open is: the refusal path runs under the same
		// bounds.
		deliver := func(b []byte, _ bool) bool {
			if len(b) == 0 || len(b) > MaxSymbolLen {
				t.Fatalf("delivered %d bytes", len(b))
			}
			return b[0]&1 == 0
		}
		for len(in) >= 7 {
			rec := in[:7]
			in = in[7:]
			g += uint32(int8(rec[1]))
			m := Meta{Kind: Kind(rec[0] & 3), Group: g, Index: rec[2], K: rec[3], R: rec[4]}
			n := int(binary.BigEndian.Uint16(rec[5:])) % (MaxParityLen + 8)
			if off+n > len(pool) {
				off = 0
			}
			sym := pool[off : off+n]
			off += n % 64
			if rec[0]&4 != 0 {
				now = now.Add(time.Duration(rec[0]>>3) * time.Millisecond)
				d.Tick(now)
			}
			d.Push(m, sym, now, deliver)
			if d.StoredBytes() > d.CapBytes() {
				t.Fatalf("stored %d over cap %d", d.StoredBytes(), d.CapBytes())
			}
			if err := checkDue(d); err != nil {
				t.Fatal(err)
			}
		}
		if held := storedSlabs(d); held+len(d.free) != len(d.arena) {
			t.Fatalf("slabs: %d held + %d free != %d", held, len(d.free), len(d.arena))
		}
	})
}

// FuzzRoundTrip drives a real encoder and lets the input choose losses,
// duplicates and small reorderings; every data symbol of a group with at
// least K arrivals must come out exactly once and byte-exact (checked by
// sink), and nothing else may come out.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(4), uint8(2), []byte{0xff, 0xfe, 0x01, 0x33, 0x80})
	f.Add(uint8(1), uint8(1), []byte{0x00, 0x02})
	f.Fuzz(func(t *testing.T, k, r uint8, ctl []byte) {
		K, R := 1+int(k)%16, 1+int(r)%4
		e, _ := NewEncoder(EncoderConfig{K: K, R: R, FirstGroup: 0xFFFFFFFE})
		d := NewDecoder(DecoderConfig{})
		s := newSink(t)
		var wire []wireSym
		for i, c := range ctl {
			b := make([]byte, 8+int(c)*5)
			binary.BigEndian.PutUint64(b, uint64(i))
			for j := 8; j < len(b); j++ {
				b[j] = c ^ byte(j)
			}
			s.expect(b)
			m, _ := e.Add(b, t0)
			wire = append(wire, wireSym{m, b})
			wire = drainParity(e, wire)
		}
		e.Flush()
		wire = drainParity(e, wire)
		// Control byte of symbol i: bit0 lose, bit1 duplicate, bit2 swap with next.
		arrived := map[uint32]int{}
		kOf := map[uint32]int{}
		var got []wireSym
		for i, w := range wire {
			c := ctl[i%len(ctl)] >> (i % 5)
			if w.m.Kind == KindParity {
				kOf[w.m.Group] = int(w.m.K)
			}
			if c&1 != 0 {
				continue
			}
			arrived[w.m.Group]++
			got = append(got, w)
			if c&2 != 0 {
				got = append(got, w)
			}
			if c&4 != 0 && len(got) >= 2 {
				got[len(got)-1], got[len(got)-2] = got[len(got)-2], got[len(got)-1]
			}
		}
		for _, w := range got {
			d.Push(w.m, w.b, t0, s.deliver)
		}
		for i, w := range wire {
			if w.m.Kind != KindData {
				continue
			}
			k := kOf[w.m.Group]
			if k == 0 {
				k = K
			}
			lost := ctl[i%len(ctl)]>>(i%5)&1 != 0
			if want := !lost || arrived[w.m.Group] >= k; s.has(w.b) != want {
				t.Fatalf("group %d index %d: delivered %v, want %v", w.m.Group, w.m.Index, s.has(w.b), want)
			}
		}
	})
}

// FuzzParseLossReport: a report from the peer is either rejected or yields
// counts that make sense and re-encode identically.
func FuzzParseLossReport(f *testing.F) {
	f.Add([]byte{0, 0, 3, 232, 0, 0, 3, 182, 0, 0, 0, 3})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 3, 232, 0, 0, 3, 182, 0, 0, 0, 3, 0, 0, 0, 12})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseLossReport(b)
		if err != nil {
			return
		}
		if l := r.Loss(); l < 0 || l > 1 {
			t.Fatalf("loss %v out of [0,1]", l)
		}
		if bl := r.Burst(); bl != 0 && (bl < 1 || bl > float64(r.Expected)) {
			t.Fatalf("burst %v", bl)
		}
		out, _ := r.AppendBinary(nil)
		if !bytes.Equal(out[:len(b)], b) || len(b) == LossReportLenV1 && r.Runs != 0 {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzParseMode: the config parser never panics and what it accepts
// round-trips through String and is usable by the encoder.
func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"off", "auto", "16:4", "0:1", "8:+2", " 8:2 ", "9999999999999999999:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMode(s)
		if err != nil {
			return
		}
		again, err := ParseMode(m.String())
		if err != nil || again != m {
			t.Fatalf("%q parsed to %+v, which round-trips to %+v, %v", s, m, again, err)
		}
		if m.Kind == ModeFixed {
			if _, err := NewEncoder(EncoderConfig{K: m.K, R: m.R}); err != nil {
				t.Fatalf("%q accepted but encoder refuses %d:%d: %v", s, m.K, m.R, err)
			}
		}
	})
}
