package fec

import (
	"testing"
	"time"
)

// Until a lossy path's bursts are measured (burstSample lost symbols),
// the rule predicts with bursts as long as its deepest interleave
// spreads, whatever the runs of a smaller sample: a first interval that
// lost a few symbols gets depth and the parity bursts need. A peer that
// counts no runs is taken as independent, as before.
func TestAdapterAssumesBurstsUntilMeasured(t *testing.T) {
	first := func(rep LossReport) *Adapter {
		t.Helper()
		a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		if err != nil {
			t.Fatal(err)
		}
		a.SetRTT(50 * time.Millisecond)
		a.Observe(rep)
		return a
	}
	// 8 of 240 lost in 4 runs (within groups MaxDepth apart): bursty as
	// far as it shows, and too few to measure.
	a := first(LossReport{Expected: 240, Received: 232, Runs: 4})
	b, ok := a.Burst()
	if ok || b < unknownBurst {
		t.Fatalf("8 lost in 4 runs: burst %v (measured %v), want at least %v assumed", b, ok, unknownBurst)
	}
	k, r := a.Ratio()
	p, _ := a.Loss()
	if a.Depth() != MaxDepth {
		t.Fatalf("bursts assumed, %d:%d at depth %d, want the deepest", k, r, a.Depth())
	}
	// What the same interval got rated as independent loss (a peer that
	// counts no runs): a group the assumed bursts take far more often.
	ind := first(LossReport{Expected: 240, Received: 232})
	if b, ok := ind.Burst(); ok || b != 1 || ind.Depth() != 1 {
		t.Fatalf("no runs: burst %v (measured %v), depth %d; want independent", b, ok, ind.Depth())
	}
	k1, r1 := ind.Ratio()
	got := ResidualLossBurst(k, r, p, spacedBurst(p, b, a.Depth()))
	if was := ResidualLossBurst(k1, r1, p, b); got > was/10 {
		t.Fatalf("%d:%d x%d predicts %v under the assumed bursts of %v, no better than %d:%d (%v)", k, r, a.Depth(), got, b, k1, r1, was)
	}

	// 8 lost in 8 runs, or 30 in 30 (at depth 4, fewer than
	// burstSample): the same assumption, the same choice.
	for _, rep := range []LossReport{{Expected: 240, Received: 232, Runs: 8}, {Expected: 900, Received: 870, Runs: 30}} {
		a = first(rep)
		if b, ok := a.Burst(); ok || b != unknownBurst {
			t.Fatalf("%+v: burst %v (measured %v), want %v assumed", rep, b, ok, unknownBurst)
		}
		if a.Depth() != MaxDepth {
			t.Fatalf("%+v: depth %d on bursts assumed, want the deepest", rep, a.Depth())
		}
	}

	// Enough lost to measure: the measurement, not the assumption.
	a = first(LossReport{Expected: 1000, Received: 950, Runs: 50})
	if b, ok := a.Burst(); !ok || b > 1.2 {
		t.Fatalf("50 lost one by one: burst %v (measured %v)", b, ok)
	}
}

// A sample of runs counted at one depth goes on at another as the same
// channel's: bursts of 4 on the wire, counted whole at depth 1, are runs
// of about 1.5 within groups 4 apart, and back.
func TestLossReportRespaced(t *testing.T) {
	r := LossReport{Expected: 20000, Received: 19000, Runs: 250} // 5% in runs of 4
	d4 := r.respaced(1, 4)
	want := spacedBurst(0.05, 4, 4)
	if got := d4.Burst(); got < want*0.99 || got > want*1.01 || d4.Expected != r.Expected || d4.Received != r.Received {
		t.Fatalf("respaced to depth 4: %+v, runs of %v, want %v", d4, got, want)
	}
	if back := d4.respaced(4, 1); back.Runs < 248 || back.Runs > 252 {
		t.Fatalf("and back: %+v", back)
	}
	if same := r.respaced(2, 2); same != r {
		t.Fatalf("same depth: %+v", same)
	}
	one := LossReport{Expected: 100, Received: 99, Runs: 1}
	if got := one.respaced(1, 4); got.Runs != 1 {
		t.Fatalf("one lost: %+v", got)
	}
	if none := (LossReport{Expected: 100, Received: 100}).respaced(1, 4); none.Runs != 0 {
		t.Fatalf("none lost: %+v", none)
	}
}

// The runs of a report split by the queue took in the queue's overflows,
// which lengthen them: they bound the channel's bursts from above, so
// they may lower the estimate, never raise it.
func TestAdapterSplitRunsOnlyLower(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	a.SetPath(PathClear)
	for range 6 {
		a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 250}) // runs of 4
	}
	high, ok := a.Burst()
	if !ok || high < 3 {
		t.Fatalf("runs of 4 on a clear path: burst %v (measured %v)", high, ok)
	}
	a.SetPath(PathSplit)
	for range 6 {
		a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 50}) // runs of 20
	}
	if b, _ := a.Burst(); b != high {
		t.Fatalf("split reports' long runs moved the estimate from %v to %v", high, b)
	}
	for range 6 {
		a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 950}) // one by one
	}
	if b, _ := a.Burst(); b > 1 {
		t.Fatalf("split reports losing one by one left the estimate at %v", b)
	}
}

// Under a queue that stands from the start every report is split, and
// runs lengthened by its overflows measure nothing: after assumeReports
// of them the rule stops assuming bursts and sizes for independent loss.
func TestAdapterAssumptionEndsUnderStandingQueue(t *testing.T) {
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	a.SetRTT(50 * time.Millisecond)
	a.SetPath(PathSplit)
	rep := LossReport{Expected: 20000, Received: 19000, Runs: 100} // runs of 10
	for i := range assumeReports {
		// (Before any loss is acted on, Burst says independent.)
		if b, ok := a.Burst(); i > 0 && (ok || b != unknownBurst) {
			t.Fatalf("after %d split reports: burst %v (measured %v), want %v assumed", i, b, ok, unknownBurst)
		}
		a.Observe(rep)
	}
	if b, ok := a.Burst(); ok || b != 1 {
		t.Fatalf("after %d split reports: burst %v (measured %v), want independent", assumeReports, b, ok)
	}
	if k, r := a.Observe(rep); a.Depth() != 1 || float64(r)/float64(k) > 0.25 {
		t.Fatalf("independent loss of 5%%: %d:%d at depth %d", k, r, a.Depth())
	}
	// Shorter runs, still lengthened by the queue, do not bring bursts
	// back once the assumption ended.
	for range 6 {
		a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 400}) // runs of 2.5
	}
	if b, ok := a.Burst(); ok || b != 1 {
		t.Fatalf("split runs of 2.5 after the assumption ended: burst %v (measured %v)", b, ok)
	}
}

// A report without runs (a peer that has not heard our features yet
// sends the short one) rates that loss independent; the next with runs
// brings the assumption back and measures.
func TestAdapterNoRunsOnlyForThatReport(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	a.Observe(LossReport{Expected: 20000, Received: 19000})
	if b, ok := a.Burst(); ok || b != 1 {
		t.Fatalf("a report without runs: burst %v (measured %v), want independent", b, ok)
	}
	a.Observe(LossReport{Expected: 300, Received: 295, Runs: 2})
	if b, ok := a.Burst(); ok || b != unknownBurst {
		t.Fatalf("then one with runs, too few to measure: burst %v (measured %v), want %v assumed", b, ok, unknownBurst)
	}
	for range 4 {
		a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 250}) // runs of 4
	}
	if b, ok := a.Burst(); !ok || b < 3 {
		t.Fatalf("then runs of 4: burst %v (measured %v)", b, ok)
	}
}

// A new path's bursts are assumed until measured: the old path's say
// nothing of it.
func TestAdapterNewPathForgetsBursts(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	for range 4 {
		a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 950})
	}
	if b, ok := a.Burst(); !ok || b != 1 {
		t.Fatalf("independent loss: burst %v (measured %v)", b, ok)
	}
	a.NewPath()
	if b, ok := a.Burst(); ok || b != unknownBurst {
		t.Fatalf("after NewPath: burst %v (measured %v), want %v assumed", b, ok, unknownBurst)
	}
}
