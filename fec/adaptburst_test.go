package fec

import (
	"math"
	"math/rand/v2"
	"slices"
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

	// Enough lost to measure bursts (burstSample), but not to end the
	// assumption for independent loss (twice that): still assumed.
	a = first(LossReport{Expected: 1000, Received: 950, Runs: 50})
	if b, ok := a.Burst(); ok || b != unknownBurst {
		t.Fatalf("50 lost one by one, 4 deep: burst %v (measured %v), want %v assumed", b, ok, unknownBurst)
	}
	// Enough lost to measure: the measurement, not the assumption.
	a = first(LossReport{Expected: 2000, Received: 1900, Runs: 100})
	if b, ok := a.Burst(); !ok || b > 1.2 {
		t.Fatalf("100 lost one by one: burst %v (measured %v)", b, ok)
	}
	a = first(LossReport{Expected: 1000, Received: 950, Runs: 20})
	if b, ok := a.Burst(); !ok || b < 3 {
		t.Fatalf("50 lost in runs of 2.5, 4 deep: burst %v (measured %v), want bursts measured", b, ok)
	}
}

// While bursts are assumed, a sample reads independent loss only over
// twice burstSample: of 40 lost symbols 4 deep on a channel losing 5% in
// bursts of 4, one sample in twenty read as independent loss, and the
// rule left the interleave for large groups the bursts took whole.
func TestAdapterAssumptionEndsOnEnoughIndependentLoss(t *testing.T) {
	const seeds = 1000
	for _, c := range []struct {
		p, burst   float64
		mostIndep  int // of seeds read as independent loss
		leastIndep int
	}{
		{0.05, 4, 5, 0},
		{0.01, 4, 5, 0},
		{0.05, 1, seeds, seeds * 95 / 100},
		{0.01, 1, seeds, seeds * 95 / 100},
	} {
		indep := 0
		for seed := range uint64(seeds) {
			a := &Adapter{d: MaxDepth}
			var pend runSample
			pend.add(interleavedReport(seed, c.p, c.burst, MaxDepth, 60, burstSample(MaxDepth)), MaxDepth)
			b, ok := a.sample(&pend)
			for i := uint64(1); !ok; i++ {
				if i > 4 {
					t.Fatalf("%+v: no sample after %d reports of %d lost", c, i, burstSample(MaxDepth))
				}
				pend.add(interleavedReport(seed+i*seeds, c.p, c.burst, MaxDepth, 60, burstSample(MaxDepth)), MaxDepth)
				b, ok = a.sample(&pend)
			}
			if b <= burstyAbove {
				indep++
			}
		}
		if indep > c.mostIndep || indep < c.leastIndep {
			t.Errorf("loss %.0f%% in bursts of %v, 4 deep, assumed: %d of %d samples read independent, want %d..%d", 100*c.p, c.burst, indep, seeds, c.leastIndep, c.mostIndep)
		}
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
	observeN(a, 6, LossReport{Expected: 20000, Received: 19000, Runs: 250}) // runs of 4
	high, ok := a.Burst()
	if !ok || high < 3 {
		t.Fatalf("runs of 4 on a clear path: burst %v (measured %v)", high, ok)
	}
	a.SetPath(PathSplit)
	observeN(a, 6, LossReport{Expected: 20000, Received: 19000, Runs: 50}) // runs of 20
	if b, _ := a.Burst(); b != high {
		t.Fatalf("split reports' long runs moved the estimate from %v to %v", high, b)
	}
	observeN(a, 6, LossReport{Expected: 20000, Received: 19000, Runs: 950}) // one by one
	if b, _ := a.Burst(); b > 1 {
		t.Fatalf("split reports losing one by one left the estimate at %v", b)
	}
}

// Split reports' runs (a flow's start-up overshoot in them) only bound
// the bursts: the first clear report's sample replaces that bound rather
// than meeting it halfway, and later clear samples move the estimate
// halfway as before.
func TestAdapterClearSampleReplacesSplitBound(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	a.SetPath(PathSplit)
	// Until the first sample: the rule then interleaves less deep, where
	// these runs would read shorter bursts.
	for range 5 {
		// Runs of 1.2 within groups 4 deep (the assumption's): wire
		// bursts of 2.7.
		a.Observe(LossReport{Expected: 20000, Received: 19800, Runs: 166})
		if _, ok := a.Burst(); ok {
			break
		}
	}
	bound, ok := a.Burst()
	if !ok || bound < 2 || bound >= unknownBurst {
		t.Fatalf("split runs of 1.2 at depth 4 while assumed: burst %v (measured %v), want a bound below the assumption", bound, ok)
	}
	a.SetPath(PathClear)
	observeN(a, 4, LossReport{Expected: 20000, Received: 19800, Runs: 200}) // one by one
	if b, _ := a.Burst(); b > 1 {
		t.Fatalf("clear reports losing one by one after a split bound of %v: burst %v", bound, b)
	}
	observeN(a, 4, LossReport{Expected: 20000, Received: 19800, Runs: 50})
	if b, _ := a.Burst(); b < 2 {
		t.Fatalf("clear runs of 4 after independent loss: burst %v", b)
	}
	high, _ := a.Burst()
	for range 4 { // until a sample is taken (a change of depth leaves two reports out)
		a.Observe(LossReport{Expected: 20000, Received: 19800, Runs: 200})
		if b, _ := a.Burst(); b != high {
			if b < (high+1)/2-0.1 {
				t.Fatalf("one clear sample of independent loss after bursts of %v: burst %v, want it moved halfway", high, b)
			}
			return
		}
	}
	t.Fatalf("clear samples of independent loss left bursts of %v", high)
}

// A queue judged by the round trip (no split yet) lengthens runs with its
// overflows, so its reports bound the bursts from above as split ones
// do, when they lost no more than the floor explains: runs of
// independent loss lower the assumption, long runs leave it, and however
// many such reports come the assumption does not end on their count (a
// flow's start-up overshoot on a bursty channel is them). A report that
// lost far more bounds nothing: its drops, uncut, may fall singly.
func TestAdapterQueuedRunsBoundBursts(t *testing.T) {
	start := func() *Adapter {
		a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		if err != nil {
			t.Fatal(err)
		}
		a.SetRTT(50 * time.Millisecond)
		// Acted on with the path unknown: 1%, too few lost to measure
		// bursts (burstSample), and the floor for congestion.
		a.Observe(LossReport{Expected: 2000, Received: 1980, Runs: 20})
		if b := a.bursty(); a.burst != 0 || b != unknownBurst {
			t.Fatalf("first interval: burst %v (estimate %v), want %v assumed", b, a.burst, unknownBurst)
		}
		a.SetPath(PathQueued)
		return a
	}
	a := start()
	observeN(a, 4, LossReport{Expected: 20000, Received: 19800, Runs: 200}) // one by one
	if b, ok := a.Burst(); !ok || b > 1 {
		t.Fatalf("queued reports losing one by one: burst %v (measured %v), want independent", b, ok)
	}
	// A queue that dropped far beyond the floor: its drops, singly
	// (runs of 1), would dilute a bursty channel's runs; the report
	// bounds nothing.
	diluted := start()
	observeN(diluted, 4, LossReport{Expected: 20000, Received: 18000, Runs: 2000}) // 10%, one by one
	if b := diluted.bursty(); diluted.burst != 0 || b != unknownBurst {
		t.Fatalf("queued reports losing 10%% one by one, floor 1%%: burst %v (estimate %v), want %v still assumed", b, diluted.burst, unknownBurst)
	}
	long := start()
	// A queue found and drained by turns (so the floor stays, and the
	// rule keeps acting on 1%), for more reports than assumeReports.
	for i := range 2*floorReports - 2 {
		long.SetPath([]PathState{PathQueued, PathDrained}[i%2])
		long.Observe(LossReport{Expected: 20000, Received: 19800, Runs: 20}) // runs of 10
	}
	if p, _ := long.Loss(); p == 0 {
		t.Fatal("the floor was dropped: the test measures nothing")
	}
	if b := long.bursty(); long.burst != 0 || b != unknownBurst {
		t.Fatalf("queued runs of 10: burst %v (estimate %v), want %v still assumed", b, long.burst, unknownBurst)
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
	observeN(a, 6, LossReport{Expected: 20000, Received: 19000, Runs: 400}) // runs of 2.5
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
	observeN(a, 4, LossReport{Expected: 20000, Received: 19000, Runs: 250}) // runs of 4
	if b, ok := a.Burst(); !ok || b < 3 {
		t.Fatalf("then runs of 4: burst %v (measured %v)", b, ok)
	}
}

// A new path's bursts are assumed until measured: the old path's say
// nothing of it.
func TestAdapterNewPathForgetsBursts(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	observeN(a, 4, LossReport{Expected: 20000, Received: 19000, Runs: 950})
	if b, ok := a.Burst(); !ok || b != 1 {
		t.Fatalf("independent loss: burst %v (measured %v)", b, ok)
	}
	a.NewPath()
	if b, ok := a.Burst(); ok || b != unknownBurst {
		t.Fatalf("after NewPath: burst %v (measured %v), want %v assumed", b, ok, unknownBurst)
	}
}

// interleavedReport is the loss report of blocks of d groups of n
// symbols, interleaved d deep (a group's symbols d apart on the wire),
// over a Gilbert channel of loss p in bursts of burst, once at least
// lost symbols were lost.
func interleavedReport(seed uint64, p, burst float64, d, n int, lost uint32) LossReport {
	lose := gilbertChannel(rand.New(rand.NewPCG(seed, 5)), p, burst)
	var rep LossReport
	missing := make([]bool, d*n)
	for rep.Expected-rep.Received < lost {
		for i := range missing {
			missing[i] = lose()
		}
		for g := range d {
			prev := false
			for s := range n {
				m := missing[s*d+g]
				rep.Expected++
				if m {
					if !prev {
						rep.Runs++
					}
				} else {
					rep.Received++
				}
				prev = m
			}
		}
	}
	return rep
}

// A sample's runs within noise of independent loss read as independent:
// interleaved 4 deep, a few adjacent losses are a long wire burst, and a
// third of the samples of a channel losing 1% independently read bursts
// of 1.3 and more. Bursts the interleave leaves visible still measure.
func TestAdapterBurstSampleNoise(t *testing.T) {
	const seeds = 300
	for _, c := range []struct {
		p, burst   float64
		d          int
		lo, hi     float64 // bounds on the median sample
		mostBursty float64 // share of samples that may read bursty
	}{
		{0.01, 1, MaxDepth, 1, burstyAbove, 0.05},
		{0.05, 1, MaxDepth, 1, burstyAbove, 0.05},
		{0.01, 4, MaxDepth, 3, 5, 1},
		{0.05, 4, MaxDepth, 3, 5, 1},
		// Bursts of 2 are nearly independent loss to groups 4 deep
		// (runs of 1.11 within them), and show at depth 2.
		{0.05, 2, 2, 1.6, 2.5, 1},
		{0.01, 1, 1, 1, burstyAbove, 0.05},
	} {
		var got []float64
		bursty := 0
		for seed := range uint64(seeds) {
			a := &Adapter{d: c.d}
			a.endAssumption() // the test of chance alone
			var pend runSample
			pend.add(interleavedReport(seed, c.p, c.burst, c.d, 60, burstSample(c.d)), c.d)
			b, ok := a.sample(&pend)
			if !ok {
				t.Fatalf("%+v: no sample from %+v", c, pend.rep)
			}
			got = append(got, b)
			if b > burstyAbove {
				bursty++
			}
		}
		slices.Sort(got)
		med := got[seeds/2]
		t.Logf("loss %.0f%% in bursts of %v, %d deep: median sample %.2f, 90th %.2f, %d of %d bursty", 100*c.p, c.burst, c.d, med, got[seeds*9/10], bursty, seeds)
		if med < c.lo || med > c.hi || float64(bursty) > c.mostBursty*seeds {
			t.Errorf("loss %.0f%% in bursts of %v, %d deep: median sample %.2f, want %v..%v; %d of %d bursty, want at most %.0f%%",
				100*c.p, c.burst, c.d, med, c.lo, c.hi, bursty, seeds, 100*c.mostBursty)
		}
	}
}

// runLength at the edges: a report that lost every symbol is taken as
// counted (finite), one that lost nothing or counted no runs has none.
func TestRunLengthEdges(t *testing.T) {
	for _, c := range []struct {
		rep  LossReport
		want float64
	}{
		{LossReport{Expected: 50, Received: 0, Runs: 5}, 10},
		{LossReport{Expected: 50, Received: 50}, 0},
		{LossReport{Expected: 50, Received: 40}, 0},
		{LossReport{Expected: 1000, Received: 990, Runs: 10}, 1 / 0.99},
		{LossReport{Expected: 1000, Received: 960, Runs: 10}, 4},
	} {
		if got := c.rep.runLength(); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%+v: run length %v, want %v", c.rep, got, c.want)
		}
	}
}

// A window a standing queue capped to nothing (parity off for
// congestion) keeps the measured bursts: the channel is as it was. A
// clean window forgets them.
func TestAdapterCongestionKeepsBursts(t *testing.T) {
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	a.SetPath(PathClear)
	observeN(a, 4, LossReport{Expected: 20000, Received: 19800, Runs: 200}) // 1%, one by one
	if b, ok := a.Burst(); !ok || b != 1 {
		t.Fatalf("independent loss: burst %v (measured %v)", b, ok)
	}
	a.SetPath(PathQueued)
	observeN(a, floorReports+3, LossReport{Expected: 20000, Received: 19000, Runs: 100}) // the queue's runs of 10
	if p, _ := a.Loss(); p != 0 {
		t.Fatalf("a standing queue left the loss acted on at %v, want 0: the test needs parity off", p)
	}
	if a.burst == 0 {
		t.Fatal("a window capped to nothing by a standing queue forgot the measured bursts")
	}
	a.SetPath(PathClear)
	observeN(a, lossWindow+1, LossReport{Expected: 20000, Received: 20000})
	if a.burst != 0 {
		t.Fatalf("clean windows kept bursts of %v", a.burst)
	}
}

// observeN has a observe rep n times.
func observeN(a *Adapter, n int, rep LossReport) {
	for range n {
		a.Observe(rep)
	}
}

// While bursts are assumed a change of depth starts the burst samples
// anew: 50 singletons counted 4 deep are too few to end the assumption
// there (twice burstSample), and respaced to depth 1 they would have
// ended it on twice depth 1's sample.
func TestAdapterDepthChangeKeepsSampleWeight(t *testing.T) {
	singletons := LossReport{Expected: 5000, Received: 4950, Runs: 50}
	a := &Adapter{d: MaxDepth}
	a.burstPend.add(singletons, MaxDepth)
	if _, ok := a.sample(&a.burstPend); ok {
		t.Fatal("50 singletons 4 deep, assumed: sampled, want gathering on")
	}
	a.setDepth(1)
	if b, ok := a.sample(&a.burstPend); ok {
		t.Fatalf("after a change to depth 1: sampled bursts of %v from the depth-4 sample alone", b)
	}
	// What depth 4 gathered still counts: 50 singletons there and 10 at
	// depth 1 make the two samples independent loss needs while bursts
	// are assumed (80 at depth 4 alone, 20 at depth 1 alone).
	a.burstPend.add(LossReport{Expected: 1000, Received: 990, Runs: 10}, 1)
	if b, ok := a.sample(&a.burstPend); !ok || b > burstyAbove {
		t.Fatalf("50 singletons 4 deep, then 10 at depth 1: burst %v (sampled %v), want independent loss measured", b, ok)
	}
	// Depth flapping between 2 and 4 report after report (a lane too
	// slow to fill groups 4 deep) still measures: 20 lost at depth 2 are
	// a sample, at depth 4 half of one, so twice a sample by the third.
	f := &Adapter{d: MaxDepth}
	for i := range 8 {
		d := 2 << (i % 2)
		f.setDepth(d)
		f.burstPend.add(LossReport{Expected: 2000, Received: 1980, Runs: 20}, d)
		if b, ok := f.sample(&f.burstPend); ok {
			if b > burstyAbove || i != 2 {
				t.Fatalf("singletons at depths 2 and 4, report %d: burst %v, want independent loss at the 3rd", i+1, b)
			}
			return
		}
	}
	t.Fatal("160 singletons at depths 2 and 4: no sample")
}

// A report judged clear whose losses parity mostly did not recover (a
// flow's overshoot the round trip did not show yet took the ends of
// whole groups) bounds the bursts, as a queue's runs do: it does not
// measure them. One that parity recovered measures.
func TestAdapterUnrecoveredRunsOnlyBound(t *testing.T) {
	first := func(rep LossReport) *Adapter {
		a := freshAdapter(t)
		a.SetPath(PathClear)
		a.Observe(rep)
		return a
	}
	over := LossReport{Expected: 4294, Received: 4235, Unrecovered: 59, Runs: 19}
	if a := first(over); !a.assuming() {
		b, ok := a.Burst()
		t.Fatalf("59 lost in 19 runs, all unrecovered: burst %v (measured %v), want %v still assumed", b, ok, unknownBurst)
	}
	// The same runs, recovered: the channel's bursts, measured.
	over.Unrecovered = 0
	if b, ok := first(over).Burst(); !ok || b < 3 {
		t.Fatalf("59 lost in 19 runs, recovered: burst %v (measured %v), want bursts measured", b, ok)
	}
	// Recovered, but its caller found its losses outside the span the
	// path was seen clear for (BoundRuns): a bound, for that report only.
	a := freshAdapter(t)
	a.SetPath(PathClear)
	a.BoundRuns()
	a.Observe(over)
	if !a.assuming() {
		b, ok := a.Burst()
		t.Fatalf("runs the caller bounded: burst %v (measured %v), want %v still assumed", b, ok, unknownBurst)
	}
	observeN(a, 2, over)
	if b, ok := a.Burst(); !ok || b < 3 {
		t.Fatalf("the reports after: burst %v (measured %v), want bursts measured", b, ok)
	}
}
