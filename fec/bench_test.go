package fec

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/klauspost/reedsolomon"
)

// Run one at a time on a quiet machine:
//
//	go test -run '^$' -bench . -cpu 1 -benchtime 0.5s ./fec/

var benchRatios = [][2]int{{8, 1}, {8, 2}, {16, 2}, {16, 4}}

func benchSizes(mix bool) []int {
	s := make([]int, 96)
	for i := range s {
		s[i] = 1400
		if mix {
			s[i] = imixSize(i)
		}
	}
	return s
}

// BenchmarkEncode is the sender's cost per data packet: the copy into the
// arena plus its share of the group's parity computation.
func BenchmarkEncode(b *testing.B) {
	for _, kr := range benchRatios {
		for _, mix := range []bool{false, true} {
			name := fmt.Sprintf("%s/1400B", ratioName(kr[0], kr[1]))
			if mix {
				name = fmt.Sprintf("%s/imix", ratioName(kr[0], kr[1]))
			}
			b.Run(name, func(b *testing.B) {
				e, _ := NewEncoder(EncoderConfig{K: kr[0], R: kr[1]})
				sizes := benchSizes(mix)
				buf := make([]byte, MaxSymbolLen)
				for i := range 4 * kr[0] { // warm the arena and codec cache
					e.Add(buf[:sizes[i%len(sizes)]], t0)
				}
				total := 0
				for _, s := range sizes {
					total += s
				}
				b.SetBytes(int64(total / len(sizes)))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					e.Add(buf[:sizes[i%len(sizes)]], t0)
					i++
					for {
						if _, _, ok := e.NextParity(); !ok {
							break
						}
					}
				}
			})
		}
	}
}

// BenchmarkDecode is the receiver's cost per group, and per inner packet
// (ns/pkt; parity symbols included), clean and with one data symbol lost per
// group.
func BenchmarkDecode(b *testing.B) {
	const groups = 512
	for _, kr := range benchRatios {
		for _, lose := range []int{-1, 3} {
			name := ratioName(kr[0], kr[1]) + "/no-loss"
			if lose >= 0 {
				name = ratioName(kr[0], kr[1]) + "/1-loss-per-group"
			}
			b.Run(name, func(b *testing.B) {
				wire := precomputeWire(b, kr[0], kr[1], groups, 1400, lose)
				d := NewDecoder(DecoderConfig{})
				sink := 0
				deliver := func(p []byte, _ bool) bool { sink += len(p); return true }
				perGroup := len(wire) / groups
				// Warm the arena and codec cache, as on a running lane.
				for _, w := range wire[:perGroup*8] {
					d.Push(w.m, w.b, t0, deliver)
				}
				pos, cycle := perGroup*8, 0
				b.SetBytes(int64(kr[0] * 1400))
				b.ReportAllocs()
				// One op = one group: its data symbols (minus the lost one)
				// and parity, including the recovery.
				for b.Loop() {
					for range perGroup {
						w := wire[pos]
						w.m.Group += uint32(cycle * groups)
						d.Push(w.m, w.b, t0, deliver)
						pos++
					}
					if pos == len(wire) {
						pos, cycle = 0, cycle+1
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*kr[0]), "ns/pkt")
				if lose >= 0 && d.Stats().Recovered == 0 {
					b.Fatal("nothing recovered")
				}
			})
		}
	}
}

// BenchmarkOneParity compares, for R=1 (K=8, 1402-byte shards), the
// library's default matrix, WithFastOneParityMatrix (XOR), and this
// package's matrix (whose first row is XOR for every R): encoding a whole
// group with Encode, folding in one symbol with EncodeIdx (what Encoder
// does, ×8 per group), and recovering one lost symbol.
func BenchmarkOneParity(b *testing.B) {
	const k, size = 8, 1402
	matrices := []struct {
		name string
		opt  reedsolomon.Option
	}{
		{"default", nil},
		{"fast-one-parity", reedsolomon.WithFastOneParityMatrix()},
		{"fec-matrix", reedsolomon.WithCustomMatrix(parityRows(k, 1))},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	shards := make([][]byte, k+1)
	for i := range shards {
		shards[i] = make([]byte, size)
		for j := range shards[i] {
			shards[i][j] = byte(rng.Uint32())
		}
	}
	for _, mx := range matrices {
		opts := []reedsolomon.Option{reedsolomon.WithMaxGoroutines(1)}
		if mx.opt != nil {
			opts = append(opts, mx.opt)
		}
		enc, err := reedsolomon.New(k, 1, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encode-group/"+mx.name, func(b *testing.B) {
			b.SetBytes(k * size)
			b.ReportAllocs()
			for b.Loop() {
				if err := enc.Encode(shards); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encodeidx-group/"+mx.name, func(b *testing.B) {
			b.SetBytes(k * size)
			b.ReportAllocs()
			par := shards[k:]
			for b.Loop() {
				clear(par[0])
				for i := range k {
					if err := enc.EncodeIdx(shards[i], i, par); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run("recover-one/"+mx.name, func(b *testing.B) {
			if err := enc.Encode(shards); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(k * size)
			work := make([][]byte, k+1)
			spare := make([]byte, size)
			b.ReportAllocs()
			for b.Loop() {
				copy(work, shards)
				work[3] = spare[:0]
				if err := enc.ReconstructData(work); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkObserve is one loss report through the adaptive rule (once a
// second per lane, on the shard's goroutine). The unnamed case is bursty
// loss, where every candidate (group size, R, depth) is predicted over the
// Gilbert chain (/bursty: the reports this benchmark fed before it had
// sub-benchmarks); /independent and /clean are the cheaper common cases.
func BenchmarkObserve(b *testing.B) {
	run := func(b *testing.B, reps []LossReport) {
		a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		a.SetRTT(50 * time.Millisecond)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			a.Observe(reps[i%2])
		}
	}
	b.Run("bursty", func(b *testing.B) {
		run(b, []LossReport{{Expected: 40000, Received: 38000, Runs: 500}, {Expected: 40000, Received: 39600, Runs: 300}})
	})
	b.Run("independent", func(b *testing.B) {
		run(b, []LossReport{{Expected: 40000, Received: 38000, Runs: 2000}, {Expected: 40000, Received: 39600, Runs: 400}})
	})
	b.Run("clean", func(b *testing.B) {
		run(b, []LossReport{{Expected: 40000, Received: 40000}, {Expected: 40000, Received: 40000}})
	})
}

// BenchmarkDecodeRandomLoss is the receiver's cost per symbol pushed under
// 5% independent loss of every symbol, data and parity (so each group
// loses a different pattern and a recovery cannot reuse anything): the
// ratios auto mode takes at 5% for a legacy peer (64:15) and with long
// groups (192:28).
func BenchmarkDecodeRandomLoss(b *testing.B) {
	for _, kr := range [][2]int{{64, 15}, {MaxK, 28}} {
		b.Run(ratioName(kr[0], kr[1]), func(b *testing.B) {
			const groups = 256
			all := precomputeWire(b, kr[0], kr[1], groups, 1400, -1)
			rng := rand.New(rand.NewPCG(9, 9))
			var wire []wireSym
			for _, w := range all {
				if rng.Float64() >= 0.05 {
					wire = append(wire, w)
				}
			}
			d := NewDecoder(DecoderConfig{})
			deliver := func([]byte, bool) bool { return true }
			pos, cycle := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				w := wire[pos]
				w.m.Group += uint32(cycle * groups)
				d.Push(w.m, w.b, t0, deliver)
				if pos++; pos == len(wire) {
					pos, cycle = 0, cycle+1
				}
			}
			if d.Stats().Recovered == 0 {
				b.Fatal("nothing recovered")
			}
		})
	}
}

// BenchmarkTickExpiry is what the lane timers pay a decoder whose group
// falls due: 10,000 decoders (a hub's lanes) that each received one
// symbol, ticked once past the group's lifetime, when each finds its group
// to account for and Tick looks over its window. ns/op is per decoder.
func BenchmarkTickExpiry(b *testing.B) {
	const n = 10000
	ds := make([]*Decoder, n)
	now := t0
	for i := range ds {
		ds[i] = NewDecoder(DecoderConfig{})
	}
	deliver := func([]byte, bool) bool { return true }
	sym := []byte("ping")
	g := uint32(0)
	for b.Loop() {
		b.StopTimer()
		g++
		for _, d := range ds {
			d.Push(Meta{Kind: KindData, Group: g, Index: 0, K: 1, R: 0}, sym, now, deliver)
		}
		now = now.Add(DefaultGroupTTL + time.Millisecond)
		b.StartTimer()
		for _, d := range ds {
			d.Tick(now)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/decoder")
}
