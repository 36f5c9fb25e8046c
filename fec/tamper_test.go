package fec

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The datagram tag covers a symbol's header, length and ends, not its
// payload (crypto/frame.go): a payload changed on the path reaches the
// decoder and only the AEAD open refuses it. These tests stand in for that
// open with an authenticating sink.

// tamperGroup emits one 16:4 group of distinct payloads of one size (one
// size class: one group) and returns its wire symbols.
func tamperGroup(t *testing.T, s *sink, seed uint64) []wireSym {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	e, err := NewEncoder(EncoderConfig{K: 16, R: 4})
	if err != nil {
		t.Fatal(err)
	}
	var syms [][]byte
	for i := range 16 {
		b := payload(rng, seed<<8|uint64(i), 600)
		s.expect(b)
		syms = append(syms, b)
	}
	wire := emitGroup(t, e, syms, t0)
	if len(wire) != 20 {
		t.Fatalf("%d symbols, want one 16:4 group", len(wire))
	}
	return wire
}

// flipMiddle returns a copy of b with one byte past the covered start
// changed: what an on-path attacker can do without failing the tag.
func flipMiddle(b []byte) []byte {
	c := bytes.Clone(b)
	c[len(c)/2+4] ^= 0x5a
	return c
}

// A changed data symbol is refused, forgotten as an erasure and recovered
// from parity: every packet is delivered once, whether the change arrives
// before the parity or after it, and alongside a real loss.
func TestDecoderChangedDataIsErasure(t *testing.T) {
	for _, c := range []struct {
		name          string
		parityFirst   bool
		lost, changed int
	}{
		{"in order", false, -1, 5},
		{"after parity", true, -1, 5},
		{"with a loss", false, 3, 9},
		{"with a loss, after parity", true, 3, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSink(t)
			s.authenticate = true
			wire := tamperGroup(t, s, 1)
			d := NewDecoder(DecoderConfig{})
			var data, parity []wireSym
			for _, w := range wire {
				if w.m.Kind == KindData {
					data = append(data, w)
				} else {
					parity = append(parity, w)
				}
			}
			order := append(append([]wireSym{}, data...), parity...)
			if c.parityFirst {
				order = append(append([]wireSym{}, parity...), data...)
			}
			for _, w := range order {
				switch {
				case w.m.Kind == KindData && int(w.m.Index) == c.lost:
					continue
				case w.m.Kind == KindData && int(w.m.Index) == c.changed:
					d.Push(w.m, flipMiddle(w.b), t0, s.deliver)
				default:
					d.Push(w.m, w.b, t0, s.deliver)
				}
			}
			s.all()
			st := d.Stats()
			if s.refused != 1 || st.Rejected != 1 || st.Recovered < 1 || st.Inconsistent != 0 {
				t.Fatalf("refused %d, stats %+v", s.refused, st)
			}
		})
	}
}

// A changed parity symbol can only spoil a reconstruction: what it yields
// is refused and counted, never delivered, the group is not tried again,
// and the window goes on to deliver the next group whole.
func TestDecoderChangedParityRefused(t *testing.T) {
	s := newSink(t)
	s.authenticate = true
	d := NewDecoder(DecoderConfig{})
	wire := tamperGroup(t, s, 2)
	var lost []byte
	pushes := 0
	for _, w := range wire {
		switch {
		case w.m.Kind == KindData && w.m.Index == 7:
			lost = w.b
			continue
		case w.m.Kind == KindParity && w.m.Index == 16:
			d.Push(w.m, flipMiddle(w.b), t0, s.deliver)
		default:
			d.Push(w.m, w.b, t0, s.deliver)
		}
		pushes++
	}
	st := d.Stats()
	if s.has(lost) || s.refused == 0 || st.Rejected != uint64(s.refused) || st.Recovered != 0 {
		t.Fatalf("lost symbol delivered %v, refused %d, stats %+v", s.has(lost), s.refused, st)
	}
	// The same symbols again change nothing: no retry, no second refusal.
	for _, w := range wire {
		d.Push(w.m, w.b, t0, s.deliver)
	}
	if d.Stats().Rejected != st.Rejected {
		t.Fatalf("group retried: %+v", d.Stats())
	}
	// The next group, with a genuine loss, is recovered.
	next := tamperGroup(t, s, 3)
	for i := range next {
		next[i].m.Group++
	}
	for _, w := range next {
		if w.m.Kind == KindData && w.m.Index == 2 {
			continue
		}
		d.Push(w.m, w.b, t0, s.deliver)
	}
	for _, w := range next {
		if w.m.Kind == KindData && !s.has(w.b) {
			t.Fatalf("next group: symbol %d not delivered", w.m.Index)
		}
	}
	if d.StoredBytes() > d.CapBytes() {
		t.Fatal("over the byte cap")
	}
}
