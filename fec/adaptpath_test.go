// Tests of what the path tells the Adapter: a run of clean reports turns
// parity off, and loss while the path queues is congestion (LossReport.AtMost
// caps it).

package fec

import (
	"slices"
	"testing"
	"time"
)

// A lane whose reports lose nothing for cleanReports in a row sends no
// parity, however little each report carried (a ping or ACK lane); the
// first report that loses anything brings MinR back at once, and the next
// full interval sizes R for the loss it shows.
func TestAdapterParityOffWhenClean(t *testing.T) {
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, r := a.Ratio(); r == 0 {
		t.Fatal("a new lane starts without parity: its first loss is unprotected")
	}
	for i := range cleanReports {
		if _, r := a.Observe(LossReport{Expected: 4, Received: 4}); (r == 0) != (i == cleanReports-1) {
			t.Fatalf("after %d clean sparse reports: R %d", i+1, r)
		}
	}
	if _, r := a.Observe(LossReport{}); r != 0 {
		t.Fatalf("an empty report (nothing sent) brought parity back: R %d", r)
	}
	// Loss on a sparse lane: one of five lost.
	if _, r := a.Observe(LossReport{Expected: 5, Received: 4, Runs: 1}); r != DefaultAdaptConfig.MinR {
		t.Fatalf("first loss after a clean run: R %d, want MinR %d at once", r, DefaultAdaptConfig.MinR)
	}
	if p := a.Partial(); len(p) < 2 || p[1] != uint8(DefaultAdaptConfig.MinR) {
		t.Fatalf("first loss after a clean run: early groups get %v", p)
	}
	// Then a full interval at 5% random loss: the rule's choice.
	k, r := a.Observe(LossReport{Expected: 4000, Received: 3800, Runs: 190})
	if got := ResidualLoss(k, r, 0.05); got > a.Target() {
		t.Fatalf("after a 5%% interval: %d:%d predicts %.2g, target %.2g", k, r, got, a.Target())
	}
}

// Clean pings before any interval was acted on take the start-up guess
// off, and a flow that starts then (Busy) gets it back, its table for
// early groups too, once; after the rule acted on an interval, a clean
// run's verdict stands.
func TestAdapterBusyBringsGuessBack(t *testing.T) {
	a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
	if err != nil {
		t.Fatal(err)
	}
	k0, r0 := a.Ratio()
	guessTable := slices.Clone(a.Partial())
	if a.Busy() {
		t.Fatal("Busy changed a lane still at its start-up guess")
	}
	for range cleanReports {
		a.Observe(LossReport{Expected: 2, Received: 2})
	}
	if _, r := a.Ratio(); r != 0 {
		t.Fatalf("after %d clean pings: R %d", cleanReports, r)
	}
	// A lost ping brings MinR back, for early groups too; a flow then
	// gets the whole guess.
	if _, r := a.Observe(LossReport{Expected: 2, Received: 1, Runs: 1}); r != DefaultAdaptConfig.MinR || a.Partial() == nil {
		t.Fatalf("a lost ping after the clean run: R %d, partial %v", r, a.Partial())
	}
	if !a.Busy() {
		t.Fatal("a flow after clean pings: the guess did not come back")
	}
	if k, r := a.Ratio(); k != k0 || r != r0 || !slices.Equal(a.Partial()[1:], guessTable[1:]) || a.Depth() != MaxDepth {
		t.Fatalf("guess back as %d:%d depth %d, partial %v; want %d:%d, depth %d, the guess's table for early groups", k, r, a.Depth(), a.Partial(), k0, r0, MaxDepth)
	}
	if a.Busy() {
		t.Fatal("Busy changed the ratio twice")
	}
	// The flow's first interval sizes R; a clean run of a flow's worth
	// then takes parity off for good: the rule measured the path (one of
	// pings, after the flow, does not: TestAdapterIdleCleanRunGivesNextFlowTheGuess).
	a.Observe(LossReport{Expected: 4000, Received: 3960})
	for range cleanReports {
		a.Observe(LossReport{Expected: 2000, Received: 2000})
	}
	if _, r := a.Ratio(); r != 0 || a.Busy() {
		t.Fatalf("a measured path clean again: R %d, or Busy brought the guess back", r)
	}
	for _, m := range []Mode{{Kind: ModeFixed, K: 16, R: 4}, {Kind: ModeOff}} {
		b, _ := NewAdapter(m, AdaptConfig{})
		b.guessOff = true // as if: only auto mode ever sets it
		k1, r1 := b.Ratio()
		if b.Busy() {
			t.Fatalf("Busy reported a change in mode %v", m)
		}
		if k, r := b.Ratio(); k != k1 || r != r1 {
			t.Fatalf("Busy changed mode %v's ratio %d:%d to %d:%d", m, k1, r1, k, r)
		}
	}
}

// Loss reported while the path queues is congestion: it raises no parity,
// parity falls each report while the queue stands, down to none, and long
// runs set no bursts; the same reports on a path that does not queue
// raise parity. Once the queue drains, loss counts in full at once.
func TestAdapterQueuedLossAddsNoParity(t *testing.T) {
	share := func(k, r int) float64 { return float64(r) / float64(k) }
	steady := func() (*Adapter, float64) {
		a := mustAdapter(t)
		a.SetRTT(50 * time.Millisecond)
		var k, r int
		for range 4 {
			k, r = a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 950}) // 5%, independent
		}
		return a, share(k, r)
	}
	heavy := LossReport{Expected: 20000, Received: 17000, Runs: 2600} // 15%
	open, calm := steady()
	for range 2 {
		open.Observe(heavy)
	}
	if k, r := open.Ratio(); share(k, r) <= calm {
		t.Fatalf("15%% loss on a path that does not queue left parity at %d:%d (5%%: %.3f)", k, r, calm)
	}
	// steady's adapter (mustAdapter) acted first on a clean interval,
	// judged with the path unknown: the floor is 0, as after a clean
	// interval judged clear.
	q, _ := steady()
	q.SetPath(PathQueued)
	last := calm
	for i := range 20 {
		k, r := q.Observe(heavy)
		if share(k, r) > last {
			t.Fatalf("report %d while queued raised parity to %d:%d", i, k, r)
		}
		last = share(k, r)
	}
	if k, r := q.Ratio(); r != 0 {
		t.Fatalf("20 reports of congestion left parity at %d:%d", k, r)
	}
	q.Observe(LossReport{Expected: 100, Received: 90}) // short of MinExpected: trackClean only
	if _, r := q.Ratio(); r != 0 {
		t.Fatalf("loss while queued brought back parity (R %d)", r)
	}
	q.SetPath(PathClear)
	if k, r := q.Observe(heavy); share(k, r) <= calm {
		t.Fatalf("15%% loss after the queue drained: %d:%d", k, r)
	}
	// Seen lossy with the path clear: a queue later (anyone's) does not
	// take that protection away while it comes and goes, but one that
	// stands through floorReports reports does.
	c := mustAdapter(t)
	c.SetRTT(50 * time.Millisecond)
	c.SetPath(PathClear)
	for range 4 {
		c.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 950})
	}
	for i := range 20 {
		c.SetPath(PathQueued)
		for range floorReports - 1 {
			c.Observe(heavy)
		}
		if k, r := c.Ratio(); share(k, r) < calm {
			t.Fatalf("round %d: a queue that comes and goes took the parity 5%% loss on a clear path needs (%.3f) down to %d:%d", i, calm, k, r)
		}
		c.SetPath(PathClear)
		c.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 950})
	}
	// A queue that the sample after finds drained, over and over, came
	// and went: it does not stand, however long it goes on.
	for i := range 4 * floorReports {
		c.SetPath([]PathState{PathQueued, PathDrained}[i%2])
		c.Observe(heavy)
	}
	if k, r := c.Ratio(); share(k, r) < calm {
		t.Fatalf("a queue found and then drained, report after report, took the floor: %d:%d", k, r)
	}
	c.SetPath(PathQueued)
	for range floorReports + 10 {
		c.Observe(heavy)
	}
	if k, r := c.Ratio(); r != 0 {
		t.Fatalf("a queue that stood through %d reports left parity at %d:%d", floorReports+10, k, r)
	}
	// A clear report's floor is its own interval's loss, not the
	// window's: a flow's start-up overshoot (lost with the path's state
	// not yet known) is not the channel's loss once the path is clear.
	o := mustAdapter(t)
	o.SetRTT(50 * time.Millisecond)
	o.Observe(LossReport{Expected: 20000, Received: 14000, Runs: 300}) // 30%, state unknown
	o.SetPath(PathClear)
	o.Observe(LossReport{Expected: 20000, Received: 20000})
	o.SetPath(PathQueued)
	for range floorReports - 1 {
		o.Observe(heavy)
	}
	if k, r := o.Ratio(); r != 0 {
		t.Fatalf("a start-up's overshoot stayed a floor for congestion: %d:%d", k, r)
	}
	bursts := func(st PathState) float64 {
		a := mustAdapter(t)
		a.SetPath(st)
		for range 4 {
			a.Observe(LossReport{Expected: 20000, Received: 19000, Runs: 100}) // runs of 10
		}
		return a.burst
	}
	for _, st := range []PathState{PathQueued, PathDrained, PathSplit} {
		if b := bursts(st); b != 0 {
			t.Fatalf("tail drops in runs (path %v) taken as bursts of %v", st, b)
		}
	}
	for _, st := range []PathState{PathUnknown, PathClear} {
		if b := bursts(st); b < 5 {
			t.Fatalf("runs of 10 on a path %v: burst estimate %v", st, b)
		}
	}
}

func TestLossAtMost(t *testing.T) {
	r := LossReport{Expected: 1000, Received: 900, Unrecovered: 40, Runs: 60}
	if got := r.AtMost(0.2); got != r {
		t.Fatalf("within the ceiling: %+v", got)
	}
	if got, want := r.AtMost(0.05), (LossReport{Expected: 1000, Received: 950, Unrecovered: 40, Runs: 30}); got != want {
		t.Fatalf("5%%: %+v, want %+v", got, want)
	}
	// The mean burst stays: 100 lost in runs of 4 cut to 20 are 5 runs
	// (cut to the 20 kept, the runs said independent loss).
	b := LossReport{Expected: 1000, Received: 900, Runs: 25}
	if got := b.AtMost(0.02); got.Burst() != 4 {
		t.Fatalf("bursts of 4 cut to 2%%: %+v, burst %v", got, got.Burst())
	}
	if got := b.AtMost(0.001); got.Runs != 1 || got.Received != 999 {
		t.Fatalf("one symbol kept: %+v, want one run", got)
	}
	if got := r.AtMost(0); got.Loss() != 0 || got.Unrecovered != 0 || got.Runs != 0 {
		t.Fatalf("none: %+v", got)
	}
}

// A flow's start-up overshoot on a lossy channel: the first interval is
// judged with the path's state unknown, the next ones while the queue it
// overflowed drains (queued, drained). Quartering the loss at each of
// those took a 5% channel's parity off within two reports (a CUBIC flow
// then lost the channel's 5% and cut its window round trip after round
// trip); the least any interval lost bounds the channel's loss until an
// interval is judged clear, or the queue stands through floorReports.
func TestAdapterKeepsParityUntilChannelSeen(t *testing.T) {
	share := func(k, r int) float64 { return float64(r) / float64(k) }
	five := LossReport{Expected: 5000, Received: 4750, Runs: 238}  // 5%, independent
	over := LossReport{Expected: 5000, Received: 4000, Runs: 40}   // 20%: the overshoot's runs
	drain := LossReport{Expected: 5000, Received: 4700, Runs: 280} // 6%
	calm := mustAdapter(t)
	calm.SetRTT(50 * time.Millisecond)
	calm.SetPath(PathClear)
	for range 4 {
		calm.Observe(five)
	}
	need := share(calm.Ratio())

	// Not mustAdapter: its clean first interval would set the floor to 0.
	fresh := func() *Adapter {
		a, err := NewAdapter(Mode{Kind: ModeAuto}, AdaptConfig{})
		if err != nil {
			t.Fatal(err)
		}
		a.SetRTT(50 * time.Millisecond)
		return a
	}
	a := fresh()
	a.Observe(five) // first interval, state unknown
	a.SetPath(PathQueued)
	a.Observe(over)
	for i, st := range []PathState{PathDrained, PathQueued, PathDrained, PathQueued, PathDrained} {
		a.SetPath(st)
		if k, r := a.Observe(drain); share(k, r) < need*0.9 {
			t.Fatalf("report %d (%v) while the overshoot drains: %d:%d, the channel's 5%% needs %.3f", i, st, k, r, need)
		}
	}
	// The least, not the first or the largest: an interval that lost
	// 1% (congestion and all) bounds the channel's loss at 1%.
	a.SetPath(PathQueued)
	a.Observe(LossReport{Expected: 5000, Received: 4950, Runs: 50})
	a.Observe(drain)
	if k, r := a.Ratio(); share(k, r) > need*0.7 {
		t.Fatalf("after an interval that lost 1%%, congestion kept %d:%d (5%% needs %.3f)", k, r, need)
	}
	// The channel seen clear and clean: congestion is cut as before.
	a.SetPath(PathClear)
	a.Observe(LossReport{Expected: 5000, Received: 5000})
	a.SetPath(PathQueued)
	for range floorReports - 1 {
		a.Observe(over)
	}
	if k, r := a.Ratio(); r != 0 {
		t.Fatalf("congestion after a clean interval kept parity at %d:%d", k, r)
	}
	// Never seen clear, and a queue found report after report, though
	// each came and went: after 2·floorReports the floor goes.
	c := fresh()
	c.Observe(five)
	for i := range 2*floorReports + 6 {
		c.SetPath([]PathState{PathQueued, PathDrained}[i%2])
		c.Observe(over)
	}
	if k, r := c.Ratio(); r != 0 {
		t.Fatalf("a queue found in %d reports, the path never clear, left parity at %d:%d", 2*floorReports+6, k, r)
	}
	// A new path: the old one's clear intervals set no floor for it.
	c.NewPath()
	c.SetPath(PathClear)
	c.Observe(five)
	c.SetPath(PathQueued)
	if k, r := c.Observe(drain); share(k, r) < need*0.9 {
		t.Fatalf("congestion on a new path, its channel losing 5%%: %d:%d", k, r)
	}
	// Never seen clear, but a queue that stands: it is congestion.
	b := fresh()
	b.Observe(five)
	b.SetPath(PathQueued)
	for range floorReports + 6 {
		b.Observe(over)
	}
	if k, r := b.Ratio(); r != 0 {
		t.Fatalf("a queue that stood through %d reports left parity at %d:%d", floorReports+6, k, r)
	}
}

// A queue that stands while the rule still assumes bursts it has not
// measured: the assumption's parity goes first, and the floor for the
// channel's loss stays, at independent loss; only a queue that stands
// through floorReports more takes it (a CUBIC flow whose start-up queue
// stood at 47:14 x4, parity then off altogether, met the channel's 1%
// unprotected and fell to 75 Mbit/s of 200).
func TestAdapterStandingQueueEndsAssumptionFirst(t *testing.T) {
	share := func(k, r int) float64 { return float64(r) / float64(k) }
	a := freshAdapter(t)
	// Acted on with the path unknown: 1%, too few lost to measure bursts.
	a.Observe(LossReport{Expected: 2000, Received: 1980, Runs: 20})
	a.SetPath(PathQueued)
	over := LossReport{Expected: 20000, Received: 18000, Runs: 200} // tail drops in runs of 10
	observeN(a, floorReports-1, over)
	assumed := share(a.Ratio())
	if !a.assuming() || assumed == 0 {
		t.Fatalf("%d reports queued: assuming %v, %d:%d; want bursts still assumed and parity for them", floorReports-1, a.assuming(), a.k, a.r)
	}
	a.Observe(over)
	if a.assuming() {
		t.Fatalf("a queue that stood through %d reports left bursts assumed", floorReports)
	}
	if b, _ := a.Burst(); b != 1 {
		t.Fatalf("assumption ended: burst %v, want independent", b)
	}
	k, r := a.Ratio()
	if r == 0 || share(k, r) >= assumed {
		t.Fatalf("assumption ended under a queue: %d:%d, want parity for the 1%% floor, below the assumption's %.3f", k, r, assumed)
	}
	if p, _ := a.Loss(); p < 0.009 {
		t.Fatalf("assumption ended: loss acted on %v, want the 1%% floor", p)
	}
	// The queue still stands: a flow that does not slow down for loss.
	observeN(a, floorReports, over)
	if k, r := a.Ratio(); r != 0 {
		t.Fatalf("a queue that stood through %d more reports left parity at %d:%d", floorReports, k, r)
	}
}

// A queue that stands but loses no more than the channel was seen to
// lose while clear keeps the parity the channel needs, however long it
// stands: parity sized for the channel hides little of its overflows,
// and a loss-based flow that lost it met the channel's loss unprotected
// (a CUBIC flow fell to half the link). One that loses far more is
// congestion parity would hide, and the floor goes after floorReports.
func TestAdapterQueueNearFloorKeepsFloor(t *testing.T) {
	share := func(k, r int) float64 { return float64(r) / float64(k) }
	one := LossReport{Expected: 20000, Received: 19800, Runs: 198} // 1%, independent
	a := mustAdapter(t)
	a.SetRTT(50 * time.Millisecond)
	a.SetPath(PathClear)
	observeN(a, 4, one)
	need := share(a.Ratio())
	a.SetPath(PathQueued)
	for i := range 4 * floorReports {
		// 0.9–1.1%: within noise of the 1% floor.
		lost := uint32(180 + 20*(i%3))
		if k, r := a.Observe(LossReport{Expected: 20000, Received: 20000 - lost, Runs: lost}); share(k, r) < need*0.9 {
			t.Fatalf("report %d of a standing queue losing about the floor: %d:%d, the channel's 1%% needs %.3f", i, k, r, need)
		}
	}
	// A queue that overflows now and then, within the floor between:
	// each report within it breaks the row.
	over := LossReport{Expected: 20000, Received: 19000, Runs: 100} // 5% in runs of 10
	for i := range 4 {
		observeN(a, floorReports-1, over)
		if k, r := a.Observe(one); share(k, r) < need*0.9 {
			t.Fatalf("round %d: %d overflowing reports, then one within the floor: %d:%d, the channel's 1%% needs %.3f", i, floorReports-1, k, r, need)
		}
	}
	observeN(a, floorReports, over)
	if k, r := a.Ratio(); r != 0 {
		t.Fatalf("a queue that stood through %d reports losing 5%% on a 1%% floor left parity at %d:%d", floorReports, k, r)
	}
}

// Never seen clear, a queue that stands from the start and drops more in
// some reports than others: the floor is the least any lost, and the
// reports above it count until 2·floorReports of them drop it (a floor
// taken from the queue's own drops does not hold parity for ever).
func TestAdapterQueueFromStartLosesItsFloor(t *testing.T) {
	a := freshAdapter(t)
	a.Observe(LossReport{Expected: 20000, Received: 19600, Runs: 400}) // 2%, independent: measured
	a.SetPath(PathQueued)
	low := LossReport{Expected: 20000, Received: 19800, Runs: 200}  // 1%
	high := LossReport{Expected: 20000, Received: 19400, Runs: 600} // 3%
	for range 2*floorReports + 2 {
		a.Observe(low)
		a.Observe(high)
	}
	if k, r := a.Ratio(); r != 0 {
		t.Fatalf("a queue dropping 1-3%% through %d reports, never clear: parity at %d:%d", 4*floorReports+4, k, r)
	}
}

// A floor for congestion taken from a small interval is the most it is
// within chance of: one of 300 symbols lost (a 1% channel's first
// interval reads so one time in five) does not make the channel's loss
// 0.33%, below minQueuedLoss, which took parity off for the overshoot
// that followed in a BBR flow's start-up.
func TestAdapterSmallIntervalFloorWithinChance(t *testing.T) {
	a := freshAdapter(t)
	a.Observe(LossReport{Expected: 300, Received: 299, Runs: 1})
	a.SetPath(PathDrained)
	if k, r := a.Observe(LossReport{Expected: 6000, Received: 4400, Runs: 400}); r == 0 {
		t.Fatalf("an overshoot after a first interval that lost 1 of 300: parity off (%d:%d)", k, r)
	}
	if got := (LossReport{Expected: 300, Received: 299}).lossBound(); got < 0.013 || got > 0.014 {
		t.Fatalf("1 of 300: bound %v, want (1+2+1)/300", got)
	}
	if got := (LossReport{Expected: 300, Received: 300}).lossBound(); got != 0 {
		t.Fatalf("none lost: bound %v, want 0", got)
	}
}
