// Tests of the loss model (residual.go): hand-computed residuals, the
// chain's one pass against the chain written out plainly, the TCP target,
// spaced bursts, and the parity of early-closing groups.

package fec

import (
	"math"
	"testing"
	"time"
)

func TestResidualLoss(t *testing.T) {
	// Hand-computed: 1:1 fails only if both are lost, losing the one data
	// symbol: residual = p²·2/2.
	if got := ResidualLoss(1, 1, 0.1); math.Abs(got-0.01) > 1e-12 {
		t.Fatalf("ResidualLoss(1,1,0.1) = %v, want 0.01", got)
	}
	// With R=0 the residual is the wire loss itself.
	if got := ResidualLoss(8, 0, 0.05); math.Abs(got-0.05) > 1e-12 {
		t.Fatalf("ResidualLoss(8,0,0.05) = %v, want 0.05", got)
	}
	if ResidualLoss(16, 4, 0.05) >= ResidualLoss(16, 3, 0.05) {
		t.Fatal("more parity must not predict more loss")
	}
}

// TCPResidual: what one flow tolerates falls with the round-trip time
// (CUBIC's ¾ power at long RTTs, Reno's square at short ones).
func TestTCPResidual(t *testing.T) {
	for _, c := range []struct {
		rtt    time.Duration
		lo, hi float64
	}{
		{time.Millisecond, 1.5e-4, 2e-4},     // Reno-friendly region
		{50 * time.Millisecond, 6e-7, 8e-7},  // CUBIC region
		{200 * time.Millisecond, 4e-7, 5e-7}, // CUBIC: ∝ RTT^(-1/3)
	} {
		if got := TCPResidual(c.rtt); got < c.lo || got > c.hi {
			t.Errorf("TCPResidual(%s) = %g, want %g..%g", c.rtt, got, c.lo, c.hi)
		}
	}
	prev := 1.0
	for rtt := 100 * time.Microsecond; rtt < time.Second; rtt *= 2 {
		got := TCPResidual(rtt)
		if got > prev {
			t.Fatalf("TCPResidual rose from %g to %g at %s", prev, got, rtt)
		}
		prev = got
	}
}

// naiveBurst is the Gilbert chain written out plainly, one K:R at a time,
// with maps: the distribution of lost symbols over (state, lost) symbol by
// symbol.
func naiveBurst(k, r int, p, burst float64) float64 {
	n := k + r
	leave := 1 / burst
	enter := p * leave / (1 - p)
	g := map[int]float64{0: 1 - p}
	b := map[int]float64{1: p}
	for i := 1; i < n; i++ {
		ng, nb := map[int]float64{}, map[int]float64{}
		for x, v := range g {
			ng[x] += v * (1 - enter)
			nb[x+1] += v * enter
		}
		for x, v := range b {
			ng[x] += v * leave
			nb[x+1] += v * (1 - leave)
		}
		g, b = ng, nb
	}
	sum := 0.0
	for x := r + 1; x <= n; x++ {
		sum += (g[x] + b[x]) * float64(x) / float64(n)
	}
	return sum
}

// The chain's one pass per K gives, for every R, what the chain written
// out plainly for that K:R gives.
func TestResidualsOnePass(t *testing.T) {
	out := make([]float64, 17)
	residuals(32, 0.05, 4, out)
	for r, v := range out {
		if w := naiveBurst(32, r, 0.05, 4); math.Abs(v-w) > 1e-12 {
			t.Fatalf("32:%d: one pass %g, plain chain %g", r, v, w)
		}
	}
	if out[16] >= out[8] || out[8] >= out[1] {
		t.Fatalf("more parity must predict less loss: %v", out)
	}
}

// spacedBurst and wireBurst are inverses, spacing shortens bursts, and an
// independent channel stays independent.
func TestSpacedBurst(t *testing.T) {
	for _, b := range []float64{1.5, 4, 10} {
		for _, d := range []int{2, 4} {
			s := spacedBurst(0.05, b, d)
			if s >= b || s < 1 {
				t.Errorf("burst %g at depth %d: %g", b, d, s)
			}
			if w := wireBurst(0.05, s, d); math.Abs(w-b) > 1e-9*b {
				t.Errorf("burst %g at depth %d: back to %g", b, d, w)
			}
		}
	}
	if s := spacedBurst(0.05, 1/(1-0.05), 4); math.Abs(s-1/(1-0.05)) > 1e-9 {
		t.Errorf("independent loss at depth 4: burst %g", s)
	}
}

// On a sparse lane an early-closing group of n data symbols gets at most n
// parity (one per data symbol) whatever the loss, unless MinR asks for
// more.
func TestPartialParityAtMostOnePerSymbol(t *testing.T) {
	for _, p := range []float64{0, 0.01, 0.05, 0.2, 0.5} {
		for _, minR := range []int{1, 2} {
			out := make([]uint8, MaxK)
			partialParity(p, 1, 1e-7, minR, 16, out, true)
			for n := 1; n < len(out); n++ {
				if int(out[n]) > max(n, minR) || int(out[n]) < minR {
					t.Fatalf("p %.2f minR %d: %d parity for %d data symbols", p, minR, out[n], n)
				}
			}
		}
	}
	// A busy lane's early groups (a burst's tail) keep what the loss needs.
	out := make([]uint8, MaxK)
	partialParity(0.2, 1, 1e-7, 1, 16, out, false)
	if out[1] <= 1 {
		t.Fatalf("busy lane at 20%% loss: %d parity for a group of 1", out[1])
	}
}
