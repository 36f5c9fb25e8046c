package crypto

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/reedsolomon"
)

// The wire must look random to anyone without keys (DESIGN §5). These tests
// collect 20,000 datagrams of each kind and run a chi-square test of
// uniformity on each of the first 32 byte positions. They are statistical
// and single-goroutine per kind, so `make test` runs them without -race.

const (
	uniformSamples   = 20000
	uniformPositions = 32
	// A position fails if its chi-square (255 degrees of freedom) has a
	// Wilson–Hilferty z-score above this: p ≈ 3e-7 per position, so the
	// 160 positions tested give a false alarm about once in 20,000 runs.
	// A single constant bit gives z ≈ 60.
	uniformMaxZ = 5.0
)

// chiSquareZ returns, per byte position, the z-score of the chi-square
// statistic of the byte values at that position across samples.
func chiSquareZ(samples [][]byte, positions int) []float64 {
	zs := make([]float64, positions)
	for p := range positions {
		var counts [256]float64
		n := 0.0
		for _, s := range samples {
			if p < len(s) {
				counts[s[p]]++
				n++
			}
		}
		exp := n / 256
		chi := 0.0
		for _, c := range counts {
			chi += (c - exp) * (c - exp) / exp
		}
		k := 255.0
		zs[p] = (math.Cbrt(chi/k) - (1 - 2/(9*k))) / math.Sqrt(2/(9*k))
	}
	return zs
}

func worstZ(samples [][]byte) (int, float64) {
	zs := chiSquareZ(samples, uniformPositions)
	worst := 0
	for i, z := range zs {
		if z > zs[worst] {
			worst = i
		}
	}
	return worst, zs[worst]
}

// realisticPacket returns an inner IPv4 packet with the constant-heavy
// header a real one has; only its length and a few fields vary.
func realisticPacket(rng *rand.Rand) []byte {
	n := 40 + rng.IntN(1360)
	if rng.IntN(3) == 0 {
		n = 40 + rng.IntN(24) // many TCP ACKs
	}
	p := make([]byte, n)
	p[0], p[8], p[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(p[2:], uint16(n))
	copy(p[12:20], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	return p
}

func dataDatagrams(rng *rand.Rand, n int) (data, parity, unmasked [][]byte) {
	k := testLaneKeys(9)
	s, f := NewSealer(&k.AEAD), NewFramer(&k)
	enc, _ := reedsolomon.New(4, 2)
	group := uint32(rng.Uint32())
	for len(data) < n || len(parity) < n {
		// One FEC group of 4 data symbols and 2 parity symbols, coded the
		// way the fec package codes them: 2-byte length ‖ symbol,
		// zero-extended to the longest. Parity of sequential counters and
		// small lengths is the most structured payload the wire carries.
		shards := make([][]byte, 6)
		maxLen := 0
		for i := range 4 {
			pt := realisticPacket(rng)
			buf := make([]byte, HeaderLen+SymbolOverhead+len(pt)+TagLen)
			copy(buf[HeaderLen+CounterLen:], pt)
			sym, _ := s.SealSymbol(buf[HeaderLen:], nil, buf[HeaderLen+CounterLen:HeaderLen+CounterLen+len(pt)])
			shard := binary.BigEndian.AppendUint16(nil, uint16(len(sym)))
			shards[i] = append(shard, sym...)
			maxLen = max(maxLen, len(shards[i]))
			d := f.Frame(buf, Header{Kind: KindData, Group: group, Index: uint8(i), K: 4, R: 2}, len(sym))
			data = append(data, d)
		}
		for i := range shards {
			if i < 4 {
				shards[i] = append(shards[i], make([]byte, maxLen-len(shards[i]))...)
			} else {
				shards[i] = make([]byte, maxLen)
			}
		}
		if err := enc.Encode(shards); err != nil {
			panic(err)
		}
		for i := 4; i < 6; i++ {
			buf := make([]byte, HeaderLen+maxLen+TagLen)
			copy(buf[HeaderLen:], shards[i])
			d := f.Frame(buf, Header{Kind: KindParity, Group: group, Index: uint8(i), K: 4, R: 2}, maxLen)
			parity = append(parity, d)
			// Keep an unmasked copy to show the test sees structure.
			c := append([]byte(nil), d...)
			if _, _, err := f.Deframe(c); err != nil {
				panic(err)
			}
			unmasked = append(unmasked, c)
		}
		group++
	}
	return data[:n], parity[:n], unmasked
}

func handshakeDatagrams(t *testing.T, n int) (inits, resps, cookies [][]byte) {
	// Two independent party pairs, one per core.
	const workers = 2
	type out struct{ i, r, c [][]byte }
	outs := make([]out, workers)
	var wg sync.WaitGroup
	for w := range workers {
		p := newParties(t, PresharedKey{}, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := NewCookieChecker()
			src := netip.MustParseAddrPort("192.0.2.7:40000")
			for i := range n / workers {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				_, d1, err := p.a.Initiate(p.pa, uint32(i), offer(1+i%8, 5000), now)
				if err != nil {
					panic(err)
				}
				inc, err := p.b.ConsumeInitiation(d1)
				if err != nil {
					panic(err)
				}
				d2, _, err := inc.Respond(uint32(i), offer(1+i%4, 6000))
				if err != nil {
					panic(err)
				}
				c, err := p.b.CookieReply(d1, cc, src, now)
				if err != nil {
					panic(err)
				}
				outs[w].i = append(outs[w].i, d1)
				outs[w].r = append(outs[w].r, d2)
				outs[w].c = append(outs[w].c, c)
			}
		}()
	}
	wg.Wait()
	for _, o := range outs {
		inits, resps, cookies = append(inits, o.i...), append(resps, o.r...), append(cookies, o.c...)
	}
	return
}

func TestUniformityWire(t *testing.T) {
	if raceEnabled {
		t.Skip("statistical test: run without -race (make uniformity)")
	}
	if testing.Short() {
		t.Skip("statistical test: skipped in -short mode")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	data, parity, unmasked := dataDatagrams(rng, uniformSamples)
	inits, resps, cookies := handshakeDatagrams(t, uniformSamples)
	kinds := []struct {
		name string
		d    [][]byte
	}{{"data", data}, {"parity", parity}, {"initiation", inits}, {"response", resps}, {"cookie reply", cookies}}
	for _, k := range kinds {
		if len(k.d) != uniformSamples {
			t.Fatalf("%s: %d samples", k.name, len(k.d))
		}
		pos, z := worstZ(k.d)
		t.Logf("%-12s worst position %2d z=%.2f", k.name, pos, z)
		if z > uniformMaxZ {
			t.Errorf("%s: byte position %d is distinguishable from uniform (chi-square z=%.1f)", k.name, pos, z)
		}
		lens := map[int]int{}
		for _, d := range k.d {
			lens[len(d)]++
		}
		if len(lens) < 16 {
			t.Errorf("%s: only %d distinct lengths", k.name, len(lens))
		}
	}
	// The same test must see the structure that the mask hides.
	if pos, z := worstZ(unmasked); z < 50 {
		t.Errorf("unmasked parity looks uniform (worst position %d z=%.1f): the test cannot detect structure", pos, z)
	}
}

// TestUniformityDetectsTopBit shows the test would catch the Noise
// ephemeral key's top bit left at zero, if the mask did not cover it.
func TestUniformityDetectsTopBit(t *testing.T) {
	s := make([][]byte, uniformSamples)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range s {
		b := make([]byte, uniformPositions)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		b[17] &= 0x7f
		s[i] = b
	}
	if pos, z := worstZ(s); pos != 17 || z < uniformMaxZ {
		t.Fatalf("a constant bit at position 17 was not found (worst %d z=%.1f)", pos, z)
	}
	for i := range s {
		s[i][17] |= byte(rng.Uint32()) & 0x80
	}
	if pos, z := worstZ(s); z > uniformMaxZ {
		t.Fatalf("random bytes flagged at position %d z=%.1f", pos, z)
	}
}
