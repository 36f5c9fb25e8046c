package fec

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
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

// tamperSetup is an authenticating sink, a default decoder and one 16:4
// group of wire symbols (seed picks the payloads).
func tamperSetup(t *testing.T, seed uint64) (*sink, *Decoder, []wireSym) {
	t.Helper()
	s := newSink(t)
	s.authenticate = true
	return s, NewDecoder(DecoderConfig{}), tamperGroup(t, s, seed)
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
			s, d, wire := tamperSetup(t, 1)
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
// is refused and counted, never delivered; the group forgets the parity it
// used and recovers from genuine parity that arrives after, including a
// genuine copy of the changed symbol itself (injected ahead of it).
func TestDecoderChangedParityRecovers(t *testing.T) {
	for _, c := range []struct {
		name string
		// order of the wire: indices, with -1-i for a changed copy of i
		order []int
	}{
		{"changed first parity, others follow", []int{0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, -17, 17, 18, 19}},
		{"changed copy ahead of the genuine", []int{0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, -17, 16}},
		{"genuine ahead of the changed copy", []int{0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, -17}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, d, wire := tamperSetup(t, 2)
			for _, i := range c.order {
				if i < 0 {
					w := wire[-1-i]
					d.Push(w.m, flipMiddle(w.b), t0, s.deliver)
					continue
				}
				d.Push(wire[i].m, wire[i].b, t0, s.deliver)
			}
			if !s.has(wire[7].b) {
				t.Fatalf("lost symbol not recovered: refused %d, stats %+v", s.refused, d.Stats())
			}
			if st := d.Stats(); st.Recovered != 1 || st.Rejected != uint64(s.refused) || st.Spoiled != uint64(s.refused) {
				t.Fatalf("refused %d, stats %+v", s.refused, st)
			}
		})
	}
}

// Changed parity costs a group at most maxSpoils reconstructions: after it
// gives up, nothing changed is delivered, a late original of the lost
// symbol is still taken once, and the window goes on to the next group.
func TestDecoderChangedParityBounded(t *testing.T) {
	s, d, wire := tamperSetup(t, 3)
	for i, w := range wire {
		switch {
		case i == 7:
		case w.m.Kind == KindParity:
			for range 3 { // several changed copies of each
				d.Push(w.m, flipMiddle(w.b), t0, s.deliver)
			}
		default:
			d.Push(w.m, w.b, t0, s.deliver)
		}
	}
	st := d.Stats()
	if s.has(wire[7].b) || st.Spoiled != maxSpoils || st.Rejected != maxSpoils || st.Recovered != 0 {
		t.Fatalf("R=4: want %d spoiled reconstructions and nothing recovered; stats %+v", maxSpoils, st)
	}
	d.Push(wire[7].m, wire[7].b, t0, s.deliver) // the late original
	d.Push(wire[7].m, wire[7].b, t0, s.deliver) // and a duplicate of it
	if !s.has(wire[7].b) {
		t.Fatal("late original not taken after the group gave up")
	}
	next := tamperGroup(t, s, 4)
	for i := range next {
		next[i].m.Group++
	}
	for i, w := range next {
		if i != 2 {
			d.Push(w.m, w.b, t0, s.deliver)
		}
	}
	s.all()
	if d.StoredBytes() > d.CapBytes() {
		t.Fatal("over the byte cap")
	}
}

// A refused data symbol is an erasure in the loss report too: the group
// reports it missing, not received.
func TestDecoderChangedDataReportedLost(t *testing.T) {
	s, d, wire := tamperSetup(t, 5)
	for i, w := range wire {
		if i == 5 {
			d.Push(w.m, flipMiddle(w.b), t0, s.deliver)
			continue
		}
		d.Push(w.m, w.b, t0, s.deliver)
	}
	d.Tick(t0.Add(DefaultGroupTTL + time.Millisecond))
	if r := d.TakeLossReport(); r.Expected != 20 || r.Received != 19 {
		t.Fatalf("loss report %+v, want 19 of 20 received", r)
	}
}
