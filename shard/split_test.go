package shard

// The loss split (split.go): slices between the peer's frames, counted
// clear or queued by the one-way delay their ends met, and the report the
// adapter hears from them.

import (
	"math"
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// Slices are counted by the counts at their ends, queued when either end
// met a queue above the limit; an idle gap and a restarted peer's count
// are no slices, and the peer's clock may wrap.
func TestLossSplitSlices(t *testing.T) {
	for name, offset := range map[string]uint32{"start": 1_000_000, "wrap": ^uint32(0) - 50_000} {
		now := stampEpoch.Add(time.Hour)
		var s lossSplit
		if l := s.limit(); l != 0 {
			t.Fatalf("%s: limit %s before any frame, want 0", name, l)
		}
		var sent uint32
		var rx uint64
		// frame delivers one frame of the peer's after it sent n datagrams
		// since the last, of which lost were lost, having met queue.
		frame := func(n, lost uint32, queue time.Duration) {
			now = now.Add(100 * time.Millisecond)
			sent += n
			rx += uint64(n - lost)
			peerStamp := stamp(now) - offset - uint32((25*time.Millisecond+queue)/time.Microsecond)
			s.note(now, peerStamp, sent, rx)
		}
		frame(0, 0, 0) // the first frame only starts a slice
		for range 10 {
			frame(100, 1, 0)
		}
		frame(100, 0, 40*time.Millisecond) // queued: this end met 40 ms
		frame(100, 30, 0)                  // queued: the other end did
		frame(100, 0, 5*time.Millisecond)  // under the limit
		if c := s.take(); c != (splitCounts{clearExp: 1100, clearLost: 10, queuedExp: 200, queuedLost: 30}) {
			t.Fatalf("%s: %+v", name, c)
		}
		if c := s.take(); c != (splitCounts{}) {
			t.Fatalf("%s: take did not start anew: %+v", name, c)
		}
		now = now.Add(maxSlice) // idle: the next frame starts a slice
		frame(100, 50, 0)
		sent += maxSliceDatagrams + 1 // a restart's count
		frame(100, 50, 0)
		if c := s.take(); c != (splitCounts{}) {
			t.Fatalf("%s: an idle gap or a count's jump counted: %+v", name, c)
		}
		frame(100, 2, 0)
		if c := s.take(); c != (splitCounts{clearExp: 100, clearLost: 2}) {
			t.Fatalf("%s: after the jump: %+v", name, c)
		}
		// Two datagrams of a slice arrive after its end: the next slice
		// receives them, and the first lost two fewer; more than it
		// lost (duplicates) take off no more.
		frame(100, 5, 0)
		sent += 100
		rx += 102
		now = now.Add(100 * time.Millisecond)
		s.note(now, stamp(now)-offset-25_000, sent, rx)
		frame(100, 1, 0)
		sent += 100
		rx += 110
		now = now.Add(100 * time.Millisecond)
		s.note(now, stamp(now)-offset-25_000, sent, rx)
		if c := s.take(); c != (splitCounts{clearExp: 400, clearLost: 3}) {
			t.Fatalf("%s: late arrivals: %+v", name, c)
		}
		// A frame the network reordered behind a later one: no slice,
		// and no loss counted twice.
		frame(100, 0, 0)
		early := sent
		frame(100, 0, 0)
		now = now.Add(time.Millisecond)
		s.note(now, stamp(now)-offset-25_000, early, rx)
		frame(100, 0, 0)
		if c := s.take(); c != (splitCounts{clearExp: 300}) {
			t.Fatalf("%s: a reordered frame: %+v", name, c)
		}
		// The peer restarts: a new clock, 20 s later than its old one,
		// which would make every slice after queued against the old
		// least. Its delays start anew.
		offset += 20_000_000
		for range 3 {
			frame(100, 1, 0)
		}
		if c := s.take(); c.clearExp != 200 || c.queuedExp != 0 {
			t.Fatalf("%s: after the peer's clock jumped: %+v (limit %s)", name, c, s.limit())
		}
		// A restart within 10 s of the old clock: the handshake before
		// and the count starting over say so.
		offset += 5_000_000
		s.noteRekey()
		sent = 0
		for range 3 {
			frame(100, 1, 0)
		}
		if c := s.take(); c.clearExp != 200 || c.queuedExp != 0 {
			t.Fatalf("%s: after a restart's handshake: %+v (limit %s)", name, c, s.limit())
		}
		// Idle longer than the slots span: the delays start anew (the
		// clocks drift apart meanwhile).
		now = now.Add(delaySamples*slotEvery + time.Second)
		offset += 300_000
		for range 3 {
			frame(100, 1, 0)
		}
		if c := s.take(); c.clearExp != 200 || c.queuedExp != 0 {
			t.Fatalf("%s: after an idle spell: %+v (limit %s)", name, c, s.limit())
		}
	}
}

// A peer that does not announce FeatureLossSplit gets reports without
// the split, and a split in its reports is not read: they wait for the
// round trip's judgement. One that does gets it, and its is read.
func TestSplitOnlyWithTheFeature(t *testing.T) {
	a, _, la, _ := echoPair(t, 50*time.Millisecond)
	sa := a.shards[0]
	rep := fec.LossReport{Expected: 1000, Received: 900, Runs: 100}
	la.adapt.Observe(rep) // a loss acted on: the next reports wait for their judgement
	full := 1 + fec.LossReportLen + delayEchoLen + splitLen
	for _, c := range []struct {
		name     string
		features uint8
		len      int
		read     bool
	}{
		{"without the feature", Features &^ FeatureLossSplit, full - splitLen, false},
		{"with it", Features, full, true},
	} {
		la.peerFeatures = c.features
		la.held, la.lastSplit = fec.LossReport{}, splitCounts{}
		b, ok := la.reportBody(nil, rep, true, sa.now)
		if !ok || len(b) != c.len {
			t.Fatalf("%s: a report of %d bytes, want %d", c.name, len(b), c.len)
		}
		// The peer's report, with a split that says the queue lost it all.
		var peer pathDelay
		body := appendSplit(peer.appendEcho(append([]byte{ctlLossReport}, mustReport(t, rep)...), sa.now), 7,
			splitCounts{clearExp: 900, queuedExp: 100, queuedLost: 100})
		sa.control(la, body)
		if read := la.lastSplit != (splitCounts{}); read != c.read {
			t.Fatalf("%s: split read %v, want %v", c.name, read, c.read)
		}
		if held := la.held.Expected != 0; held == c.read {
			t.Fatalf("%s: report held for the round trip %v, want %v", c.name, held, !c.read)
		}
	}
}

func mustReport(t *testing.T, rep fec.LossReport) []byte {
	t.Helper()
	b, err := rep.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// One late frame does not move the limit; a queue that fills every few
// seconds sets it.
func TestLossSplitLimit(t *testing.T) {
	now := stampEpoch.Add(time.Hour)
	var s lossSplit
	var sent uint32
	frame := func(queue time.Duration) {
		now = now.Add(100 * time.Millisecond)
		sent += 10
		s.note(now, stamp(now)-uint32((25*time.Millisecond+queue)/time.Microsecond), sent, uint64(sent))
	}
	for i := range 200 {
		q := time.Duration(i%30) * time.Millisecond // a sawtooth up to 29 ms
		if i == 150 {
			q = 2 * time.Second // one frame stalled
		}
		frame(q)
	}
	// Slots of 750 ms see peaks of 7 to 29 ms: half their median.
	if l := s.limit(); l < 5*time.Millisecond || l > 15*time.Millisecond {
		t.Fatalf("limit %s under a sawtooth to 29 ms with one 2 s outlier, want half the slots' median peak", l)
	}
}

// The extension round-trips; padding is none.
func TestSplitExtension(t *testing.T) {
	c := splitCounts{1, 2, 3, 0xffffffff}
	b := appendSplit(nil, 77, c)
	if len(b) != splitLen {
		t.Fatalf("%d bytes, want %d", len(b), splitLen)
	}
	if sent, got, ok := readSplit(b); !ok || sent != 77 || got != c {
		t.Fatalf("read %d %+v %v", sent, got, ok)
	}
	if _, _, ok := readSplit(make([]byte, 40)); ok {
		t.Fatal("padding read as a split")
	}
	if _, _, ok := readSplit(b[:splitLen-1]); ok {
		t.Fatal("a short extension read")
	}
}

// The adapter hears the channel's loss when the clear slices hold enough:
// the report as it is when nothing was lost in a queue, cut to the clear
// slices' rate when something was (its runs in proportion); not at all
// without enough. Split when the queued slices lost beyond that rate.
func TestSplitReport(t *testing.T) {
	rep := fec.LossReport{Expected: 1000, Received: 900, Unrecovered: 50, Runs: 20}
	now := stampEpoch.Add(time.Hour)
	for _, c := range []struct {
		name  string
		split splitCounts
		ok    bool
		want  fec.LossReport
		st    fec.PathState
		use   bool
	}{
		{"no split", splitCounts{}, false, rep, fec.PathUnknown, false},
		{"too few clear, no rate yet", splitCounts{clearExp: minSplitExpected - 1, queuedExp: 900, queuedLost: 90}, true, rep, fec.PathUnknown, false},
		{"too few clear, none lost queued", splitCounts{clearExp: 10, clearLost: 1, queuedExp: 990}, true, rep, fec.PathUnknown, false},
		{"nothing lost queued", splitCounts{clearExp: 1000, clearLost: 100, queuedExp: 50}, true, rep, fec.PathClear, true},
		{"fewer lost by the slices", splitCounts{clearExp: 1000, clearLost: 50}, true,
			fec.LossReport{Expected: 1000, Received: 950, Unrecovered: 50, Runs: 10}, fec.PathClear, true},
		{"queued losses left out", splitCounts{clearExp: 800, clearLost: 8, queuedExp: 200, queuedLost: 92}, true,
			fec.LossReport{Expected: 1000, Received: 990, Unrecovered: 10, Runs: 2}, fec.PathSplit, true},
		{"queued slices lost the channel's share", splitCounts{clearExp: 800, clearLost: 40, queuedExp: 200, queuedLost: 12}, true,
			fec.LossReport{Expected: 1000, Received: 950, Unrecovered: 50, Runs: 10}, fec.PathClear, true},
	} {
		var ch channelLoss
		got, st, use := ch.report(rep, c.split, c.ok, now, 1)
		if got != c.want || st != c.st || use != c.use {
			t.Errorf("%s: %+v %v %v, want %+v %v %v", c.name, got, st, use, c.want, c.st, c.use)
		}
	}
}

// On a bursty channel the clear slices must hold more datagrams before
// their rate is taken: minSplitExpected per datagram of a mean burst.
func TestSplitNeedsMoreOnBurstyChannel(t *testing.T) {
	rep := fec.LossReport{Expected: 1000, Received: 900, Runs: 25}
	now := stampEpoch.Add(time.Hour)
	c := splitCounts{clearExp: 3 * minSplitExpected, clearLost: 4, queuedExp: 100, queuedLost: 90}
	var ch channelLoss
	if _, _, use := ch.report(rep, c, true, now, 4); use {
		t.Fatalf("%d clear datagrams taken as the rate of a channel losing in bursts of 4", c.clearExp)
	}
	ch = channelLoss{}
	if got, _, use := ch.report(rep, c, true, now, 1); !use || got.Loss() > 0.014 {
		t.Fatalf("independent loss: %+v %v, want the clear slices' rate", got, use)
	}
	c.clearExp = 4 * minSplitExpected
	ch = channelLoss{}
	if _, _, use := ch.report(rep, c, true, now, 4); !use {
		t.Fatalf("%d clear datagrams not taken in bursts of 4", c.clearExp)
	}
	// An outage's burst (or a broken peer's report) asks for no more
	// than twice the assumed burst's; nonsense for independent loss's.
	for _, b := range []float64{4e9, math.Inf(1), math.NaN(), 0, -1} {
		if n := splitNeed(b); n < minSplitExpected || n > 2*fec.MaxDepth*minSplitExpected {
			t.Fatalf("splitNeed(%v) = %d", b, n)
		}
	}
}

// The channel's rate is taken over the latest splits; through a queue
// that stands (too few clear slices) the last rate stands, lowered to the
// queued slices' rate when that is lower.
func TestSplitRateAcrossReports(t *testing.T) {
	rep := fec.LossReport{Expected: 1000, Received: 900, Unrecovered: 50, Runs: 100}
	lossOf := func(n uint32) fec.LossReport {
		return fec.LossReport{Expected: 1000, Received: 1000 - n, Unrecovered: n, Runs: n}
	}
	now := stampEpoch.Add(time.Hour)
	var ch channelLoss
	queued := splitCounts{clearExp: 50, queuedExp: 950, queuedLost: 95}
	for i, c := range []struct {
		after time.Duration
		split splitCounts
		want  fec.LossReport
		st    fec.PathState
	}{
		// Half a burst in this report's split, half in the next's.
		{0, splitCounts{clearExp: 1000, clearLost: 15}, lossOf(15), fec.PathClear},
		// One of 10 queued lost: the channel's share, not an overflow.
		{time.Second, splitCounts{clearExp: 1000, clearLost: 5, queuedExp: 10, queuedLost: 1}, lossOf(10), fec.PathClear},
		// The queue stands: the splits before still hold enough.
		{time.Second, queued, lossOf(9), fec.PathSplit}, // 20 of 2,050
		{time.Second, queued, lossOf(4), fec.PathSplit}, // 5 of 1,100
		// Too few clear: the last rate stands, also long after.
		{time.Second, queued, lossOf(4), fec.PathSplit},
		{time.Minute, queued, lossOf(4), fec.PathSplit},
		// The queued slices lost less than that: the channel got better.
		{time.Second, splitCounts{queuedExp: 1000, queuedLost: 2}, lossOf(2), fec.PathClear},
		{time.Second, splitCounts{queuedExp: 1000}, lossOf(0), fec.PathClear},
	} {
		now = now.Add(c.after)
		got, st, use := ch.report(rep, c.split, true, now, 1)
		if got != c.want || st != c.st || !use {
			t.Errorf("report %d: %+v %v %v, want %+v %v true", i, got, st, use, c.want, c.st)
		}
	}
}

// A closed loop through a bottleneck that overflows now and then over a
// channel that loses 1% at random: the receiver splits the loss by the
// queue its sender's stamps met, and the sender's adapter hears the
// channel's 1%, not the overflows' share as well.
func TestSplitClosedLoop(t *testing.T) {
	a, b, la, _ := echoPair(t, 50*time.Millisecond)
	sa, sb := a.shards[0], b.shards[0]
	type inFlight struct {
		due  time.Time
		data []byte
	}
	var wire []inFlight
	var lastDue time.Time
	rng := uint32(12345)
	random := func() float64 { // xorshift32: the test's own, fixed stream
		rng ^= rng << 13
		rng ^= rng >> 17
		rng ^= rng << 5
		return float64(rng) / (1 << 32)
	}
	var sent, dropped int
	seen := map[fec.PathState]int{}
	const step = 10 * time.Millisecond
	start := sa.now
	for el := time.Duration(0); el < 20*time.Second; el += step {
		sa.now, sb.now = start.Add(el), start.Add(el)
		// 4 packets each 10 ms; the queue builds for the last 300 ms
		// of every 2 s and overflows (a quarter dropped) in its last
		// 100 ms.
		for i := range 4 {
			inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 1000, int(el/step)*4+i))
		}
		sa.tick()
		sa.flushAll()
		phase := el % (2 * time.Second)
		queue := max(phase-1700*time.Millisecond, 0) / 3 // up to 100 ms
		for _, d := range a.sent[0] {
			sent++
			lose := random() < 0.01 || phase >= 1900*time.Millisecond && random() < 0.25
			if lose {
				dropped++
				continue
			}
			due := sa.now.Add(25*time.Millisecond + queue)
			if due.Before(lastDue) {
				due = lastDue // a draining queue keeps its order
			}
			lastDue = due
			wire = append(wire, inFlight{due, append([]byte(nil), d.data...)})
		}
		a.sent[0] = nil
		for len(wire) > 0 && !wire[0].due.After(sb.now) {
			p := sb.pool.Get()
			p.N = copy(p.Buf, wire[0].data)
			sb.ingress(0, p.Buf[:p.N], addrA)
			sb.pool.Put(p)
			wire = wire[1:]
		}
		sb.tick()
		deliverAll(t, b, a, nil) // the way back: no queue, no loss
		if el > 5*time.Second {
			seen[la.adapt.Path()]++
		}
	}
	p, ok := la.adapt.Loss()
	total := float64(dropped) / float64(sent)
	if !ok || p > 0.02 || p < 0.005 || total < 0.02 {
		t.Fatalf("the adapter acts on %.2f%% (%v); %.2f%% were dropped in all, 1%% by the channel", 100*p, ok, 100*total)
	}
	if seen[fec.PathSplit] == 0 {
		t.Fatalf("no report split after the first seconds: %v", seen)
	}
	t.Logf("adapter's loss %.2f%%, dropped %.2f%% in all; path states %v", 100*p, 100*total, seen)
}

// The lane hands its adapter's burst to the split (splitNeed): a lane
// whose adapter measured independent loss takes the channel's rate from
// 400 clear datagrams; one still assuming bursts waits for more, and its
// report waits for the round trip's judgement.
func TestSplitNeedFollowsAdapterBurst(t *testing.T) {
	for _, c := range []struct {
		name  string
		first fec.LossReport // what the adapter acted on before
		times int
		used  bool
	}{
		// Three: the start-up guess's depth leaves the first two out.
		{"independent loss measured", fec.LossReport{Expected: 20000, Received: 19800, Runs: 200}, 3, true},
		{"bursts assumed", fec.LossReport{Expected: 1000, Received: 990, Runs: 10}, 1, false},
	} {
		a, _, la, _ := echoPair(t, 50*time.Millisecond)
		sa := a.shards[0]
		la.peerFeatures = Features
		for range c.times {
			la.adapt.Observe(c.first)
		}
		b, _ := la.adapt.Burst()
		if (b == 1) != c.used {
			t.Fatalf("%s: the adapter predicts with bursts of %v", c.name, b)
		}
		la.held, la.lastSplit, la.channel = fec.LossReport{}, splitCounts{}, channelLoss{}
		rep := fec.LossReport{Expected: 1000, Received: 990, Runs: 10}
		var peer pathDelay
		body := appendSplit(peer.appendEcho(append([]byte{ctlLossReport}, mustReport(t, rep)...), sa.now), 7,
			splitCounts{clearExp: 2 * minSplitExpected, clearLost: 2, queuedExp: 100})
		sa.control(la, body)
		if used := la.channel.known; used != c.used {
			t.Fatalf("%s (bursts of %v): the channel's rate taken %v, want %v", c.name, b, used, c.used)
		}
		if held := la.held.Expected != 0; held == c.used {
			t.Fatalf("%s: report held for the round trip %v, want %v", c.name, held, !c.used)
		}
	}
}

// A report that lost far more than its split's clear slices explain lost
// it outside them (a flow's overshoot between the peer's frames): its
// runs only bound the bursts. Not with too few clear datagrams, nor for
// a bursty channel's own spread of report loss around its slices' rate.
func TestSplitOutside(t *testing.T) {
	for _, c := range []struct {
		name  string
		split splitCounts
		rep   fec.LossReport
		want  bool
	}{
		{"an overshoot outside 602 clear", splitCounts{clearExp: 602, clearLost: 5}, fec.LossReport{Expected: 3700, Received: 3497, Runs: 79}, true},
		{"the clear slices' share", splitCounts{clearExp: 602, clearLost: 5}, fec.LossReport{Expected: 3700, Received: 3660, Runs: 40}, false},
		{"queued, too few clear", splitCounts{clearExp: minSplitExpected - 1, queuedExp: 1109, queuedLost: 11}, fec.LossReport{Expected: 3825, Received: 3678, Runs: 59}, true},
		{"too few either way", splitCounts{clearExp: minSplitExpected - 1, queuedExp: minSplitExpected - 1}, fec.LossReport{Expected: 3700, Received: 3497, Runs: 79}, false},
		{"a bursty channel's spread", splitCounts{clearExp: 600, clearLost: 30}, fec.LossReport{Expected: 1000, Received: 900, Runs: 25}, false},
		{"none lost", splitCounts{clearExp: 602, clearLost: 5}, fec.LossReport{Expected: 3700, Received: 3700}, false},
	} {
		if got := c.split.outside(c.rep); got != c.want {
			t.Errorf("%s: outside %v, want %v", c.name, got, c.want)
		}
	}
}
