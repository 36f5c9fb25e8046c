// Simulations at a fixed K:R: the loss target, the simulator against the
// loss model, size classes' byte overhead, and the tables of
// docs/BENCHMARKS.md (printed with -fec.sim).

package fec

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const targetLoss, targetOverhead = 0.002, 0.25

// TestLossSimulationTarget asserts the target (residual loss targetLoss)
// with the smallest group that meets it at ≤25% overhead (12:3; 8:2 does
// not, see the loss simulation in docs/BENCHMARKS.md) and with what auto
// mode picks at 5% loss.
func TestLossSimulationTarget(t *testing.T) {
	n := 200000
	if testing.Short() || raceEnabled {
		n = 60000
	}
	a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	ak, ar := a.Observe(LossReport{Expected: 100000, Received: 95000})
	for _, kr := range [][2]int{{12, 3}, {ak, ar}} {
		res := simulate(t, kr[0], kr[1], 0.05, n, 1)
		t.Logf("%d:%d at 5%%: post-FEC loss %.3f%%, overhead %.1f%% symbols", kr[0], kr[1], 100*res.residual(), 100*res.symOverhead())
		if res.symOverhead() > targetOverhead*1.001 {
			t.Errorf("%d:%d overhead %.3f over %.2f", kr[0], kr[1], res.symOverhead(), targetOverhead)
		}
		if res.residual() > targetLoss {
			t.Errorf("%d:%d at 5%% loss: post-FEC loss %.4f, target ≤ %.4f", kr[0], kr[1], res.residual(), targetLoss)
		}
	}
}

// TestLossSimulationMatchesModel checks the simulator against the closed
// form the adaptive rule uses, so neither can silently drift.
func TestLossSimulationMatchesModel(t *testing.T) {
	res := simulate(t, 8, 2, 0.10, 60000, 2)
	want := ResidualLoss(8, 2, 0.10)
	if got := res.residual(); got < want*0.8 || got > want*1.2 {
		t.Fatalf("8:2 at 10%%: simulated %.4f, model %.4f", got, want)
	}
	// Bursty loss (mean burst 4) on one size class: the chain model
	// against the channel, and bursts hurt a group that independent loss
	// of the same rate would not.
	for _, kr := range [][2]int{{16, 4}, {32, 8}} {
		res := simulateBurst(t, kr[0], kr[1], 0.05, 4, 100000, 3, fullSize)
		want := ResidualLossBurst(kr[0], kr[1], 0.05, 4)
		if got := res.residual(); got < want*0.75 || got > want*1.25 {
			t.Errorf("%d:%d at 5%% in bursts of 4: simulated %.4f, model %.4f", kr[0], kr[1], got, want)
		}
		if ind := ResidualLoss(kr[0], kr[1], 0.05); want < 3*ind {
			t.Errorf("%d:%d: bursts predict %.2g, independent loss %.2g", kr[0], kr[1], want, ind)
		}
	}
	if a, b := ResidualLossBurst(16, 4, 0.05, 1), ResidualLoss(16, 4, 0.05); a != b {
		t.Fatalf("burst 1 is independent loss: %g vs %g", a, b)
	}
}

// TestLossSimulationTable prints the loss-simulation table of
// docs/BENCHMARKS.md:
//
//	go test -count=1 -cpu 1 -run TestLossSimulationTable -v ./fec/ -args -fec.sim
func TestLossSimulationTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the simulation table")
	}
	ratios := [][2]int{{4, 1}, {8, 1}, {16, 1}, {8, 2}, {10, 2}, {12, 2}, {16, 2}, {12, 3}, {16, 3}, {16, 4}, {20, 4}, {32, 5}, {32, 8}, {32, 11}, {32, 16}}
	var sb strings.Builder
	sb.WriteString("| K:R | overhead (symbols) | overhead (bytes, IMIX) | loss | post-FEC loss | model | delay mean / p99 (pkts) | mean ms @10k pps | mean ms @100k pps | meets 5% target |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, kr := range ratios {
		for _, p := range []float64{0.01, 0.05, 0.10} {
			res := simulate(t, kr[0], kr[1], p, 200000, 3)
			mean, p99 := res.delay()
			meets := ""
			if p == 0.05 {
				meets = "no"
				if res.residual() <= targetLoss && res.symOverhead() <= targetOverhead*1.001 {
					meets = "**yes**"
				}
			}
			fmt.Fprintf(&sb, "| %d:%d | %.1f%% | %.1f%% | %.0f%% | %.3f%% | %.3f%% | %.1f / %d | %.2f | %.3f | %s |\n",
				kr[0], kr[1], 100*res.symOverhead(), 100*res.byteOverhead(), 100*p,
				100*res.residual(), 100*ResidualLoss(kr[0], kr[1], p),
				mean, p99, mean/10, mean/100, meets)
		}
	}
	t.Log("\n" + sb.String())
}

// TestAdaptiveChoiceTable prints what auto mode settles on for steady wire
// loss, without and with a known round-trip time (docs/BENCHMARKS.md,
// "Adaptive rule"):
//
//	go test -count=1 -run TestAdaptiveChoiceTable -v ./fec/ -args -fec.sim
func TestAdaptiveChoiceTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the table")
	}
	rtts := []time.Duration{0, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond}
	var sb strings.Builder
	sb.WriteString("| wire loss |")
	for _, rtt := range rtts {
		if rtt == 0 {
			sb.WriteString(" RTT unknown |")
		} else {
			fmt.Fprintf(&sb, " RTT %s |", rtt)
		}
	}
	sb.WriteString("\n|---|")
	sb.WriteString(strings.Repeat("---|", len(rtts)))
	sb.WriteString("\n| target |")
	for _, rtt := range rtts {
		a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		a.SetRTT(rtt)
		fmt.Fprintf(&sb, " %.1g |", a.Target())
	}
	sb.WriteString("\n")
	for _, p := range []float64{0, 0.001, 0.01, 0.02, 0.05, 0.10, 0.20} {
		fmt.Fprintf(&sb, "| %g%% |", 100*p)
		for _, rtt := range rtts {
			a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
			a.SetRTT(rtt)
			var k, r int
			for range 10 {
				k, r = a.Observe(LossReport{Expected: 100000, Received: uint32(100000 * (1 - p))})
			}
			fmt.Fprintf(&sb, " %d:%d (%.0f%%) → %.0e |", k, r, 100*float64(r)/float64(k), ResidualLoss(k, r, p))
		}
		sb.WriteString("\n")
	}
	t.Log("\n" + sb.String())
}

// TestBurstSimulationTable prints the bursty-loss table of
// docs/BENCHMARKS.md: independent against Gilbert loss (mean burst 4) at
// 5%, simulated and modelled, and what auto mode settles on at 50 ms RTT
// when the loss reports carry runs:
//
//	go test -count=1 -run TestBurstSimulationTable -v ./fec/ -args -fec.sim
func TestBurstSimulationTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the table")
	}
	var sb strings.Builder
	sb.WriteString("| K:R | parity | 5% independent: simulated / model | 5% in bursts of 4: simulated / model |\n|---|---|---|---|\n")
	for _, kr := range [][2]int{{16, 4}, {16, 8}, {32, 8}, {32, 11}, {32, 16}} {
		ind := simulate(t, kr[0], kr[1], 0.05, 400000, 5)
		bur := simulateBurst(t, kr[0], kr[1], 0.05, 4, 400000, 5, fullSize)
		fmt.Fprintf(&sb, "| %d:%d | %.0f%% | %.2g / %.2g | %.2g / %.2g |\n", kr[0], kr[1], 100*float64(kr[1])/float64(kr[0]),
			ind.residual(), ResidualLoss(kr[0], kr[1], 0.05), bur.residual(), ResidualLossBurst(kr[0], kr[1], 0.05, 4))
	}
	sb.WriteString("\n| wire loss | burst 1 | burst 2 | burst 4 | burst 8 |\n|---|---|---|---|---|\n")
	for _, p := range []float64{0.01, 0.05} {
		fmt.Fprintf(&sb, "| %g%% |", 100*p)
		for _, b := range []float64{1, 2, 4, 8} {
			a, _ := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
			a.SetRTT(50 * time.Millisecond)
			lost := uint32(100000 * p)
			var k, r int
			for range 10 {
				// The peer counts runs within groups: at the depth in force.
				rep := LossReport{Expected: 100000, Received: 100000 - lost, Runs: uint32(float64(lost) / spacedBurst(p, b, a.Depth()))}
				k, r = a.Observe(rep)
			}
			fmt.Fprintf(&sb, " %d:%d x%d (%.0f%%) → %.0e |", k, r, a.Depth(), 100*float64(r)/float64(k), ResidualLossBurst(k, r, p, spacedBurst(p, b, a.Depth())))
		}
		sb.WriteString("\n")
	}
	t.Log("\n" + sb.String())
}

// TestSizeClassByteOverhead asserts the size classes' target on IMIX
// traffic whose groups fill: parity bytes cost at most 5 points more than
// parity symbols, at no more post-FEC loss than the model predicts for the
// same K:R on one class.
func TestSizeClassByteOverhead(t *testing.T) {
	n := 200000
	if testing.Short() || raceEnabled {
		n = 50000
	}
	for _, kr := range [][2]int{{12, 3}, {16, 4}, {32, 8}} {
		res := simulate(t, kr[0], kr[1], 0.05, n, 4)
		model := ResidualLoss(kr[0], kr[1], 0.05)
		t.Logf("%d:%d at 5%%: %.1f%% symbols, %.1f%% bytes, post-FEC %.3f%% (model %.3f%%)",
			kr[0], kr[1], 100*res.symOverhead(), 100*res.byteOverhead(), 100*res.residual(), 100*model)
		if res.byteOverhead() > res.symOverhead()+0.05 {
			t.Errorf("%d:%d: byte overhead %.1f%% over symbol overhead %.1f%% + 5 points", kr[0], kr[1], 100*res.byteOverhead(), 100*res.symOverhead())
		}
		if res.residual() > 1.25*model+20/float64(n) {
			t.Errorf("%d:%d: post-FEC loss %.4f%%, model %.4f%%", kr[0], kr[1], 100*res.residual(), 100*model)
		}
	}
}

// TestSizeClassTable prints the size-class table of docs/BENCHMARKS.md:
// IMIX at a rate where every class's groups fill (100k packets/s) and at
// one where the rarest class's groups close on the flush timeout (10k/s),
// the latter with full R on such groups and with the adapter's partial
// parity table:
//
//	go test -count=1 -run TestSizeClassTable -v ./fec/ -args -fec.sim
func TestSizeClassTable(t *testing.T) {
	if !*simTable {
		t.Skip("run with -fec.sim to print the table")
	}
	var sb strings.Builder
	sb.WriteString("| K:R | loss | IMIX rate | early groups get | overhead (symbols) | overhead (bytes) | post-FEC loss | model (full groups) |\n|---|---|---|---|---|---|---|---|\n")
	for _, kr := range [][2]int{{12, 3}, {16, 4}, {32, 8}, {32, 11}} {
		for _, p := range []float64{0.01, 0.05} {
			for _, rc := range []struct {
				step    time.Duration
				partial bool
			}{{simStep, false}, {100 * time.Microsecond, false}, {100 * time.Microsecond, true}} {
				res := simRun(t, simConfig{k: kr[0], r: kr[1], p: p, burst: 1, n: 200000, seed: 6, size: imixSize, step: rc.step, partial: rc.partial})
				early := "R"
				if rc.partial {
					early = "table"
				}
				fmt.Fprintf(&sb, "| %d:%d | %.0f%% | %.0fk/s | %s | %.1f%% | %.1f%% | %.3f%% | %.3f%% |\n", kr[0], kr[1], 100*p,
					float64(time.Second/rc.step)/1000, early, 100*res.symOverhead(), 100*res.byteOverhead(), 100*res.residual(), 100*ResidualLoss(kr[0], kr[1], p))
			}
		}
	}
	t.Log("\n" + sb.String())
}
