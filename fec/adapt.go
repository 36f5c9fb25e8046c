package fec

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ModeKind is the shape of the `fec =` setting.
type ModeKind uint8

const (
	ModeOff   ModeKind = iota // no parity; symbols are still numbered
	ModeAuto                  // K:R adapted to reported loss and the path's RTT
	ModeFixed                 // fixed K:R
)

// Mode is a parsed `fec = off | auto | K:R` setting.
type Mode struct {
	Kind ModeKind
	K, R int // ModeFixed only
}

// ParseMode parses the config value. Errors say what was expected, since this
// is what an operator sees on a typo.
func ParseMode(s string) (Mode, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "off":
		return Mode{Kind: ModeOff}, nil
	case "auto":
		return Mode{Kind: ModeAuto}, nil
	}
	ks, rs, ok := strings.Cut(t, ":")
	if !ok {
		return Mode{}, fmt.Errorf("fec: %q: want off, auto or K:R (e.g. 16:4)", s)
	}
	k, errK := strconv.Atoi(ks)
	r, errR := strconv.Atoi(rs)
	if errK != nil || errR != nil {
		return Mode{}, fmt.Errorf("fec: %q: K and R must be decimal integers", s)
	}
	if k < 1 || k > MaxK {
		return Mode{}, fmt.Errorf("fec: %q: K must be 1..%d", s, MaxK)
	}
	if r < 0 || r > MaxR {
		return Mode{}, fmt.Errorf("fec: %q: R must be 0..%d", s, MaxR)
	}
	return Mode{Kind: ModeFixed, K: k, R: r}, nil
}

func (m Mode) String() string {
	switch m.Kind {
	case ModeOff:
		return "off"
	case ModeAuto:
		return "auto"
	}
	return strconv.Itoa(m.K) + ":" + strconv.Itoa(m.R)
}

// AdaptConfig tunes ModeAuto. Zero fields take the defaults.
type AdaptConfig struct {
	// Ks are the group sizes the rule chooses from (default 16, 32, 64
	// and 192; above LegacyMaxK only for a peer that reads long groups,
	// SetLongGroups).
	// For the same parity share a larger K survives more loss (32:8
	// beats 16:4), at the price of waiting longer for a group to fill
	// before a loss is recovered; the rule takes the cheapest K:R that
	// meets its target and, at equal cost, the smaller K.
	Ks []int
	// MinR and MaxR are the floor and ceiling for R (default 1 and 48;
	// LegacyMaxR for a peer that does not read long groups)
	// while the path loses anything; a path clean for cleanReports
	// reports in a row gets no parity at all (the data symbols' indices
	// still show loss).
	MinR, MaxR int
	// MaxOverhead caps R/K, the parity share the rule may spend
	// (default 0.4).
	MaxOverhead float64
	// Target is the post-FEC inner loss the rule aims for while it knows
	// no round-trip time, and the loosest it ever aims for (default
	// 0.001). With a round-trip time (SetRTT) it aims for the lower
	// TCPResidual(rtt).
	Target float64
	// MinTarget is the strictest target (default 1e-7): below it parity
	// buys nothing a TCP flow could use.
	MinTarget float64
	// MinExpected: reports smaller than this are merged with the next one
	// instead of acted on, so an idle lane's 1-of-3 blip does not max R
	// (default 200 symbols).
	MinExpected uint32
	// MaxDepth caps interleaving (default MaxDepth; 1: none).
	MaxDepth int
}

// DefaultAdaptConfig is what a zero AdaptConfig means.
var DefaultAdaptConfig = AdaptConfig{Ks: []int{16, 32, 64, MaxK}, MinR: 1, MaxR: 48, MaxOverhead: 0.4,
	Target: 0.001, MinTarget: 1e-7, MinExpected: 200, MaxDepth: MaxDepth}

var errAdaptConfig = errors.New("fec: adapt config out of range")

// maxKs bounds AdaptConfig.Ks, so the rule's candidates fit on its stack.
const maxKs = 4

// Adapter picks K:R, and the interleaving depth, for a lane's encoder from
// its peer's loss reports.
//
// Rule (ModeAuto): p is the wire loss over the last lossWindow intervals
// (each of at least MinExpected symbols, about a second), or the latest
// interval's if that is higher; b, the mean length of a loss burst on the
// wire, is taken over reports with runs until they saw ≥ 10 lost symbols
// (an exponentially weighted average, weight ½), and forgotten once a whole
// window saw no loss. Among the group sizes Ks, R in [MinR, min(MaxR,
// K·MaxOverhead)] and, for bursty loss, depths 1, 2 and 4, choose the one
// with the smallest parity share R/K whose predicted post-FEC loss
// ResidualLossBurst(K, R, p, b at that depth) is ≤ the target (ties: the
// smaller K, then the smaller depth); if none is, the cheapest predicting
// at most twice the least any does. Depth d spreads a group's symbols d
// apart on the wire, which a Gilbert channel sees as shorter bursts
// (spacedBurst); the runs the peer reports are counted within groups, so
// they are converted back to the wire's with the depth in force. Taking
// the latest interval when it is worse raises protection on the first bad
// report; a cheaper choice is taken only when it would still predict
// ≤ target/2 (or the target is out of reach anyway), so the ratio does not
// flap on noise, and the window lets it fall within a few seconds once the
// path is clean. The target is Target until SetRTT gives the path's
// round-trip time, then TCPResidual of it, within [MinTarget, Target].
// A path whose last cleanReports reports lost nothing gets no parity at
// all (trackClean); its first loss brings back MinR at once.
// Loss reported while the path queues (SetPath(PathQueued)) is
// congestion, not the channel's: each such interval counts as losing at
// most a quarter of the p the rule last acted on, or the loss of the last
// interval judged with the path clear if that is more (a queue that comes
// and goes is not a reason to drop the protection a lossy channel was
// seen to need), unless the queue has stood through floorReports reports
// in a row; none below minQueuedLoss, and then no parity. It does not bring
// back MinR after a clean run, and its runs are not taken as bursts (a
// tail-drop queue drops in runs). Parity spent on congestion would fill
// the queue it overflows, and recovering it would hide from the inner
// flows the signal they slow down on; a loss-based flow that meets the
// channel's loss again drains the queue, and the next interval counts in
// full. While the path's state is unknown (no delay samples: an older
// peer, the first seconds) loss counts in full.
// ModeFixed and ModeOff ignore reports.
type Adapter struct {
	mode  Mode
	cfg   AdaptConfig
	k, r  int
	d     int     // interleaving depth
	burst float64 // mean loss-burst length on the wire (0: unknown)
	// window holds the last lossWindow intervals acted on; pending
	// gathers reports until one has MinExpected symbols.
	window  [lossWindow]LossReport
	winN    int
	pending LossReport
	// burstPend gathers reports with runs until they saw minBurstSample
	// lost symbols; burstSkip is how many reports after a change of
	// depth it leaves out.
	burstPend LossReport
	burstSkip int
	target    float64
	rtt       time.Duration
	fill      float64 // data symbols per flush timeout (SetFill; 0: unknown)
	// partial[n] is the parity for a group that closes early with n data
	// symbols (Partial), set from the first report on.
	partial   [MaxK]uint8
	partialOK bool
	// clean counts the reports in a row that lost nothing; from
	// cleanReports on the lane sends no parity.
	clean int
	// long: the peer's decoder reads long groups (SetLongGroups).
	long bool
	// path is what the round trip says (SetPath); p is the loss the
	// rule last acted on (pOK: it has), clearP the loss of the last
	// interval judged while the path was clear (the floor for
	// congestion), queued the reports in a row judged while it queued.
	path   PathState
	p      float64
	pOK    bool
	clearP float64
	queued int
}

// floorReports is how many reports in a row (about a second each) the
// path may queue before the loss it lost while clear stops being a floor
// for parity. A loss-based flow that overshoots the queue drains it
// within a round trip or two of its loss; a queue that stands for
// seconds is held by flows that do not slow down for loss (BBR, or a
// flow whose losses the parity hides), and a floor would keep paying
// parity into it: the queue would stay full, and its drops recovered.
const floorReports = 5

// cleanReports is how many loss reports in a row (about a second each,
// however little each carried) must lose nothing before a lane stops
// sending parity: a few seconds of a clean path, so a sparse lane (pings,
// a TCP flow's ACKs) pays nothing for protection it does not use. The
// first report that lost anything brings back MinR at once, and the rule
// sizes R for the loss at its next interval of MinExpected symbols.
const cleanReports = 3

// lossWindow is how many intervals (about a second each) p is taken
// over: enough that one quiet second does not drop protection, few enough
// that a path that has become clean stops paying for parity within
// seconds.
const lossWindow = 3

// depths are the interleaving depths the rule considers for bursty loss.
var depths = [...]int{1, 2, 4}

// NewAdapter returns an adapter starting at the mode's ratio (for auto, the
// smallest K with K/4 parity until the first report: a fresh lane on a
// lossy path must not lose packets while it waits for one, which a TCP
// flow in slow start pays for long after).
func NewAdapter(m Mode, cfg AdaptConfig) (*Adapter, error) {
	def := DefaultAdaptConfig
	if len(cfg.Ks) == 0 {
		cfg.Ks = def.Ks
	}
	if cfg.MinR == 0 {
		cfg.MinR = def.MinR
	}
	if cfg.MaxR == 0 {
		cfg.MaxR = max(def.MaxR, cfg.MinR)
	}
	if cfg.MaxOverhead == 0 {
		cfg.MaxOverhead = def.MaxOverhead
	}
	if cfg.Target == 0 {
		cfg.Target = def.Target
	}
	if cfg.MinTarget == 0 {
		cfg.MinTarget = min(def.MinTarget, cfg.Target)
	}
	if cfg.MinExpected == 0 {
		cfg.MinExpected = def.MinExpected
	}
	if cfg.MaxDepth == 0 {
		cfg.MaxDepth = def.MaxDepth
	}
	if len(cfg.Ks) > maxKs || cfg.MaxDepth < 1 || cfg.MaxDepth > MaxDepth || cfg.MinR < 1 || cfg.MinR > cfg.MaxR || cfg.MaxR > MaxR || !(cfg.MaxOverhead > 0) ||
		!(cfg.Target > 0 && cfg.Target < 1) || !(cfg.MinTarget > 0 && cfg.MinTarget <= cfg.Target) {
		return nil, errAdaptConfig
	}
	for _, k := range cfg.Ks {
		if !validRatio(k, cfg.MinR) || float64(cfg.MinR) > float64(k)*cfg.MaxOverhead {
			return nil, errAdaptConfig
		}
	}
	a := &Adapter{mode: m, cfg: cfg, target: cfg.Target, d: 1}
	switch m.Kind {
	case ModeOff:
		a.k, a.r = slices.Min(cfg.Ks), 0
	case ModeFixed:
		if !validRatio(m.K, m.R) {
			return nil, ErrRatio
		}
		a.k, a.r = m.K, m.R
	default:
		// Until the first report, a quarter of K: what 5% of loss
		// needs; a clean path's first report (a fraction of a second)
		// takes it down.
		a.k = slices.Min(cfg.Ks)
		a.r = max(cfg.MinR, min(a.k/4, a.maxR(a.k)))
	}
	return a, nil
}

// Ratio is the K:R the encoder should use for its next group, within
// what the peer's decoder reads (FitRatio).
func (a *Adapter) Ratio() (k, r int) { return FitRatio(a.k, a.r, a.long) }

// SetLongGroups tells the rule whether the peer's decoder reads groups
// beyond LegacyMaxK:LegacyMaxR (it announced so; false until it has).
// Without, the rule weighs no group larger, spends no more parity on one,
// and keeps blocks within what the legacy decoder's store holds.
func (a *Adapter) SetLongGroups(ok bool) { a.long = ok }

// Depth is the interleaving depth the encoder should use (Encoder.SetDepth).
func (a *Adapter) Depth() int { return a.d }

// Partial is the table for Encoder.SetPartialParity: for a group that
// closes before K (a slow lane's flush timeout, a rare size class), the
// least parity predicted to keep its residual loss within the target (or
// within what the full K:R predicts, if that is more), at most R. A group
// of 2 data symbols needs far fewer parity symbols than one of 32 for the
// same residual, and a slow lane sends little else. nil until a report has
// measured the loss, and outside auto mode: such groups then get R.
func (a *Adapter) Partial() []uint8 {
	if !a.partialOK {
		return nil
	}
	k, _ := a.Ratio()
	return a.partial[:k]
}

// SetRTT tells the rule the path's round-trip time (zero: unknown), which
// sets how little residual loss the inner flows need.
func (a *Adapter) SetRTT(rtt time.Duration) {
	a.rtt = rtt
	a.target = a.cfg.Target
	if rtt > 0 {
		a.target = min(a.cfg.Target, max(a.cfg.MinTarget, TCPResidual(rtt)))
	}
}

// SetFill tells the rule how many data symbols the lane sends within one
// flush timeout at its current rate (zero: unknown). A group larger than
// that never fills: it closes early with as many symbols, and a block of
// depth d spreads them over d groups. The rule then weighs each choice by
// the groups that will actually go out (K = min(K, fill/d)), not by groups
// that would only fill at a higher rate.
//
// A lower rate than before only halves the fill per call: a quiet second
// between bursts of traffic does not shrink the groups the next burst gets;
// an interval with nothing sent changes nothing.
func (a *Adapter) SetFill(n float64) {
	if !(n > 0) {
		return // nothing sent: nothing learnt
	}
	a.fill = min(max(n, a.fill/2), MaxK*MaxDepth)
}

// groupSize is the K a choice of nominal group size k at depth d gets at
// the lane's rate: k, or what fills within the flush timeout.
func (a *Adapter) groupSize(k, d int) int {
	budget := blockBudget
	if !a.long {
		k, budget = min(k, LegacyMaxK), legacyBlockBudget
	}
	k = min(k, int(float64(budget)/(float64(d)*(1+a.cfg.MaxOverhead))))
	if a.fill <= 0 {
		return k
	}
	return max(1, min(k, int(a.fill)/d))
}

// PathState is what the lane's round trip says about the path's queue.
type PathState uint8

const (
	PathUnknown PathState = iota // no recent delay sample
	PathClear                    // the round trip stands near its least
	PathQueued                   // well above it: a queue is building
	// PathDrained: the round trip stands near its least again, but the
	// sample before found a queue: the loss since is congestion as
	// under PathQueued, but the queue did not stand (floorReports).
	PathDrained
)

// String names the state as show prints it.
func (s PathState) String() string {
	switch s {
	case PathClear:
		return "clear"
	case PathQueued:
		return "queued"
	case PathDrained:
		return "drained"
	}
	return "unknown"
}

// Path is what SetPath said last.
func (a *Adapter) Path() PathState { return a.path }

// queuing reports whether loss reported now is congestion: the path
// queues, or the queue the sample before found has just drained.
func (a *Adapter) queuing() bool { return a.path == PathQueued || a.path == PathDrained }

// Loss is the wire loss the rule last acted on (ok: it has acted on a
// report), congestion capped as the rule counts it.
func (a *Adapter) Loss() (p float64, ok bool) { return a.p, a.pOK }

// SetPath tells the rule what the path's round trip says now: loss
// reported while it queues is congestion, which the rule spends less
// parity on each report, down to what the channel needed while clear.
func (a *Adapter) SetPath(s PathState) { a.path = s }

// Target is the residual loss the rule currently aims for.
func (a *Adapter) Target() float64 { return a.target }

// smallGroupR is the parity a group smaller than any of Ks (only the
// lane's rate makes it so) may carry whatever its size: a lane whose rate
// fills only small groups within the flush timeout may spend more than
// MaxOverhead on them. That costs at most smallGroupR parity
// symbols per flush timeout, little at such a rate, and a loss-based flow
// held back by residual loss needs the protection to grow its rate (and
// with it the groups): capped at MaxOverhead, one CUBIC flow through 5%
// loss at 50 ms stalled near 15 Mbit/s in groups of ~17.
const smallGroupR = 8

// maxR is the most parity the rule spends on a group of k.
func (a *Adapter) maxR(k int) int {
	r := int(float64(k) * a.cfg.MaxOverhead)
	if k < slices.Min(a.cfg.Ks) {
		r = max(r, min(smallGroupR, k))
	}
	_, most := FitRatio(k, a.cfg.MaxR, a.long)
	return max(a.cfg.MinR, min(most, r))
}

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
			c.n[i][j], c.maxR[i][j] = kk, a.maxR(kk)
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
		for j := range c.nd {
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
		for j := range c.nd {
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

// spacedBurst is the mean burst length a Gilbert channel of stationary loss
// p and mean burst burst shows to symbols spaced d apart: the d-step chain
// is again a Gilbert channel, leaving the bad state with probability
// (1−p)(1−λ^d), λ = 1 − enter − leave.
func spacedBurst(p, burst float64, d int) float64 {
	if burst <= 1 || d <= 1 || p <= 0 || p >= 1 {
		return burst
	}
	leave := 1 / burst
	lambda := 1 - p*leave/(1-p) - leave
	return 1 / ((1 - p) * (1 - math.Pow(lambda, float64(d))))
}

// wireBurst inverts spacedBurst: the wire's mean burst from one measured
// on symbols spaced d apart (as runs within groups at depth d are).
func wireBurst(p, measured float64, d int) float64 {
	if measured <= 1 || d <= 1 || p <= 0 || p >= 1 {
		return measured
	}
	ld := 1 - 1/(measured*(1-p)) // λ^d
	if ld <= 0 {
		return 1 / (1 - p) // no memory left at this spacing: independent
	}
	lambda := math.Pow(ld, 1/float64(d))
	return 1 / ((1 - p) * (1 - lambda))
}

// Observe feeds one peer report and returns the (possibly new) ratio; the
// depth is then Depth.
func (a *Adapter) Observe(rep LossReport) (k, r int) {
	if a.mode.Kind != ModeAuto {
		return a.Ratio()
	}
	a.pending = a.pending.Add(rep)
	a.trackClean(rep)
	switch {
	case a.queuing():
		// Tail drops come in runs: not the channel's bursts.
	case a.burstSkip > 0:
		// Runs counted at a depth no longer in force would be converted
		// back with the wrong one.
		a.burstSkip--
	case rep.Runs > 0:
		// Bursts are counted over as many reports as it takes to see
		// minBurstSample lost symbols: reports with a few losses each
		// count as much as one with many.
		a.burstPend = a.burstPend.Add(rep)
	}
	if a.pending.Expected < a.cfg.MinExpected {
		return a.Ratio()
	}
	interval := a.pending
	congested := a.queuing() && a.pOK
	ceiling := 0.0
	if congested {
		if a.path == PathDrained {
			a.queued = 0 // the queue came and went
		} else if a.queued++; a.queued >= floorReports {
			a.clearP = 0 // a standing queue: see floorReports
		}
		// Congestion: the interval counts as losing at most a quarter
		// of what the rule last acted on (so parity falls within a few
		// reports while the queue stands), or what an interval lost
		// with the path clear; the window keeps the interval as judged.
		if ceiling = max(a.p/4, a.clearP); ceiling < minQueuedLoss {
			ceiling = 0
		}
		interval = lossAtMost(interval, ceiling)
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
	a.p, a.pOK = p, true
	if !congested {
		a.queued = 0
	}
	if a.path == PathClear {
		// This interval's loss, not the window's: a window reaching
		// back into a queue's overshoot (a flow's start) would make
		// its drops the channel's for good.
		a.clearP = latest
	}
	if a.burstPend.Expected-a.burstPend.Received >= minBurstSample {
		// Runs were counted within groups, spaced by the depth then in
		// force (the last choice, give or take a report in flight).
		b := wireBurst(a.burstPend.Loss(), a.burstPend.Burst(), a.d)
		if a.burst > 0 {
			b = (a.burst + b) / 2
		}
		a.burst, a.burstPend = b, LossReport{}
	} else if p == 0 {
		a.burst, a.burstPend = 0, LossReport{} // a clean window: bursts of the past say nothing
	}
	cur := choice{a.groupSize(a.k, a.d), a.r, a.d}
	cur.r = min(cur.r, a.maxR(cur.k))
	var cands candidates
	a.predict(&cands, p, a.burst)
	predict := func(c choice) float64 {
		if v, ok := cands.lookup(a.cfg.Ks, c); ok {
			return v
		}
		return ResidualLossBurst(c.k, c.r, p, spacedBurst(p, a.burst, c.d))
	}
	now := predict(cur)
	want, reachable := a.best(&cands, a.target)
	switch {
	case latest > 0 && now > a.target && predict(want) < now/2:
		// Not enough protection, and want is clearly better: more at
		// once (but never on a clean interval, which only ages the
		// window's loss out; and not for a choice within noise of the
		// current one, which would only flap).
		cur = want
	case cheaper(want, cur):
		// Cheaper would do: only with margin, and (out of reach of the
		// target, where nothing has margin) only if it predicts no
		// more than twice the current loss.
		if down, ok := a.best(&cands, a.target/2); (ok || !reachable && predict(down) <= 2*now) && cheaper(down, cur) {
			cur = down
		}
	}
	if cur.d != a.d {
		a.burstSkip, a.burstPend = 2, LossReport{}
	}
	a.k, a.r, a.d = cur.k, cur.r, cur.d
	goal := max(a.target, predict(cur))
	partialParity(p, spacedBurst(p, a.burst, a.d), goal, a.cfg.MinR, a.r, a.partial[:a.k], a.sparse())
	a.partialOK = true
	if a.clean >= cleanReports || congested && p == 0 {
		a.parityOff()
	}
	return a.Ratio()
}

// minQueuedLoss is where the loss a queued path is judged to have (a
// quarter of the last each report while the queue stands) counts as none:
// parity goes off. From the 30% a flow's start-up overshoot may show, that
// takes four reports.
const minQueuedLoss = 0.005

// lossAtMost is r with its loss cut to at most p: the symbols lost beyond
// it count as received (and with them their runs and unrecovered data).
func lossAtMost(r LossReport, p float64) LossReport {
	lost := r.Expected - r.Received
	keep := uint32(p * float64(r.Expected))
	if lost <= keep {
		return r
	}
	r.Received = r.Expected - keep
	r.Unrecovered = min(r.Unrecovered, keep)
	r.Runs = min(r.Runs, keep)
	return r
}

// trackClean counts rep into the run of clean reports: after cleanReports
// of them parity goes off; a report that lost anything ends the run and,
// if parity was off, brings back MinR (and MinR for early-closing groups)
// before the rule has an interval to act on.
func (a *Adapter) trackClean(rep LossReport) {
	switch {
	case rep.Expected > rep.Received:
		a.clean = 0
		if a.r < a.cfg.MinR && !a.queuing() {
			a.r = a.cfg.MinR
			for i := range a.partial {
				a.partial[i] = uint8(a.cfg.MinR)
			}
			a.partialOK = true
		}
	case rep.Expected > 0:
		if a.clean++; a.clean >= cleanReports {
			a.parityOff()
		}
	}
}

// sparse reports whether the lane's groups close early with a packet or
// two (fewer than two data symbols per flush timeout): a ping lane, an
// ACK stream.
func (a *Adapter) sparse() bool { return a.fill > 0 && a.fill < 2 }

// parityOff stops parity: a clean path (and with no parity, nothing to
// interleave). The partial table stays: a block still open under the
// previous R closes with it (a 0 there would mean the full R).
func (a *Adapter) parityOff() {
	a.r, a.d = 0, 1
}

// minBurstSample is the fewest lost symbols a mean burst length is taken
// over: a few losses say little about their pattern.
const minBurstSample = 10

// Path assumptions of TCPResidual: one inner flow of full-size segments
// (MSS 1360 bytes, what a 1410-byte inner MTU carries over IPv6) should
// still reach tcpGoal bits per second.
const (
	tcpMSSBits = 1360 * 8
	tcpGoal    = 1e9
)

// TCPResidual is the inner loss rate at which one loss-based TCP flow over
// a path of round-trip time rtt can still reach 1 Gbit/s: the larger of the
// rates CUBIC's response function (RFC 9438: C = 0.4, β = 0.7, average
// window 1.054·(RTT/p)^¾ segments) and the Reno-friendly one (Mathis:
// 1.22/√p segments per RTT) allow. On a LAN that is ~1e-4; at 50 ms,
// ~7e-7: a long path needs far less residual loss than a short one.
func TCPResidual(rtt time.Duration) float64 {
	t := rtt.Seconds()
	if t <= 0 {
		return 1
	}
	cubic := math.Pow(1.054*tcpMSSBits*math.Pow(t, -0.25)/tcpGoal, 4.0/3)
	reno := math.Pow(1.22*tcpMSSBits/(t*tcpGoal), 2)
	return math.Max(cubic, reno)
}

// ResidualLoss predicts the fraction of inner packets still lost after FEC
// with K:R under independent wire loss p: a group fails when more than R of
// its n=K+R symbols are lost, and then loses on average x·K/n of its K data
// symbols for x symbols lost, i.e. Σ_{x>R} Binom(n,x,p)·x/n.
func ResidualLoss(k, r int, p float64) float64 {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	n := k + r
	sum := 0.0
	for x := r + 1; x <= n; x++ {
		lc, _ := math.Lgamma(float64(n + 1))
		l1, _ := math.Lgamma(float64(x + 1))
		l2, _ := math.Lgamma(float64(n - x + 1))
		sum += math.Exp(lc-l1-l2+float64(x)*math.Log(p)+float64(n-x)*math.Log1p(-p)) * float64(x) / float64(n)
	}
	return sum
}

// ResidualLossBurst predicts the post-FEC inner loss of K:R under bursty
// wire loss: a Gilbert channel whose bad state loses every symbol and
// lasts burst symbols on average, with stationary loss p. The number of
// symbols of a group lost is counted exactly over the two-state chain
// (O((K+R)²)); a group fails when more than R are lost, losing x/n of its
// data as in ResidualLoss. burst ≤ 1 is independent loss (ResidualLoss),
// and so is a k:r the codec does not take (the chain's arrays are sized
// for MaxK+MaxR symbols).
func ResidualLossBurst(k, r int, p, burst float64) float64 {
	if !validRatio(k, r) {
		return ResidualLoss(k, r, p)
	}
	if burst <= 1 {
		return ResidualLoss(k, r, p)
	}
	var out [MaxR + 1]float64
	residuals(k, p, burst, out[:r+1])
	return out[r]
}

// residuals sets out[r] to the predicted residual loss of k:r for every r
// below len(out), independent or bursty, in one pass of the chain up to
// k+len(out)-1 symbols (the Adapter's candidates for one K cost one pass;
// ResidualLoss's closed form would cost O(r·k) log-gammas per K:R).
func residuals(k int, p, burst float64, out []float64) {
	if p <= 0 || p >= 1 {
		for r := range out {
			out[r] = ResidualLoss(k, r, p)
		}
		return
	}
	var g gilbert
	g.start(p, burst)
	for i := 1; ; i++ {
		if r := i - k; r >= 0 {
			out[r] = g.tail[r+1] / float64(i)
		}
		if i == k+len(out)-1 {
			return
		}
		g.step()
	}
}

// gilbert walks a Gilbert channel of stationary loss p and mean burst length
// burst (≤ 1: independent loss) one symbol at a time. After i symbols
// (start counts the first), tail[x] is Σ_{y≥x} P(y of the i lost)·y, so a
// group of i symbols that fails when more than r are lost loses
// tail[r+1]/i of them on average. It is a value type with methods, not a
// callback, so a walk stays on the caller's stack.
type gilbert struct {
	enter, leave float64
	i            int // symbols counted
	cur          int
	// st[buf][state][x]: probability of being in state (0 good, 1 bad)
	// after i symbols with x of them lost.
	st   [2][2][MaxK + MaxR + 2]float64
	tail [MaxK + MaxR + 3]float64
}

// start counts the first symbol, drawn from the stationary distribution.
func (g *gilbert) start(p, burst float64) {
	// Independent loss is the chain that enters and stays in the bad
	// state with the same probability p.
	g.leave = 1 - p
	if burst > 1 {
		g.leave = 1 / burst
	}
	g.enter = min(1, p*g.leave/(1-p)) // so that the bad state's share is p
	g.i, g.cur = 1, 0
	g.st[0][0][0], g.st[0][1][1] = 1-p, p
	g.sum()
}

// step counts one more symbol; at most MaxK+MaxR+1 may be counted. Locals
// and slices cut to length keep the loop free of loads through g and of
// bounds checks: this walk is most of what a loss report costs.
func (g *gilbert) step() {
	n := g.i + 1
	a0, a1 := g.st[g.cur][0][:n], g.st[g.cur][1][:n]
	b0, b1 := g.st[1-g.cur][0][:n+1], g.st[1-g.cur][1][:n+1]
	clear(b0)
	clear(b1)
	stay, enter, leave, keep := 1-g.enter, g.enter, g.leave, 1-g.leave
	for x := range a0 {
		gd, bd := a0[x], a1[x]
		b0[x] += gd*stay + bd*leave
		b1[x+1] += gd*enter + bd*keep
	}
	g.cur = 1 - g.cur
	g.i = n
	g.sum()
}

func (g *gilbert) sum() {
	n := g.i + 1
	s0, s1, t := g.st[g.cur][0][:n], g.st[g.cur][1][:n], g.tail[:n+1]
	acc := 0.0
	t[n] = 0
	for x := n - 1; x >= 0; x-- {
		acc += (s0[x] + s1[x]) * float64(x)
		t[x] = acc
	}
}

// partialParity sets out[n], for 1 ≤ n < len(out), to the least r in
// [minR, maxR] whose group of n data symbols is predicted to lose at most
// goal of its inner packets at wire loss p in bursts of mean length burst,
// or maxR if none is. With sparse (the lane's groups close early with a
// packet or two: a ping, a lone ACK) never more than n unless minR asks
// for more: at most one parity per data symbol, never more protection
// bytes than data. A busy lane's early groups (the end of a burst) keep
// what their loss needs. One walk of the chain serves every n and r.
func partialParity(p, burst, goal float64, minR, maxR int, out []uint8, sparse bool) {
	fill := maxR
	if p <= 0 {
		fill = minR
	}
	for n := range out {
		out[n] = uint8(fill)
		if sparse {
			out[n] = uint8(min(fill, max(n, minR)))
		}
	}
	if len(out) < 2 || p <= 0 || p >= 1 || minR >= maxR {
		return
	}
	var found [MaxK]bool
	var g gilbert
	g.start(p, burst)
	for i := 1; ; i++ {
		for r := minR; r <= maxR; r++ {
			// For one n, r grows with i: the first r found is the least.
			if n := i - r; n >= 1 && n < len(out) && !found[n] && (sparse && r >= n || g.tail[r+1]/float64(i) <= goal) {
				out[n], found[n] = uint8(r), true
			}
		}
		if i == len(out)-1+maxR {
			return
		}
		g.step()
	}
}
