// The loss simulator the fec tests share: the real Encoder and Decoder over
// an independent or Gilbert channel, with IMIX or full-size packets, and
// what a run measures (residual loss, overhead, delay).

package fec

import (
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var simTable = flag.Bool("fec.sim", false, "print the full loss-simulation table (docs/BENCHMARKS.md, \"FEC: benchmarks and loss simulation\")")

// imixSize is a 7:4:1 mix of small, medium and full-size inner packets, each
// plus the 24 bytes of AEAD counter and tag the data symbol carries.
func imixSize(i int) int {
	switch i % 12 {
	case 0, 2, 4, 6, 7, 9, 11:
		return 40 + 24
	case 1, 5, 8, 10:
		return 576 + 24
	}
	return 1400 + 24
}

type simResult struct {
	k, r                 int
	p                    float64
	inner, lost          int // inner packets sent, still lost after FEC
	dataBytes, parBytes  int
	dataSyms, paritySyms int
	delays               []int // per recovered packet, in inner packets
}

func (s simResult) residual() float64 { return float64(s.lost) / float64(s.inner) }
func (s simResult) symOverhead() float64 {
	return float64(s.paritySyms) / float64(s.dataSyms)
}
func (s simResult) byteOverhead() float64 { return float64(s.parBytes) / float64(s.dataBytes) }

// delay returns the mean and 99th percentile recovery delay in packets.
func (s simResult) delay() (mean float64, p99 int) {
	if len(s.delays) == 0 {
		return 0, 0
	}
	slices.Sort(s.delays)
	sum := 0
	for _, d := range s.delays {
		sum += d
	}
	return float64(sum) / float64(len(s.delays)), s.delays[len(s.delays)*99/100]
}

// simStep is the simulated time between inner packets: 100k packets/s, so
// that every size class's groups fill before the 5 ms flush timeout for
// K ≤ 32 (the rarest IMIX class, 1 packet in 12, then runs at 8.3k/s).
const simStep = 10 * time.Microsecond

// simulate sends n inner packets through the real Encoder and Decoder over a
// wire that drops each symbol independently with probability p, one every
// simStep.
func simulate(t testing.TB, k, r int, p float64, n int, seed uint64) simResult {
	return simulateBurst(t, k, r, p, 1, n, seed, imixSize)
}

// fullSize is uniform full-size traffic: one size class, so every group's
// symbols are consecutive on the wire.
func fullSize(int) int { return 1400 + 24 }

// simulateBurst is simulate over a Gilbert channel: loss comes in bursts
// of mean length burst (≤ 1: independent loss), with stationary loss p,
// as ResidualLossBurst models it, for inner packets of size(i) bytes. With
// mixed sizes the classes' groups interleave on the wire, so a burst
// spreads over several groups and hurts less than the model predicts for
// consecutive symbols.
func simulateBurst(t testing.TB, k, r int, p, burst float64, n int, seed uint64, size func(int) int) simResult {
	return simRun(t, simConfig{k: k, r: r, p: p, burst: burst, n: n, seed: seed, size: size, step: simStep})
}

// simConfig is one simulation run: K:R, the channel, n inner packets of
// size(i) bytes one every step, and whether groups that close early carry
// the adapter's partial-parity table for this channel (as auto mode does)
// or the full R.
type simConfig struct {
	k, r     int
	p, burst float64
	n        int
	seed     uint64
	size     func(int) int
	step     time.Duration
	partial  bool
}

// gilbertChannel draws, symbol by symbol, whether a Gilbert channel of
// stationary loss p in bursts of mean length burst (≤ 1: independent
// loss) loses it.
func gilbertChannel(rng *rand.Rand, p, burst float64) func() bool {
	bad := rng.Float64() < p
	return func() bool {
		if burst <= 1 {
			return rng.Float64() < p
		}
		lost := bad
		if bad {
			bad = rng.Float64() >= 1/burst
		} else {
			bad = rng.Float64() < min(1, p/burst/(1-p))
		}
		return lost
	}
}

func simRun(t testing.TB, c simConfig) simResult {
	k, r, p, burst, n, seed := c.k, c.r, c.p, c.burst, c.n, c.seed
	rng := rand.New(rand.NewPCG(seed, uint64(k*100+r)))
	lose := gilbertChannel(rng, p, burst)
	e, err := NewEncoder(EncoderConfig{K: k, R: r})
	if err != nil {
		t.Fatal(err)
	}
	if c.partial {
		var tbl [MaxK]uint8
		partialParity(p, burst, ResidualLossBurst(k, r, p, burst), 1, r, tbl[:k], false)
		e.SetPartialParity(tbl[:k])
	}
	d := NewDecoder(DecoderConfig{})
	res := simResult{k: k, r: r, p: p, inner: n}
	got := make([]bool, n)
	wireLost := make([]bool, n)
	sent := 0
	deliver := func(b []byte, _ bool) bool {
		seq := int(binary.BigEndian.Uint64(b))
		if got[seq] {
			t.Fatalf("packet %d delivered twice", seq)
		}
		got[seq] = true
		if wireLost[seq] {
			res.delays = append(res.delays, sent-1-seq)
		}
		return true
	}
	buf := make([]byte, MaxSymbolLen)
	now := t0
	wire := func(m Meta, b []byte) {
		if !lose() {
			d.Push(m, b, now, deliver)
		} else if m.Kind == KindData {
			wireLost[binary.BigEndian.Uint64(b)] = true
		}
	}
	drain := func() {
		for {
			m, b, ok := e.NextParity()
			if !ok {
				return
			}
			res.paritySyms++
			res.parBytes += len(b)
			wire(m, b)
		}
	}
	for i := range n {
		size := c.size(i)
		b := buf[:size]
		binary.BigEndian.PutUint64(b, uint64(i))
		m, err := e.Add(b, now)
		if err != nil {
			t.Fatal(err)
		}
		sent++
		res.dataSyms++
		res.dataBytes += size
		wire(m, b)
		drain()
		now = now.Add(c.step)
		if e.Tick(now) {
			drain()
		}
	}
	e.Flush()
	drain()
	for i := range got {
		if !got[i] {
			res.lost++
		}
	}
	return res
}
