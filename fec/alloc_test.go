package fec

import (
	"math/rand/v2"
	"testing"
)

// TestEncoderZeroAlloc: Add, group close (parity encode) and NextParity do
// not allocate once the arena and codec cache are warm.
func TestEncoderZeroAlloc(t *testing.T) {
	for _, kr := range [][3]int{{8, 1, 1}, {8, 2, 1}, {16, 4, 1}, {16, 4, 4}, {MaxK, 28, 1}} {
		e, _ := NewEncoder(EncoderConfig{K: kr[0], R: kr[1]})
		e.SetDepth(kr[2]) // interleaved blocks too
		rng := rand.New(rand.NewPCG(1, 1))
		syms := make([][]byte, 64)
		for i := range syms {
			syms[i] = payload(rng, uint64(i), 40+rng.IntN(1400))
		}
		i := 0
		// One run = one whole group, so a per-group allocation (e.g. in
		// parity encoding) cannot hide in AllocsPerRun's integer average.
		group := func() {
			for range kr[0] {
				e.Add(syms[i%len(syms)], t0)
				i++
				for {
					if _, _, ok := e.NextParity(); !ok {
						break
					}
				}
			}
		}
		for range 20 {
			group()
		}
		if a := testing.AllocsPerRun(200, group); a != 0 {
			t.Errorf("%s: %v allocs per group", ratioName(kr[0], kr[1]), a)
		}
		// Partial groups flushed by the timeout are just as free.
		flushed := func() {
			e.Add(syms[i%len(syms)], t0)
			i++
			e.Flush()
			for {
				if _, _, ok := e.NextParity(); !ok {
					break
				}
			}
		}
		if a := testing.AllocsPerRun(200, flushed); a != 0 {
			t.Errorf("%s flushed: %v allocs per group", ratioName(kr[0], kr[1]), a)
		}
	}
}

// precomputeWire encodes groups of K:R, dropping data index `lose` of every
// group (-1: no loss), for replay through a decoder.
func precomputeWire(t testing.TB, k, r, groups, size int, lose int) []wireSym {
	e, _ := NewEncoder(EncoderConfig{K: k, R: r})
	rng := rand.New(rand.NewPCG(2, 2))
	var wire []wireSym
	for g := range groups {
		for i := range k {
			b := payload(rng, uint64(g*k+i), size)
			m, err := e.Add(b, t0)
			if err != nil {
				t.Fatal(err)
			}
			if i != lose {
				wire = append(wire, wireSym{m, b})
			}
			wire = drainParity(e, wire)
		}
	}
	return wire
}

// TestDecoderZeroAlloc: pushing data and parity does not allocate in
// steady state, with no loss and with a recovery per group (the solver's
// scratch is made once per decoder, erasures.solve).
func TestDecoderZeroAlloc(t *testing.T) {
	var delivered int
	deliver := func(b []byte, _ bool) bool { delivered += len(b); return true }
	run := func(k, r, lose int) float64 {
		// About 12,800 symbols: the race detector slows the multiply-adds
		// of long groups tenfold.
		wire := precomputeWire(t, k, r, max(20, 12800/(k+r)), 1400, lose)
		d := NewDecoder(DecoderConfig{})
		half := len(wire) / 2
		for _, w := range wire[:half] {
			d.Push(w.m, w.b, t0, deliver)
		}
		i := half
		perGroup := len(wire) / max(20, 12800/(k+r))
		groups := (len(wire) - half) / perGroup
		a := testing.AllocsPerRun(groups-1, func() {
			for range perGroup {
				w := wire[i]
				d.Push(w.m, w.b, t0, deliver)
				i++
			}
		})
		if st := d.Stats(); lose >= 0 && st.Recovered == 0 {
			t.Fatalf("no recovery happened: %+v", st)
		}
		return a
	}
	for _, kr := range [][2]int{{8, 2}, {16, 4}, {MaxK, 28}} {
		k, r := kr[0], kr[1]
		if a := run(k, r, -1); a != 0 {
			t.Errorf("%d:%d no loss: %v allocs per group, want 0", k, r, a)
		}
		if a := run(k, r, 3); a != 0 {
			t.Errorf("%d:%d recovery: %v allocs per group, want 0", k, r, a)
		}
	}
}
