package fec

import (
	"math/rand/v2"
	"testing"
)

// TestEncoderZeroAlloc: Add, group close (parity encode) and NextParity do
// not allocate once the arena and codec cache are warm.
func TestEncoderZeroAlloc(t *testing.T) {
	for _, kr := range [][3]int{{8, 1, 1}, {8, 2, 1}, {16, 4, 1}, {16, 4, 4}} {
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

// TestDecoderZeroAlloc: pushing data and parity with no loss does not
// allocate in steady state; recovery's allocations (inside the library) are
// measured and bounded: reedsolomon's ReconstructData makes five small
// slices of shard bookkeeping per call (≈0.75 KiB at 8:2), never retained.
func TestDecoderZeroAlloc(t *testing.T) {
	var delivered int
	deliver := func(b []byte) bool { delivered += len(b); return true }
	run := func(k, r, lose int) float64 {
		wire := precomputeWire(t, k, r, 400, 1400, lose)
		d := NewDecoder(DecoderConfig{})
		half := len(wire) / 2
		for _, w := range wire[:half] {
			d.Push(w.m, w.b, t0, deliver)
		}
		i := half
		perGroup := len(wire) / 400
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
	for _, kr := range [][2]int{{8, 2}, {16, 4}} {
		k, r := kr[0], kr[1]
		if a := run(k, r, -1); a != 0 {
			t.Errorf("%d:%d no loss: %v allocs per group, want 0", k, r, a)
		}
		a := run(k, r, 3)
		t.Logf("%d:%d one loss per group: %v allocs per recovery (reedsolomon.ReconstructData bookkeeping)", k, r, a)
		if a > 8 {
			t.Errorf("%d:%d recovery: %v allocs per group, want ≤ 8 (library bookkeeping only)", k, r, a)
		}
	}
}
