// The `fec =` setting (Mode) and the Adapter that carries it out: its
// configuration, its state, and what the lane tells it (the peer's reader,
// the round-trip time, the rate, the path's queue). The rule that turns
// loss reports into K:R is in adaptrule.go, the loss model it predicts with
// in residual.go.

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
	// (default 0.4), but for small groups and a flow's start (maxR).
	MaxOverhead float64
	// Target is the post-FEC inner loss the rule aims for while it knows
	// no round-trip time or the lane sends only small packets
	// (SetSent), and the loosest it ever aims for (default 0.001).
	// With a round-trip time (SetRTT) it aims for the lower
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
// wire, is taken over reports with runs until they saw burstSample lost
// symbols (10 per depth of interleaving, each report weighed by its own:
// runSample; an exponentially weighted average, weight ½), and forgotten
// once a whole window saw no loss or the path changed; until measured it
// is what another lane of the peer measured (Borrow), or assumed
// unknownBurst, and only
// the deepest interleave is weighed (burstLen); a sample ends that
// assumption for independent loss only over twice burstSample (sample).
// Among the group sizes Ks, R in [MinR, min(MaxR, K·MaxOverhead)] (more
// for small groups, and up to K while a flow starts: maxR) and,
// for bursty loss, depths 1, 2 and 4, choose the one
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
// flap on noise (the first interval acted on takes the cheapest meeting
// the target: the start-up guess is no choice to keep), and the window
// lets it fall within a few seconds once the path is clean. The target
// is Target until SetRTT gives the path's round-trip time, then
// TCPResidual of it, within [MinTarget, Target]; Target again while the
// lane sends only small packets (SetSent: ACKs, pings).
// A path whose last cleanReports reports lost nothing gets no parity at
// all (trackClean); its first loss brings back MinR at once, and if the
// run said nothing of a flow's loss (before any interval was acted on,
// or too few symbols: pings before a flow, a lane idle between flows),
// Busy brings back the start-up guess when a flow starts.
// Loss reported while the path queues (SetPath(PathQueued)) is
// congestion, not the channel's: each such interval counts as losing at
// most a quarter of the p the rule last acted on, or the floor if that is
// more (each interval's loss taken as the most it is within chance of,
// LossReport.lossBound): the loss of the last interval judged with the
// path clear (a queue that comes and goes is not a reason to drop the
// protection a lossy channel was seen to need), or, until an interval is
// judged clear, the
// least loss of any interval acted on (each lost at least the channel's
// share; a flow's start-up overshoot drains through several reports
// judged queued or drained). A queue that stood through floorReports
// reports in a row, or was found in 2·floorReports before any was judged
// clear, each losing more than the floor explains, ends assumed bursts
// first and then drops the floor (standingQueue); none below
// minQueuedLoss, and then no parity. It does not bring back
// MinR after a clean run, and its runs only lower the burst estimate (a
// tail-drop queue drops in runs). Parity spent on congestion would fill
// the queue it overflows, and recovering it would hide from the inner
// flows the signal they slow down on; a loss-based flow that meets the
// channel's loss again drains the queue, and the next interval counts in
// full. While the path's state is unknown (no delay samples: an older
// peer, the first seconds) loss counts in full. A report the peer split
// by the queue its datagrams met (PathSplit) counts as on a clear path:
// its caller has already cut the queue's share out; but its runs, which
// took in the queue's overflows, may only lower the burst estimate.
// ModeFixed and ModeOff ignore reports.
type Adapter struct {
	mode  Mode
	cfg   AdaptConfig
	k, r  int
	d     int     // interleaving depth
	burst float64 // mean loss-burst length on the wire (0: unknown)
	bound bool    // burst is only split or queued reports' bound (takeBursts)
	// sampled: the last report's runs set burst (Sampled).
	sampled bool
	// window holds the last lossWindow intervals acted on; pending
	// gathers reports until one has MinExpected symbols.
	window  [lossWindow]LossReport
	winN    int
	pending LossReport
	// burstPend gathers reports with runs until they are a sample,
	// splitPend those judged PathSplit, or queued but losing no more
	// than the floor explains (nearFloor); burstSkip is how many reports
	// after a change of depth they leave out.
	burstPend, splitPend runSample
	burstSkip            int
	assumed              int  // split reports while unmeasured (burstLen)
	noRuns               bool // a report lost symbols and counted no runs
	boundRuns            bool // the next report's runs only bound (BoundRuns)
	target               float64
	rtt                  time.Duration
	small, few1, few2    bool    // the lane's data are small packets (SetSent); Busy's guesses since the rule last sized a flow (one, two)
	fill                 float64 // data symbols per flush timeout (SetFill; 0: unknown)
	// partial[n] is the parity for a group that closes early with n data
	// symbols (Partial): the start-up guess's (startGuess), then each
	// report's.
	partial   [MaxK]uint8
	partialOK bool
	// quiet: the lane's last timer tick was sparse (SetTickFill).
	quiet bool
	// clean counts the reports in a row that lost nothing, cleanSyms
	// the symbols they held; from cleanReports on the lane sends no
	// parity. guessOff: such a run took parity off while it said
	// nothing of a flow's loss: before the rule acted on any interval,
	// or holding fewer than MinExpected symbols after loss (Busy).
	clean     int
	cleanSyms uint32
	guessOff  bool
	// fresh: the start-up guess is in force (from NewAdapter or Busy),
	// and the next interval acted on is a flow's first.
	fresh bool
	// starting counts down the intervals a flow's start still acts on
	// with the start-up allowance (startupReports, maxR).
	starting int
	// guessR is the R of the start-up guess in force (guessing).
	guessR int
	// long: the peer's decoder reads long groups (SetLongGroups).
	long bool
	// path is what the round trip says (SetPath); p is the loss the
	// rule last acted on (pOK: it has), clearP the floor for congestion
	// (floorKnown: taken from an interval judged clear, or dropped for
	// a queue that stands; until then the least loss of any interval
	// acted on), queued the reports in a row that found a queue
	// overflowing (standingQueue), unclear those that found one before
	// the floor was known.
	path       PathState
	p          float64
	pOK        bool
	clearP     float64
	floorKnown bool
	queued     int
	unclear    int
}

// floorReports is how many reports in a row (about a second each) the
// path may queue, losing more than the floor explains, before the loss it
// lost while clear stops being a floor for parity (standingQueue). A
// loss-based flow that overshoots the queue drains it within a round trip
// or two of its loss; a queue that stands and overflows for seconds is
// held by flows that do not slow down for loss (BBR, or a flow whose
// losses the parity hides), and a floor would keep paying parity into
// it: the queue would stay full, and its drops recovered.
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
// smallest K with the most parity the rule spends on it until the first
// report: a fresh lane on a lossy path must not lose packets while it
// waits for one, which a TCP flow in slow start pays for long after).
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
	a.NewPath()
	switch m.Kind {
	case ModeOff:
		a.k, a.r = slices.Min(cfg.Ks), 0
	case ModeFixed:
		if !validRatio(m.K, m.R) {
			return nil, ErrRatio
		}
		a.k, a.r = m.K, m.R
	default:
		// Until the first interval it acts on, the most it spends on the
		// smallest K, with the start-up allowance (16:16 x4 by default):
		// a loss-based flow's slow start runs in these groups, and one
		// loss there ends it with a small window that grows back only
		// slowly at a long round trip. At 5% loss in bursts of 4, 16:16
		// x4 leaves ~3e-7 of the inner packets lost (16:6 x4: ~1.5e-3,
		// and a slow start sends thousands before the first report is
		// heard); a clean path's first report (a fraction of a second)
		// takes it down.
		a.d = a.deepest() // no report counted at another depth yet
		a.startGuess()
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
	// PathSplit: the peer split the loss it reports by the queue its
	// datagrams met, the queue overflowed, and the report counts the
	// channel's loss alone (the loss while the queue stood is left
	// out): judged as clear, but its runs only lower the burst estimate
	// (the overflows' runs are still in them).
	PathSplit
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
	case PathSplit:
		return "split"
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

// NewPath tells the rule that the lane's datagrams take a new path (the
// peer's address changed, or the lane is new): what the old path's clear
// intervals lost says nothing of the new one's channel, so the floor for
// congestion is the least loss of the intervals until one is judged
// clear again, and its bursts are assumed until measured. The ratio and
// the loss the rule acts on stay: the new path's reports move them.
func (a *Adapter) NewPath() {
	a.clearP, a.floorKnown, a.queued, a.unclear = math.Inf(1), false, 0, 0
	a.forgetBursts()
}
