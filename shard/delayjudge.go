package shard

import (
	"time"

	"github.com/yip-router/yip-router/fec"
)

// Dense round-trip samples on a busy lane, and the judgement of a loss
// report by the samples of the packets it counts.
//
// A bottleneck's queue overflows for a moment: a loss-based flow fills it,
// loses, and backs off within a round trip or two, so the queue stands
// full for tens of milliseconds around each overflow and lower in
// between. One sample a second (the loss reports' echo alone) mostly
// misses that moment, and the queue's drops then reach the adapter as the
// channel's. So a lane that carries traffic also sends a stamp-only report
// (an empty loss report with the delay echo, which asks for no answer)
// about every stampEvery (controlTimers), and its peer's do the same:
// each side takes about ten samples a second.
//
// Each sample is kept by when its stamp was sent, which the echo says: the
// stamp met the queue the packets sent beside it met. A report the peer
// sent counts losses among the packets we sent up to about a round trip
// before it arrived, and since the last report's (less judgeOverlap, as
// the peer counts a loss only when its group closes or expires). So it is
// judged by the samples of stamps sent in that span (judgeDense): a queue
// found by most of them, and by the last of them, stands
// (fec.PathQueued); one found by any of them came and went
// (fec.PathDrained, congestion as well); none: the channel lost what the
// report counts. The samples of the span's last stamps come back about a
// round trip and a stamp wait after the report arrives, so the adapter
// hears the report only then (judgeLag, Shard.observeHeld).

// recentLen is how many of the latest samples a lane keeps to judge a
// report by: a report's span (a second and a quarter at most, plus
// judgeOverlap) and the judgeLag after it hold about 20 at about ten a
// second (the peer's stamps, its reports, repeated echoes).
const recentLen = 32

// judgeOverlap: the span a report is judged by starts this much before
// the last one's ended. The peer counts a lost symbol when its group
// closes or expires (fec.DefaultGroupTTL), so an overflow at the end of
// one span may show in the next report.
const judgeOverlap = fec.DefaultGroupTTL

// minDense is the fewest samples in a report's span that are judged by
// their share: fewer is a sparse lane, judged by its latest two.
const minDense = 4

// recentSamples is a ring of the latest samples by their stamps' send
// time, on the stamps' 32-bit microsecond clock (only differences of
// seconds are taken), so a hub's lanes each keep 256 bytes for it.
type recentSamples struct {
	sent, rtt [recentLen]uint32
	n, next   int
}

// add keeps a sample of a stamp sent at sent.
func (r *recentSamples) add(rtt time.Duration, sent time.Time) {
	r.sent[r.next] = stamp(sent)
	r.rtt[r.next] = uint32(min(rtt/time.Microsecond, maxDelaySample/time.Microsecond))
	r.next = (r.next + 1) % recentLen
	r.n = min(r.n+1, recentLen)
}

// over counts the samples of stamps sent after from and by to, and those
// of them above limit; last: the one sent last is.
func (r *recentSamples) over(from, to time.Time, limit time.Duration) (n, above int, last bool) {
	lo, span := stamp(from), uint32(max(to.Sub(from), 0)/time.Microsecond)
	lim := uint32(min(limit/time.Microsecond, maxDelaySample/time.Microsecond))
	var latest uint32
	for i := range r.n {
		if age := r.sent[i] - lo; age > 0 && age <= span { // modular: the clock wraps
			n++
			if r.rtt[i] > lim {
				above++
			}
			if age >= latest {
				latest, last = age, r.rtt[i] > lim
			}
		}
	}
	return n, above, last
}

// judgeDense judges the losses of a report among the packets sent by to,
// limit being the round trip above which a sample found a queue: by the
// samples of stamps sent since the last report's span ended, less
// judgeOverlap (or in the second before to, with no recent report); ok
// false with fewer than minDense of them.
func (d *pathDelay) judgeDense(to time.Time, limit time.Duration) (st fec.PathState, ok bool) {
	from := d.judgedTo
	if from.IsZero() || !from.Before(to) || to.Sub(from) > 2*sampleStale {
		from = to.Add(-lossReportEvery)
	}
	n, above, last := d.recent.over(from.Add(-judgeOverlap), to, limit)
	switch {
	case n < minDense:
		return 0, false
	case last && 2*above > n:
		return fec.PathQueued, true
	case above > 0:
		return fec.PathDrained, true
	}
	return fec.PathClear, true
}

// judge is state for a loss report that arrived at arrived, judged at
// now: the next report is judged by the samples after its span.
func (d *pathDelay) judge(now, arrived time.Time, echo bool) fec.PathState {
	st, to := d.verdict(now, arrived, echo)
	if !to.IsZero() {
		d.judgedTo = to
	}
	return st
}

// judgeLag is how long a loss report waits for the samples that judge it:
// the stamps sent up to a round trip before it arrived come back within a
// round trip, the queue they met (up to half the least round trip before
// it counts as one) and the peer's hold of the stamp (up to a stamp
// wait), seen at the next tick. Never more than half a report's wait; a
// report still held when the next arrives (the first few come
// earlyReportGap apart) is judged then.
func (d *pathDelay) judgeLag() time.Duration {
	hold := time.Duration(float64(stampEvery) * (1 + jitterFraction))
	return min(d.base()/2+hold+idlePoll, lossReportEvery/2)
}
