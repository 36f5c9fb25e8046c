// What the Adapter's rule knows of a lossy path's bursts: measured from
// the runs the peer's reports count (sample, takeBursts), assumed until
// then (unknownBurst), and carried across changes of depth (setDepth).

package fec

import "math"

// setDepth interleaves d deep from the next block: the burst samples
// gathered so far go on as counted at d (runSample.respaced), each
// report still weighed by the depth it was counted at, and the next two
// reports, which counted groups of the depth before, are left out of
// them.
func (a *Adapter) setDepth(d int) {
	if d == a.d {
		return
	}
	a.burstSkip = 2
	a.burstPend, a.splitPend = a.burstPend.respaced(a.d, d), a.splitPend.respaced(a.d, d)
	a.d = d
}

// runSample gathers the runs of reports until they measure the bursts:
// the reports' sum, its runs as counted at the depth in force now
// (LossReport.respaced), and how much of a sample they are, each
// report's lost symbols over the sample the depth it was counted at asks
// for (burstSample). So a change of depth neither restarts a sample nor
// ends one early: 40 singletons counted 4 deep are one sample, not the
// four that 40 at depth 1 would be. (Restarting it, which a change of
// depth while bursts were assumed did, kept a TCP flow's ACK lane
// assuming bursts of 4 for its whole run: too slow to fill groups 4
// deep, its choice went between depths 2 and 4 report after report,
// and it paid 5:5 x4 for ACKs on a channel losing 1% independently.)
type runSample struct {
	rep    LossReport
	weight float64
}

// add counts rep, whose runs were counted within groups d deep, into s.
func (s *runSample) add(rep LossReport, d int) {
	s.rep = s.rep.Add(rep)
	s.weight += float64(rep.Expected-rep.Received) / float64(burstSample(d))
}

// respaced is s with its runs as groups interleaved to deep would have
// counted them; its weight stays.
func (s runSample) respaced(from, to int) runSample {
	s.rep = s.rep.respaced(from, to)
	return s
}

// takeBursts moves the burst estimate by the samples the reports
// gathered (clean: the window lost nothing, not a queue's cap of it).
//
// A clear report's sample moves it halfway. The first sets it, and so
// does one after samples of split or queued reports only bounded it:
// their runs took in a flow's start-up overshoot, and halving from
// there left a CUBIC flow on a channel losing 1% independently at
// bursts of 1.36 for the rest of its run (every report after was
// split), at 192:18 where 192:13 met its target.
//
// A split or queued report's sample only lowers it, or the assumption,
// never once the assumption ended for independent loss: one interval
// whose runs took in a flow's overshoot read as bursts of 3.7 on a
// channel losing independently, and under the queue that stood after it
// every report was split, so nothing brought the estimate down for ten
// seconds of 38% parity. (Halfway, as a clear report's sample moves it,
// was tried: the estimate came down too slowly, 28% parity on that
// channel.)
//
// A clean window forgets the bursts: those of the past say nothing. A
// window a standing queue capped to nothing does not: the channel's
// bursts are as they were, and a flow that meets its loss once parity
// went off would otherwise pay for assumed bursts again (48:16 x4, then
// 8:8 x4 as it slowed, on a channel measured losing 1% independently).
func (a *Adapter) takeBursts(clean bool) {
	if b, ok := a.sample(&a.burstPend); ok {
		if a.burst > 0 && !a.bound {
			b = (a.burst + b) / 2
		}
		a.burst, a.bound, a.sampled = b, false, true
	} else if clean {
		a.forgetBursts()
	}
	if b, ok := a.sample(&a.splitPend); ok && a.lower(b) {
		a.sampled = true
	}
}

// lower takes b, a bound on the bursts from above, if it is below what
// the rule predicts with (reporting whether it was): as a bound if that
// was assumed or a bound, else as the measurement lowered.
func (a *Adapter) lower(b float64) bool {
	if b >= max(a.bursty(), 1) {
		return false
	}
	a.burst, a.bound = b, a.burst == 0 || a.bound
	return true
}

// nearFloor reports whether rep lost no more than the floor for
// congestion (the least any interval lost, or the last clear one's)
// explains: a queued report whose runs are the channel's as much as a
// clear one's would be.
func (a *Adapter) nearFloor(rep LossReport) bool {
	return !math.IsInf(a.clearP, 1) && !AboveChance(float64(rep.Expected-rep.Received), a.clearP*float64(rep.Expected), 3, 2)
}

// sample is the wire's mean burst measured by the reports gathered in
// pend, once they are a whole sample (ok; pend starts anew).
func (a *Adapter) sample(pend *runSample) (b float64, ok bool) {
	if pend.weight < 1 {
		return 0, false
	}
	if a.assuming() && pend.rep.independent() && pend.weight < 2 {
		// Independent loss ends the assumption on twice the sample: a
		// sample of 40 lost symbols 4 deep holds ten bursts of 4 or
		// so, and one in twenty read as independent loss on a channel
		// losing 5% in such bursts (one in a thousand of 80). The rule
		// then chose 50:10 at depth 1, which the bursts took whole
		// while a CUBIC flow's slow start ran in it: 20 Mbit/s of 200.
		return 0, false
	}
	// Runs as counted within groups spaced by the depth now in force
	// (the last choice, give or take a report in flight).
	b = wireBurst(pend.rep.Loss(), pend.rep.runLength(), a.d)
	*pend = runSample{}
	return b, true
}

// Borrow gives the rule bursts another lane of the peer set its estimate
// to on the same path (PathBursts; bound: only a bound from above). A
// measurement stands for this lane's if it has measured none (assumed,
// or the assumption ended; at most unknownBurst, the longest the rule
// would assume: another lane's overshoot read as bursts of 7.85) or only
// bounded them (then within its bound), and its own samples move it
// from there as they would; a bound only lowers what the rule predicts
// with, its own measurement too, as a bound of its own would. A lane
// whose clean window forgot its bursts borrows again: the path's.
func (a *Adapter) Borrow(b float64, bound bool) {
	switch {
	case !(b > 0) || a.noRuns:
	case bound:
		a.lower(b)
	case a.burst == 0:
		a.burst, a.bound = min(b, unknownBurst), false
	case a.bound:
		a.burst, a.bound = min(a.burst, b), false
	}
}

// Sampled is the burst estimate and whether it only bounds them, if the
// last report's runs set it (a clear sample, or a bound that lowered
// it): what the peer's other lanes may borrow.
func (a *Adapter) Sampled() (b float64, bound, ok bool) { return a.burst, a.bound, a.sampled }

// forgetBursts drops what the rule knows of the bursts: the next loss is
// assumed bursty again until measured.
func (a *Adapter) forgetBursts() {
	a.burst, a.bound, a.burstPend, a.splitPend, a.assumed = 0, false, runSample{}, runSample{}, 0
}

// unknownBurst is the mean wire burst the rule predicts with while a
// lossy path's has not been measured (fewer than burstSample lost
// symbols seen since its loss began): the longest the deepest interleave
// (MaxDepth) spreads to about one symbol per group, and so the longest
// the rule can protect against within MaxOverhead. A flow's first
// interval is a few hundred symbols, which hold one burst or two, or
// none; rated as independent loss it chose large groups at depth 1
// (192:34 at 3.4%), which a bursty channel took whole while a TCP flow's
// slow start ran in them, and the flow never grew back from the window
// it was left with. Independent loss is measured as such within a report
// or two (at 1% and up: twice burstSample, sample), and costs the assumed
// bursts' parity until then.
const unknownBurst = MaxDepth

// burstLen is the mean wire burst the rule predicts with at loss p: the
// measured one; unknownBurst until there is one; none (independent) for a
// peer that counts no runs, a clean path, or once assumeReports split
// reports came while it was unmeasured, or a queue stood through
// floorReports (standingQueue). (Shrinking the assumption
// toward the runs of a sample too small to measure was tried: at depth 4
// a few symbols lost in bursts of 4 often show as runs of 1, and the
// rule chose 192:33 at depth 1 on them.)
func (a *Adapter) burstLen(p float64) float64 {
	if p <= 0 {
		return a.burst
	}
	return a.bursty()
}

// bursty is burstLen's at any loss: the measured burst, unknownBurst
// while assumed, or 0 (independent).
func (a *Adapter) bursty() float64 {
	if a.assuming() {
		return unknownBurst
	}
	return a.burst
}

// assuming reports whether the rule predicts with unknownBurst: nothing
// measured, from a peer that counts runs, and the assumption not ended
// (assumeReports split reports, or a queue that stood: endAssumption).
func (a *Adapter) assuming() bool {
	return a.burst == 0 && !a.noRuns && a.assumed < assumeReports
}

// endAssumption stops the rule assuming bursts it has not measured: loss
// goes on as independent until runs measure it.
func (a *Adapter) endAssumption() { a.assumed = assumeReports }

// assumeReports is how many split reports (PathSplit, whose runs bound
// the channel's bursts from above only) may come while the bursts are
// unmeasured before the rule stops assuming unknownBurst: a flow's
// overshoot drains through a few. Under a queue that stands from the
// start (BBR's) every report is split, its runs long with the queue's
// overflows, and the assumption held for a whole run at 38% parity on a
// channel losing 5% independently. (Reports left out after a change of
// depth do not count: they are not evidence of anything; nor do queued
// ones, which a flow's overshoot on a bursty channel is, and what the
// assumption is for, unless the queue stands through floorReports of
// them: standingQueue ends the assumption then.)
const assumeReports = 5

// minBurstSample is the fewest lost symbols a mean burst length is taken
// over at depth 1: a few losses say little about their pattern.
const minBurstSample = 10

// burstSample is the fewest lost symbols a mean burst length is taken
// over while groups are interleaved d deep: the runs within them are
// shorter (bursts of 4 on a 5% channel show as runs of 1.5 at depth 4,
// against 1.05 for independent loss), so telling them apart takes d
// times the sample. Of 10 lost at depth 4, bursts of 4 read as
// independent loss (1.09) in one run of eight.
func burstSample(d int) uint32 { return minBurstSample * uint32(d) }

// Burst is the mean length of a loss burst on the wire the rule predicts
// with at the loss it acted on last (Loss): the one the peer's runs
// measured, or bounded from above on a queued or split path (measured),
// or unknownBurst while it is assumed; 1 for independent loss (no loss
// acted on, a peer that counts no runs, an assumption that ended, or a
// measured burst within noise of independent loss).
func (a *Adapter) Burst() (b float64, measured bool) {
	if b = a.burstLen(a.p); b < burstyAbove {
		b = 1
	}
	return b, a.burst > 0
}
