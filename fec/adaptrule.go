// The Adapter's rule (Observe): from each loss report, the wire loss and
// burst length it acts on, the candidates K:R and depth it weighs with the
// loss model (residual.go), the cheapest that meets the target, and when a
// clean or queued path gets no parity.

package fec

import (
	"math"
	"slices"
)

// smallGroupR is the parity a group smaller than any of Ks (only the
// lane's rate makes it so) may carry whatever its size: a lane whose rate
// fills only small groups within the flush timeout may spend more than
// MaxOverhead on them. That costs at most smallGroupR parity
// symbols per flush timeout, little at such a rate, and a loss-based flow
// held back by residual loss needs the protection to grow its rate (and
// with it the groups): capped at MaxOverhead, one CUBIC flow through 5%
// loss at 50 ms stalled near 15 Mbit/s in groups of ~17. Within it, at
// most smallGroupPer parity symbols per data symbol for a flow's data,
// one for pings and ACKs (a sparse fill, or small packets): in closed loop
// through 5% loss in bursts of 4 (TestSlowBurstTable), one per data
// symbol left 1% of a lane's packets lost at 800 packets/s and 2% at 500
// (5:4 x2, 6:5 x1), two 0.08-0.18% and 0.3-0.4% (5:8 x2, 3:6 x2): a Reno
// flow that fell that slow after its slow start's overshoot lost a packet
// every few round trips, halved at each, and ran at 9 Mbit/s of 200.
const (
	smallGroupR   = 8
	smallGroupPer = 2
)

// maxR is the most parity the rule spends on a group of k at depth d:
// within MaxOverhead, the small groups' allowance and, while a flow
// starts, the start-up allowance, and within the block budget.
func (a *Adapter) maxR(k, d int) int {
	r := a.shareR(k)
	flow := !a.small && !a.sparse()
	if k < slices.Min(a.cfg.Ks) {
		per := 1
		if flow {
			per = smallGroupPer
		}
		r = max(r, min(smallGroupR, per*k))
	}
	if a.starting > 0 && flow {
		r = max(r, k)
	}
	budget := blockBudget
	if !a.long {
		budget = legacyBlockBudget
	}
	_, most := FitRatio(k, a.cfg.MaxR, a.long)
	return max(a.cfg.MinR, min(most, r, budget/d-k))
}

// shareR is the most parity MaxOverhead allows a group of k.
func (a *Adapter) shareR(k int) int { return int(float64(k) * a.cfg.MaxOverhead) }

// startupReports is how many intervals a flow's start acts on with the
// start-up allowance: as much parity as data (one per data symbol) where
// MaxOverhead cannot meet the target. A slow start runs far below the
// path's rate, where parity costs it nothing, and in groups its rate
// keeps small, where MaxOverhead buys little: through 5% loss in bursts
// of 4 the start-up guess at 16:6 x4 left 1.5e-3 of a flow's packets
// lost (16:16 x4: 3e-7), the first choices at 10:8 x4 1.4e-4, and one
// CUBIC flow start in four lost packets for good in its first few
// hundred, left slow start at a window of about 100 packets and ran at
// 30-60 Mbit/s of 200 (docs/BENCHMARKS.md). The first four reports come
// 250 ms apart (the shard's early reports): about the first second of a
// flow, the span of a slow start at round trips up to about 100 ms.
const startupReports = 4

// blockBudget bounds a block's symbols (depth × (K + R)), so that the
// blocks of the three size classes fit together in the peer's decoder
// store (DefaultMaxBytes: about 820 symbols) while they wait for their
// parity: a group of MaxK with the most parity the rule spends on it
// (MaxOverhead) fits. legacyBlockBudget is the same for a decoder before
// long groups, whose store holds about 650.
const (
	blockBudget       = 272
	legacyBlockBudget = 192
)

// choice is one candidate of the rule.
type choice struct{ k, r, d int }

// candidates holds every choice's predicted residual loss for one report:
// computed once (one walk of the chain per group size and depth), then
// searched for each target the rule asks about.
type candidates struct {
	n    [maxKs][len(depths)]int // group size of Ks[i] at depths[j]
	d0   int                     // the first depth weighed
	nd   int                     // depths considered
	res  [maxKs][len(depths)][MaxR + 1]float64
	maxR [maxKs][len(depths)]int
}

// burstyAbove is the mean burst above which depths beyond 1 are weighed:
// independent loss shows runs of 1/(1−p), and spacing them changes
// nothing.
const burstyAbove = 1.2

// predict fills c for wire loss p in bursts of mean length burst.
func (a *Adapter) predict(c *candidates, p, burst float64) {
	c.nd = 1
	for burst > burstyAbove && c.nd < len(depths) && depths[c.nd] <= a.cfg.MaxDepth {
		c.nd++
	}
	for j := range c.nd {
		last := 0
		for i, k0 := range a.cfg.Ks {
			kk := a.groupSize(k0, depths[j])
			c.n[i][j], c.maxR[i][j] = kk, a.maxR(kk, depths[j])
			last = max(last, kk+c.maxR[i][j])
		}
		if p <= 0 || p >= 1 {
			for i := range a.cfg.Ks {
				residuals(c.n[i][j], p, 1, c.res[i][j][:c.maxR[i][j]+1])
			}
			continue
		}
		// The chain after i symbols does not depend on K: one walk per
		// depth serves every group size.
		var g gilbert
		g.start(p, spacedBurst(p, burst, depths[j]))
		for n := 1; ; n++ {
			for i := range a.cfg.Ks {
				if r := n - c.n[i][j]; r >= 0 && r <= c.maxR[i][j] {
					c.res[i][j][r] = g.tail[r+1] / float64(n)
				}
			}
			if n == last {
				break
			}
			g.step()
		}
	}
}

// best is the cheapest candidate predicting ≤ target. If none does, it is
// the cheapest predicting at most twice the least loss any candidate
// predicts: near the ceiling more parity buys little.
func (a *Adapter) best(c *candidates, target float64) (choice, bool) {
	least := math.Inf(1)
	var x choice
	ok := false
	for i := range a.cfg.Ks {
		for j := c.d0; j < c.nd; j++ {
			for rr := a.cfg.MinR; rr <= c.maxR[i][j]; rr++ {
				y := choice{c.n[i][j], rr, depths[j]}
				least = min(least, c.res[i][j][rr])
				if c.res[i][j][rr] <= target && (!ok || cheaper(y, x)) {
					x, ok = y, true
				}
			}
		}
	}
	if ok {
		return x, true
	}
	found := false
	for i := range a.cfg.Ks {
		for j := c.d0; j < c.nd; j++ {
			for rr := a.cfg.MinR; rr <= c.maxR[i][j]; rr++ {
				y := choice{c.n[i][j], rr, depths[j]}
				if c.res[i][j][rr] <= 2*least && (!found || cheaper(y, x)) {
					x, found = y, true
				}
			}
		}
	}
	return x, false
}

// lookup is c's prediction for x, if x is one of its candidates.
func (c *candidates) lookup(ks []int, x choice) (float64, bool) {
	for i := range ks {
		for j := range c.nd {
			if c.n[i][j] == x.k && depths[j] == x.d && x.r <= c.maxR[i][j] {
				return c.res[i][j][x.r], true
			}
		}
	}
	return 0, false
}

// cheaper reports whether x spends a smaller parity share than y, or the
// same share in smaller groups, or at a smaller depth.
func cheaper(x, y choice) bool {
	a, b := x.r*y.k, y.r*x.k // x.r/x.k vs y.r/y.k
	return a < b || a == b && (x.k < y.k || x.k == y.k && x.d < y.d)
}

// stepDown is the cheaper choice the rule moves to from cur, which
// predicts now (ok false: none). Only with margin, the cheapest
// predicting at most half the target, and (out of reach of the target,
// where nothing has margin) only one predicting no more than twice now.
// At another depth than cur's only if cur misses the target or the move
// is clearly cheaper (worthDepth); else the cheapest at cur's depth.
func (a *Adapter) stepDown(c *candidates, cur choice, now float64, reachable bool, predict func(choice) float64) (choice, bool) {
	down, ok := a.best(c, a.target/2)
	if !(ok || !reachable && predict(down) <= 2*now) || !cheaper(down, cur) {
		return cur, false
	}
	if down.d == cur.d || now > a.target || worthDepth(down, cur) {
		return down, true
	}
	same := *c
	found := false
	for j := c.d0; j < c.nd; j++ {
		if depths[j] == cur.d {
			same.d0, same.nd, found = j, j+1, true
		}
	}
	if !found {
		return cur, false
	}
	down, ok = a.best(&same, a.target/2)
	return down, (ok || !reachable && predict(down) <= 2*now) && cheaper(down, cur)
}

// worthDepth reports whether x, at another depth than y, spends clearly
// less parity than y (depthGain): a change of depth leaves the next two
// reports out of the burst samples (setDepth), and a choice that went
// between 192:37 at depth 1 and 97:19 at depth 2 report after report, a
// share of parity 2% apart, kept an estimate a flow's overshoot had set
// (bursts of 2.7 on a channel losing independently) for seven seconds.
func worthDepth(x, y choice) bool {
	return float64(x.r)*float64(y.k) <= depthGain*float64(y.r)*float64(x.k)
}

// depthGain is the parity share, relative to the current one, that a
// cheaper choice at another depth must come under.
const depthGain = 0.9

// Observe feeds one peer report and returns the (possibly new) ratio; the
// depth is then Depth.
func (a *Adapter) Observe(rep LossReport) (k, r int) {
	if a.mode.Kind != ModeAuto {
		return a.Ratio()
	}
	a.pending, a.sampled = a.pending.Add(rep), false
	a.trackClean(rep)
	if rep.Received < rep.Expected {
		// A peer that counts no runs (an older one, or one that has not
		// heard our features yet and sends the short report).
		a.noRuns = rep.Runs == 0
	}
	switch {
	case a.burstSkip > 0:
		// Runs counted at a depth no longer in force would be converted
		// back with the wrong one.
		a.burstSkip--
	case rep.Runs == 0:
	case a.queuing() && !a.nearFloor(rep):
		// A queue that dropped more than the channel explains: its
		// drops, uncut, may fall singly (a queue fed a little faster
		// than it drains) and dilute the channel's runs, and the
		// sample would read a bursty channel as independent.
	case a.queuing() || a.path == PathSplit:
		// Runs mixed with a queue's overflows (tail drops come in
		// runs), which lengthen them: a bound on the channel's bursts
		// from above (splitPend; a split report was cut to the
		// channel's rate). A CUBIC flow's queue can stand from its
		// start-up overshoot on for seconds, and bursts stayed
		// assumed through all of them at 33% parity on a channel
		// losing 1% independently.
		a.splitPend.add(rep, a.d)
		if a.path == PathSplit && a.burst == 0 {
			// No measurement from this one (burstLen). Not a queued
			// report: the first seconds of a flow's overshoot are,
			// and the assumption is what they need on a bursty
			// channel.
			a.assumed++
		}
	case a.boundRuns || 2*rep.Unrecovered > rep.Expected-rep.Received:
		// Losses outside what the path was seen clear for: its caller
		// found most of them outside the split's clear slices
		// (BoundRuns), or most of the symbols it lost were data parity
		// did not recover, runs longer than any it was sized for, a
		// queue's overflow the round trip did not show yet as much as
		// the channel's. A BBR flow's start-up overshoot, judged
		// clear, took the ends of whole groups (59 lost in 19 runs at
		// 24:9 x4, all 59 unrecovered) and set bursts of 9.3 on a
		// channel losing 1% independently: 36% parity for the rest of
		// the run. Such runs bound the bursts from above, as a queue's
		// do.
		a.splitPend.add(rep, a.d)
	default:
		// Bursts are counted over as many reports as it takes to see
		// burstSample lost symbols: reports with a few losses each
		// count as much as one with many.
		a.burstPend.add(rep, a.d)
	}
	a.boundRuns = false
	if a.pending.Expected < a.cfg.MinExpected {
		return a.Ratio()
	}
	interval := a.pending
	first := !a.pOK || a.fresh // the start-up guess is no choice to keep
	if !a.floorKnown {
		a.clearP = min(a.clearP, interval.lossBound()) // the least any interval lost, within chance
	}
	congested := a.queuing() && a.pOK
	ceiling := 0.0
	if congested {
		// Only a report that lost more than the floor explains is a
		// queue that parity may hold full (standingQueue), or any while
		// bursts are assumed: their parity is what would hide overflows.
		// One within chance of the floor breaks the row: the parity hid
		// no overflow of its (a CUBIC flow's queue that overflows once
		// in a while would otherwise lose the floor in the end).
		overflowed := a.assuming() || !a.nearFloor(interval)
		switch {
		case a.path == PathDrained:
			a.queued = 0 // the queue came and went
		case overflowed:
			a.queued++
		default:
			a.queued = 0
		}
		if !a.floorKnown && overflowed {
			a.unclear++
		}
		if a.queued >= floorReports || a.unclear >= 2*floorReports {
			a.standingQueue()
		}
		// Congestion: the interval counts as losing at most a quarter
		// of what the rule last acted on (so parity falls within a few
		// reports while the queue stands), or the floor; the window
		// keeps the interval as judged. Before an interval is judged
		// clear the floor is the least any lost: a flow's start-up
		// overshoot drains through several reports (250 ms apart at
		// first), and quartering the channel's loss at each took its
		// protection away while the flow recovered, which a loss-based
		// flow paid for with window cut after window cut.
		if ceiling = max(a.p/4, a.clearP); ceiling < minQueuedLoss {
			ceiling = 0
		}
		interval = interval.AtMost(ceiling)
	}
	latest := interval.Loss()
	copy(a.window[1:], a.window[:lossWindow-1])
	a.window[0], a.pending = interval, LossReport{}
	a.winN = min(a.winN+1, lossWindow)
	var win LossReport
	for _, w := range a.window[:a.winN] {
		win = win.Add(w)
	}
	p := math.Max(win.Loss(), latest)
	if congested {
		p = min(p, ceiling)
	}
	if first && p == 0 {
		// The first interval lost nothing: the channel loses less than
		// about one in its size, not nothing, and a flow's slow start
		// runs in what the rule chooses now. Taken as clean, 223
		// symbols of a CUBIC flow's start (one flow start in nine at
		// 1% loss) took the start-up guess down to 41:1; it lost 7
		// packets for good and ran at 91 Mbit/s of 200.
		p = LossWithinChance(0, interval.Expected)
	}
	// A clean run too small to say anything keeps the guess for the next
	// flow (Busy) while it goes on.
	a.p, a.pOK, a.fresh = p, true, false
	a.guessOff = a.guessOff && a.clean >= cleanReports && a.cleanSyms < a.cfg.MinExpected
	if !congested {
		a.queued = 0
	}
	if a.path == PathClear || a.path == PathSplit {
		// This interval's loss (within chance), not the window's: a
		// window reaching back into a queue's overshoot (a flow's
		// start) would make its drops the channel's for good.
		a.clearP, a.floorKnown = interval.lossBound(), true
	}
	a.takeBursts(p == 0 && !congested)
	cur := choice{a.groupSize(a.k, a.d), a.r, a.d}
	cur.r = min(cur.r, a.maxR(cur.k, cur.d))
	burst := a.burstLen(p)
	var cands candidates
	a.predict(&cands, p, burst)
	if a.burst == 0 && burst > 0 && cands.nd > 1 {
		if minK := slices.Min(a.cfg.Ks); a.groupSize(minK, depths[cands.nd-1]) >= minK {
			// Assumed bursts: at the deepest interleave only, which is
			// what the assumption is for, and a depth that stays keeps
			// the runs the peer reports measuring (a change of depth
			// leaves the next two reports out: a choice that went from
			// depth 2 to 4 and back under noise kept the bursts
			// unmeasured for seconds). Not for a lane too slow to fill
			// groups of the smallest K that deep: it would pay for 2:2.
			cands.d0 = cands.nd - 1
		}
	}
	predict := func(c choice) float64 {
		if v, ok := cands.lookup(a.cfg.Ks, c); ok {
			return v
		}
		return ResidualLossBurst(c.k, c.r, p, spacedBurst(p, burst, c.d))
	}
	now := predict(cur)
	want, reachable := a.best(&cands, a.target)
	switch {
	case first:
		// The first interval acted on: what it asks for, not the
		// cheapest with margin from a guess that happened to be more
		// than enough.
		cur = want
	case latest > 0 && now > a.target && predict(want) < now/2:
		// Not enough protection, and want is clearly better: more at
		// once (but never on a clean interval, which only ages the
		// window's loss out; and not for a choice within noise of the
		// current one, which would only flap).
		cur = want
	case cheaper(want, cur):
		if down, ok := a.stepDown(&cands, cur, now, reachable, predict); ok {
			cur = down
		}
	}
	a.k, a.r = cur.k, cur.r
	a.setDepth(cur.d)
	goal := max(a.target, predict(cur))
	partialParity(p, spacedBurst(p, burst, a.d), goal, a.cfg.MinR, a.r, a.partial[:a.k], a.sparse())
	a.partialOK = true
	if a.clean >= cleanReports || congested && p == 0 {
		a.parityOff()
	}
	if !a.sizedForFew() {
		a.few1, a.few2 = false, false // a flow's own choice: the next flow after pings gets the guess again
	}
	a.starting = max(0, a.starting-1)
	return a.Ratio()
}

// standingQueue acts on a queue that stood through floorReports reports
// in a row, or was found report after report with the path never clear
// (floorReports), each losing more than the floor explains: parity paid
// into it may be what holds it full, the overflows it recovers hidden
// from the flow that causes them. If the rule still assumes bursts it
// has not measured, the assumption goes first, and the count starts
// again: that parity (47:14 x4 for a channel losing 1%) is what hides
// overflows. Then, or with the bursts measured, the floor goes: a queue
// that still overflows is held by a flow that does not slow down for
// loss, and parity only fills it.
//
// A queue that stands but loses no more than the floor explains keeps
// the floor: parity sized for the channel hides little of a queue's
// overflows, and a CUBIC flow whose start-up queue stood at 192:10 for
// four seconds, losing 1% on a channel losing 0.8%, had parity taken off
// altogether, met the channel's loss unprotected for the second it took
// to judge the path clear again, and fell to 100 Mbit/s of 200.
func (a *Adapter) standingQueue() {
	a.queued, a.unclear = 0, 0
	if a.assuming() {
		a.endAssumption()
		return
	}
	a.clearP, a.floorKnown = 0, true
}

// minQueuedLoss is where the loss a queued path is judged to have (a
// quarter of the last each report while the queue stands) counts as none:
// parity goes off. From the 30% a flow's start-up overshoot may show, that
// takes four reports once the floor is below it.
const minQueuedLoss = 0.005

// BoundRuns tells the rule that the next report's losses fell mostly
// outside the span its path was seen clear for (the peer's split counted
// far fewer in its clear slices than the report lost): its runs bound
// the bursts from above, as a queue's do, and measure nothing.
func (a *Adapter) BoundRuns() { a.boundRuns = true }
