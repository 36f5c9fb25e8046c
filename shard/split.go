package shard

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// The loss split: the receiver of a lane's datagrams tells, in its loss
// report, how much of what it lost was lost while the path's queue stood
// high, and how much while it did not, so the sender's FEC adapter sizes
// parity for the channel's loss alone.
//
// Every frame with the delay echo (delay.go) to a peer announcing
// FeatureLossSplit also carries, after the echo:
//
//	0xED ‖ sent (4) ‖ clear expected (4) ‖ clear lost (4) ‖
//	       queued expected (4) ‖ queued lost (4)            big endian
//
// sent is how many datagrams the lane had sent before this frame (data,
// parity, control alike). The receiver takes each two of the peer's frames
// as the ends of a slice: the peer sent (sent₂ − sent₁) datagrams between
// them, of which it received what arrived between them; the rest were lost.
// The stamps at both ends crossed the path beside those datagrams, so
// their one-way delay (our clock at arrival − the peer's stamp, less the
// least of the last ~24 s, which takes out the clocks' offset) is
// the queue they met. A slice either of whose ends met a queue above
// half the median of the slots' deepest queues over the last ~24 s
// (lossSplit.limit) is queued, else clear. Datagrams that arrive a slice
// late (reordered) are taken off the loss of the slice before; a frame
// reordered behind a later one is no slice end; a peer whose clock jumps
// (or whose count goes back after a handshake: a restart), or a lane idle
// longer than the slots span, starts the delays anew. The counts are
// totals over the slices since the frame's last loss report (zero on
// stamp-only frames; a report that falls due with nothing to report
// drops them).
//
// A queue overflowing drops datagrams only while it is full, so the
// slices around it are queued, and the clear slices' loss rate is the
// channel's. A queued slice's channel losses are left out of both counts,
// which costs the estimate samples, not accuracy, as long as the channel
// loses as much while its delay is high as while it is low: a radio link
// whose retries both delay and lose datagrams loses more in the slices
// its delay marks queued, and its rate comes out low. The sender cuts the
// report's loss to the clear slices' rate over its peer's latest
// splits, or this split's if higher (channelLoss.report), when they hold
// at least minSplitExpected datagrams, times the mean burst the adapter
// predicts with (splitNeed). A report whose slices were nearly
// all queued (a queue that stood all along) is cut to the last rate
// taken, or the queued slices' if lower, so the queue's drops stay out
// while the channel's loss stays protected; before any rate it is judged
// by the round trip (delayjudge.go).
//
// A peer that does not announce FeatureLossSplit gets neither the split
// nor the stamps between reports, and its reports are judged by the round
// trip.

// splitLen is the extension's length, splitMark its first byte.
const (
	splitLen  = 21
	splitMark = 0xED
)

// minSplitExpected is the fewest datagrams the clear slices of a report
// must hold for their loss rate to be taken as the channel's: the
// adapter's own least interval (fec.DefaultAdaptConfig.MinExpected).
const minSplitExpected = 200

// maxSlice bounds a slice: two frames further apart than this (the lane
// fell idle), or a count that moved by more than maxSliceDatagrams (the
// peer restarted), are no slice.
const (
	maxSlice          = 2 * time.Second
	maxSliceDatagrams = 1 << 20
)

// splitCounts is a report's split: datagrams expected and lost in clear
// and in queued slices.
type splitCounts struct {
	clearExp, clearLost, queuedExp, queuedLost uint32
}

// channel is the clear slices' loss rate, ok with at least need
// datagrams in them (splitNeed).
func (c splitCounts) channel(need uint32) (p float64, ok bool) {
	if c.clearExp < max(need, 1) {
		return 0, false
	}
	return float64(min(c.clearLost, c.clearExp)) / float64(c.clearExp), true
}

// late is c with n datagrams that arrived late taken off the lost of the
// last slice's kind (queued or not).
func (c splitCounts) late(n uint64, queued bool) splitCounts {
	if queued {
		c.queuedLost -= uint32(min(n, uint64(c.queuedLost)))
	} else {
		c.clearLost -= uint32(min(n, uint64(c.clearLost)))
	}
	return c
}

// add is c with one slice of exp datagrams, lost of them, counted in.
func (c splitCounts) add(exp, lost uint32, queued bool) splitCounts {
	if queued {
		c.queuedExp, c.queuedLost = c.queuedExp+exp, c.queuedLost+lost
	} else {
		c.clearExp, c.clearLost = c.clearExp+exp, c.clearLost+lost
	}
	return c
}

// splits reports whether ln's peer announced the loss split (and the
// echo it follows): our reports and stamps to it carry the split, its
// to us are read for one, and busy lanes stamp between reports.
func (ln *lane) splits() bool { return ln.echoes() && ln.peerFeatures&FeatureLossSplit != 0 }

// lossSplit is a lane's account of its peer's datagrams between the
// peer's frames, and its record of the one-way delay they met.
type lossSplit struct {
	// At the peer's last frame: its count, ours of received datagrams,
	// its one-way delay (raw: our clock − its stamp, modular), when.
	sent uint32
	rx   uint64
	owd  uint32
	at   time.Time // zero: none
	// last is the last slice's loss and whether it was queued, which
	// late arrivals are credited against (zero when a frame formed no
	// slice).
	lastLost   uint32
	lastQueued bool
	// rekeyed: a handshake came since the last frame (rekeyed); the
	// peer may have restarted, and a count that went back says so.
	rekeyed bool
	// owdMin and owdMax hold the least and the largest raw one-way
	// delay per slotEvery, over delaySamples slots (about 24 s of
	// traffic; slots older than that are dropped on the next frame): the
	// least is the clocks' offset plus the path's delay, the largest
	// less it the slot's deepest queue.
	owdMin, owdMax [delaySamples]uint32
	n, next        int
	slotAt         time.Time
	// counts gathers the slices until the next loss report of ours.
	counts splitCounts
}

// note takes a frame of the peer's that arrived at now: its stamp and
// count, and rx, the datagrams the lane received before it.
func (s *lossSplit) note(now time.Time, peerStamp, sent uint32, rx uint64) {
	owd := stamp(now) - peerStamp
	back := int32(sent-s.sent) < 0 && !s.at.IsZero()
	d := time.Duration(int32(owd-s.least())) * time.Microsecond
	switch {
	case s.n > 0 && (d > maxDelaySample || d < -maxDelaySample),
		back && s.rekeyed,
		s.n > 0 && now.Sub(s.slotAt) > delaySamples*slotEvery:
		// The peer restarted (a new clock, a count from zero after a
		// handshake), or the lane was idle longer than the slots
		// span: the delays start anew.
		*s = lossSplit{counts: s.counts}
	case back:
		// A frame the network reordered behind a later one: its
		// slice was counted with the later one.
		s.slot(owd, now)
		return
	}
	s.rekeyed = false
	s.slot(owd, now)
	exp := sent - s.sent
	prevLost := s.lastLost
	s.lastLost = 0
	if !s.at.IsZero() && now.Sub(s.at) <= maxSlice && exp <= maxSliceDatagrams && rx >= s.rx {
		got := rx - s.rx
		queued := max(s.queue(s.owd), s.queue(owd)) > s.limit()
		var lost uint32
		if uint64(exp) >= got {
			lost = exp - uint32(got)
		} else {
			// Datagrams the last slice counted lost arrived late
			// (reordered): it lost fewer, never less than none.
			// (Across a report they stay counted.)
			s.counts = s.counts.late(min(got-uint64(exp), uint64(prevLost)), s.lastQueued)
		}
		s.counts = s.counts.add(exp, lost, queued)
		s.lastLost, s.lastQueued = lost, queued
	}
	s.sent, s.rx, s.owd, s.at = sent, rx, owd, now
}

// noteRekey notes a handshake: the next frame's count may start anew.
func (s *lossSplit) noteRekey() { s.rekeyed = true }

// slot keeps owd in the current slot's least and largest.
func (s *lossSplit) slot(owd uint32, now time.Time) {
	if s.n > 0 && now.Sub(s.slotAt) < slotEvery {
		i := (s.next + delaySamples - 1) % delaySamples
		if int32(owd-s.owdMin[i]) < 0 { // modular: the clocks wrap
			s.owdMin[i] = owd
		}
		if int32(owd-s.owdMax[i]) > 0 {
			s.owdMax[i] = owd
		}
		return
	}
	s.owdMin[s.next], s.owdMax[s.next] = owd, owd
	s.next = (s.next + 1) % delaySamples
	s.n = min(s.n+1, delaySamples)
	s.slotAt = now
}

// least is the least raw one-way delay of the slots (0: none).
func (s *lossSplit) least() uint32 {
	if s.n == 0 {
		return 0
	}
	least := s.owdMin[0]
	for _, m := range s.owdMin[1:s.n] {
		if int32(m-least) < 0 {
			least = m
		}
	}
	return least
}

// queue is the queue a raw one-way delay met: above the least.
func (s *lossSplit) queue(owd uint32) time.Duration {
	return time.Duration(max(int32(owd-s.least()), 0)) * time.Microsecond
}

// limit is the queue above which a slice is queued: half the median of
// the slots' deepest queues (one late frame does not move it), at least
// queueMin; 0 before any frame. A tail-drop queue drops only when full,
// so the slices of its overflows stand above it; a limit too low costs
// samples, not accuracy.
func (s *lossSplit) limit() time.Duration {
	if s.n == 0 {
		return 0
	}
	least := s.least()
	var deep [delaySamples]int32
	for i, m := range s.owdMax[:s.n] {
		deep[i] = max(int32(m-least), 0)
	}
	slices.Sort(deep[:s.n])
	return max(time.Duration(deep[s.n/2])*time.Microsecond/2, queueMin)
}

// take returns the counts since the last report and starts anew.
func (s *lossSplit) take() splitCounts {
	c := s.counts
	s.counts = splitCounts{}
	return c
}

// appendSplit appends the extension: sent, and c.
func appendSplit(b []byte, sent uint32, c splitCounts) []byte {
	b = append(b, splitMark)
	b = binary.BigEndian.AppendUint32(b, sent)
	b = binary.BigEndian.AppendUint32(b, c.clearExp)
	b = binary.BigEndian.AppendUint32(b, c.clearLost)
	b = binary.BigEndian.AppendUint32(b, c.queuedExp)
	return binary.BigEndian.AppendUint32(b, c.queuedLost)
}

// readSplit reads the extension from b (the bytes after the echo); ok
// false without it (padding).
func readSplit(b []byte) (sent uint32, c splitCounts, ok bool) {
	if len(b) < splitLen || b[0] != splitMark {
		return 0, splitCounts{}, false
	}
	be := binary.BigEndian
	return be.Uint32(b[1:]), splitCounts{be.Uint32(b[5:]), be.Uint32(b[9:]), be.Uint32(b[13:]), be.Uint32(b[17:])}, true
}

// channelKeep is how long a split counts towards the channel's rate:
// about the 24 s the least one-way delay is taken over.
const channelKeep = 30 * time.Second

// channelSplits is how many of the peer's latest splits the channel's
// rate is taken over: the peer counts a slice's loss when the slice ends,
// its report's when the FEC group closes or expires (up to 250 ms
// later), so a burst near a report's end may fall in one report's split
// and the next's symbols.
const channelSplits = 3

// channelLoss is what the peer's splits say of the channel: the clear
// slices of its latest splits (when each arrived), and the rate it last
// took (known: it has taken one).
type channelLoss struct {
	clear [channelSplits]splitCounts
	when  [channelSplits]time.Time
	next  int
	p     float64
	known bool
}

// rate is the clear slices' loss rate over the splits within channelKeep
// of now, ok with at least need datagrams in them.
func (ch *channelLoss) rate(now time.Time, need uint32) (p float64, ok bool) {
	var sum splitCounts
	for i, c := range ch.clear {
		if !ch.when[i].IsZero() && now.Sub(ch.when[i]) <= channelKeep {
			sum.clearExp += c.clearExp
			sum.clearLost += c.clearLost
		}
	}
	return sum.channel(need)
}

// splitNeed is the fewest datagrams slices must hold for their loss rate
// to be taken, on a channel losing in bursts of mean length burst (the
// adapter's at the loss it acted on, measured or assumed; 1 or less:
// independent loss, or none acted on yet):
// minSplitExpected, times the burst. A few hundred datagrams of a bursty
// channel hold two or three of its bursts, or none: the first clear
// slices of a flow on a channel losing 5% in bursts of 4 read 1.4%, and
// with its queue standing that rate held for three seconds of parity
// sized for it.
// The burst counts up to twice the assumed one (fec: MaxDepth): a
// measured burst of an outage would otherwise keep the rate from being
// taken for many reports.
func splitNeed(burst float64) uint32 {
	if !(burst > 1) {
		burst = 1 // NaN too
	}
	return uint32(minSplitExpected * min(burst, 2*fec.MaxDepth))
}

// report is rep, which arrived at now, as the peer's split c tells it (ok:
// the report carried one): cut to the clear slices' rate over the latest
// splits, or this split's if higher, when they hold enough for a channel
// losing in bursts of burst (splitNeed). When they
// hold too few (a queue that stands, as a CUBIC flow's does for seconds
// at its plateau) the last rate stands, or the queued slices' if lower:
// they lost the channel's share and the overflows', so theirs bounds the
// channel's from above, and a channel that got better while the queue
// stood shows. st is c.judge's at the rate the report is cut to; use
// false before any rate (the round trip judges then).
// The report's own loss stays when it is the lower: the split counts
// datagrams, the report the symbols of finished groups.
func (ch *channelLoss) report(rep fec.LossReport, c splitCounts, ok bool, now time.Time, burst float64) (r fec.LossReport, st fec.PathState, use bool) {
	if !ok {
		return rep, fec.PathUnknown, false
	}
	ch.clear[ch.next] = splitCounts{clearExp: c.clearExp, clearLost: c.clearLost}
	ch.when[ch.next] = now
	ch.next = (ch.next + 1) % channelSplits
	need := splitNeed(burst)
	if p, enough := ch.rate(now, need); enough {
		if own, ok := c.channel(need); ok {
			p = max(p, own) // a rise shows at once
		}
		ch.p, ch.known = p, true
		return rep.AtMost(p), c.judge(p), true
	}
	if !ch.known {
		return rep, fec.PathUnknown, false
	}
	if c.queuedExp >= need {
		ch.p = min(ch.p, float64(min(c.queuedLost, c.queuedExp))/float64(c.queuedExp))
	}
	return rep.AtMost(ch.p), c.judge(ch.p), true
}

// outside reports whether rep's losses cannot be placed in the clear
// slices of its split c. Either the slices were nearly all queued: fewer
// than minSplitExpected datagrams clear, at least that many queued. Or
// rep lost far more than the clear slices explain: more than chance
// allows above twice the most their loss is within chance of
// (fec.LossWithinChance), with at least minSplitExpected datagrams in
// them. Its losses then fell mostly outside them: a flow's overshoot
// between the peer's frames, or in a queue that the round trip did not
// show yet. Such a report, judged by the round trip (the slices too few
// for a rate, splitNeed), read as clear, and its overflow's runs as the
// channel's bursts: 203 of 3700 lost, 5.5%, against 5 of 602 clear
// datagrams, set bursts of 8.1 on a channel losing 1% independently, and
// a CUBIC flow paid 28% parity; 147 of 3825 lost in 59 runs, with 1109
// datagrams queued and none clear, set 7.85, which the BBR flow after it
// on the peer's other lane borrowed (fec.PathBursts) and paid 97:36 x2
// for its whole run. Twice the bound leaves a bursty channel's own
// spread of report loss measuring.
func (c splitCounts) outside(rep fec.LossReport) bool {
	if rep.Received >= rep.Expected {
		return false
	}
	if c.clearExp < minSplitExpected {
		return c.queuedExp >= minSplitExpected
	}
	p := fec.LossWithinChance(min(c.clearLost, c.clearExp), c.clearExp)
	return fec.AboveChance(float64(rep.Expected-rep.Received), 2*p*float64(rep.Expected), 3, 2)
}

// judge is the path state a report split c shows, the channel losing p:
// fec.PathSplit when its queued slices lost more than the channel
// explains (by three standard deviations of independent loss, and two
// datagrams: a queue overflowed), else fec.PathClear. The adapter takes
// the runs of a split report for no burst of the channel's: the cut took
// the overflows out of the report's loss, not out of its runs, and a
// queue fed faster than it drains drops in runs of its own. (On a 5%
// channel losing independently, the overshoot of a flow's slow start
// read as bursts of 2 to 6, and the rule paid 36% parity for them; a
// bound of half as much again as the channel's share still let a
// standing queue's drops raise the estimate from 1.05 to 1.5.) A bursty
// channel's own count varies more, so some of its reports are judged
// split: fewer samples of its bursts, not a bias.
func (c splitCounts) judge(p float64) fec.PathState {
	if fec.AboveChance(float64(c.queuedLost), p*float64(c.queuedExp), 3, 2) {
		return fec.PathSplit
	}
	return fec.PathClear
}

// newPath starts what ln measures of its path anew (a roam, a new
// address): the round trip, the split's one-way delays, the channel's
// rate, a loss report held for judgement, which counted the old path's
// loss, and the adapter's floor for congestion (fec.Adapter.NewPath);
// the path began at now.
func (ln *lane) newPath(now time.Time) {
	ln.delay, ln.split, ln.channel, ln.pathAt = pathDelay{}, lossSplit{}, channelLoss{}, now
	ln.lastSplit, ln.held = splitCounts{}, fec.LossReport{}
	if ln.adapt != nil {
		ln.adapt.NewPath()
	}
}
