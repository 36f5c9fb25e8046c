package shard

// A busy lane's dense round-trip samples (delayjudge.go): each loss report
// is judged by the samples of its interval, and busy lanes stamp often
// enough to have them.

import (
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// A report is judged by the samples of the stamps sent since the last
// one's span: an overflow one sample saw in the middle of the span is
// congestion (drained), a queue most samples and the latest saw stands
// (queued), and a sample of the last report's span within judgeOverlap
// of its end counts again.
func TestDelayJudgedByInterval(t *testing.T) {
	now := stampEpoch.Add(time.Hour)
	var d pathDelay
	d.noteHandshake(50*time.Millisecond, now)
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	// interval takes ten samples 100 ms apart, then judges a report.
	interval := func(rtts ...int) fec.PathState {
		for _, v := range rtts {
			now = now.Add(100 * time.Millisecond)
			d.sample(ms(v), now, now.Add(-ms(v)))
		}
		return d.judge(now, now, true)
	}
	clear := []int{55, 56, 55, 57, 55, 56, 55, 55, 56, 55}
	for _, c := range []struct {
		name string
		rtts []int
		want fec.PathState
	}{
		{"clear", clear, fec.PathClear},
		{"clear again", clear, fec.PathClear},
		// The least is 50 ms: a sample above 75 ms found a queue.
		{"one overflow mid-interval", []int{55, 60, 70, 100, 62, 58, 56, 55, 56, 55}, fec.PathDrained},
		{"clear after it", clear, fec.PathClear},
		{"a queue that stands", []int{60, 70, 80, 90, 95, 98, 99, 99, 100, 99}, fec.PathQueued},
		{"standing, latest too", []int{99, 98, 99, 100, 99, 98, 99, 97, 99, 99}, fec.PathQueued},
		{"most queued, latest drained", []int{99, 98, 99, 100, 99, 98, 99, 60, 55, 55}, fec.PathDrained},
		{"then clear", clear, fec.PathClear},
		// A queue the latest sample alone found has not stood; the
		// overflow at the end of a span shows in the next report too
		// (judgeOverlap), not in the one after.
		{"overflow last", []int{55, 56, 55, 57, 55, 56, 55, 55, 56, 99}, fec.PathDrained},
		{"the report after it", clear, fec.PathDrained},
		{"and the one after that", clear, fec.PathClear},
		{"at the limit", []int{55, 75, 55, 75, 55, 75, 55, 75, 55, 75}, fec.PathClear},
	} {
		if got := interval(c.rtts...); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Three samples in an interval are a sparse lane's: the latest
	// two decide, and an overflow before them does not count.
	var sp pathDelay
	sp.noteHandshake(50*time.Millisecond, now)
	for i, v := range []int{99, 55, 55} {
		at := now.Add(time.Duration(i) * 400 * time.Millisecond)
		sp.sample(ms(v), at, at.Add(-ms(v)))
	}
	if got := sp.judge(now.Add(800*time.Millisecond), now.Add(800*time.Millisecond), true); got != fec.PathClear {
		t.Errorf("sparse interval judged by its share: %v", got)
	}
	// After a silence the interval is the last second, not the time
	// since the report before.
	now = now.Add(time.Minute)
	for range 20 {
		now = now.Add(100 * time.Millisecond)
		d.sample(ms(99), now, now.Add(-ms(99)))
	}
	if st, ok := d.judgeDense(now, ms(75)); !ok || st != fec.PathQueued {
		t.Fatalf("after a silence: %v (dense %v), want queued", st, ok)
	}
	if n, _, _ := d.recent.over(now.Add(-time.Second-judgeOverlap), now, ms(75)); n != 12 {
		t.Errorf("%d samples sent in the last 1.25 s, want 12", n)
	}
}

// The ring of least samples keeps one slot per slotEvery: a busy lane's
// ten samples a second do not push the least out within three seconds.
func TestDelayLeastOverSlots(t *testing.T) {
	now := stampEpoch.Add(time.Hour)
	var d pathDelay
	d.sample(40*time.Millisecond, now, now)
	for range 10 * 20 { // 20 s of samples 100 ms apart
		now = now.Add(100 * time.Millisecond)
		d.sample(60*time.Millisecond, now, now)
	}
	if d.least() != 40*time.Millisecond {
		t.Fatalf("least %s after 20 s of dense samples, want 40ms", d.least())
	}
	if d.n > int(20*time.Second/slotEvery)+1 {
		t.Fatalf("%d slots for 20 s", d.n)
	}
	for range 10 * 30 {
		now = now.Add(100 * time.Millisecond)
		d.sample(60*time.Millisecond, now, now)
	}
	if d.least() != 60*time.Millisecond {
		t.Fatalf("least %s after 50 s, want the new path's 60ms", d.least())
	}
}

// A lane that carries a flow takes about ten samples a second, on the
// side that sends and the side that receives; one that carries a packet
// now and then (pings) stays at the loss reports' one a second or less.
func TestBusyLaneStamps(t *testing.T) {
	for _, c := range []struct {
		name     string
		perStep  int // packets A sends each 50 ms
		features uint8
		min, max int // samples A takes in 5 s
	}{
		{"a flow", 40, Features, 35, 80},
		{"pings", 1, Features, 0, 10},
		// A peer that reads the echo but not the split keeps its rule
		// for a sample about a second apart: no stamps between reports.
		{"a flow, a peer without the split", 40, Features &^ FeatureLossSplit, 0, 10},
	} {
		a, b, la, lb := echoPair(t, 40*time.Millisecond)
		la.peerFeatures, lb.peerFeatures = c.features, c.features
		sa, sb := a.shards[0], b.shards[0]
		samples, samplesB, seq := 0, 0, 0
		for range 100 { // 5 s in steps of 50 ms
			for range c.perStep {
				seq++
				inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 1200, seq))
			}
			sa.now, sb.now = sa.now.Add(50*time.Millisecond), sb.now.Add(50*time.Millisecond)
			atA, atB := la.delay.lastAt, lb.delay.lastAt
			// What each side holds of the other's features (the peer's
			// hellos announce this version's).
			la.peerFeatures, lb.peerFeatures = c.features, c.features
			sa.tick()
			sb.tick()
			deliverAll(t, a, b, nil)
			deliverAll(t, b, a, nil)
			if la.delay.lastAt != atA {
				samples++
			}
			if lb.delay.lastAt != atB {
				samplesB++
			}
		}
		if samples < c.min || samples > c.max {
			t.Errorf("%s: A took %d samples in 5 s, want %d..%d", c.name, samples, c.min, c.max)
		}
		if c.perStep > 1 && c.features == Features && samplesB < c.min {
			t.Errorf("%s: B, receiving, took %d samples in 5 s, want %d at least", c.name, samplesB, c.min)
		}
	}
}

// A loss report waits for the samples that judge it: the adapter hears it
// only after judgeLag, judged by what arrived meanwhile (a queue, here),
// and at once from a peer that sends no stamps.
func TestLossReportJudgedAfterItsSamples(t *testing.T) {
	a, _, la, _ := echoPair(t, 50*time.Millisecond)
	sa := a.shards[0]
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	// A second of clear samples, ten a second.
	for range 10 {
		sa.now = sa.now.Add(100 * time.Millisecond)
		la.delay.sample(ms(52), sa.now, sa.now.Add(-ms(52)))
	}
	report := func() []byte {
		b, err := fec.LossReport{Expected: 1000, Received: 950, Unrecovered: 40, Runs: 10}.AppendBinary([]byte{ctlLossReport})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The first report the adapter can size by is heard at once: the
	// path's state counts only against a loss it acted on before.
	sa.control(la, report())
	if _, ok := la.adapt.Loss(); !ok || la.held.Expected != 0 || la.adapt.Path() != fec.PathUnknown {
		t.Fatalf("the adapter's first report was held (%+v) or judged %v", la.held, la.adapt.Path())
	}
	first := la.adapt.Path()
	sa.now = sa.now.Add(100 * time.Millisecond)
	la.delay.sample(ms(52), sa.now, sa.now.Add(-ms(52)))
	sa.now = sa.now.Add(time.Second)
	sa.control(la, report())
	if la.held.Expected == 0 {
		t.Fatalf("the adapter heard the second report at once (path %v, then %v)", first, la.adapt.Path())
	}
	lag := la.delay.judgeLag()
	if lag < ms(52)+stampEvery || lag > lossReportEvery/2 {
		t.Fatalf("judgeLag %s on a 52 ms path", lag)
	}
	// The samples of stamps sent before the report left, which crossed
	// an overflow, come back; one sent after it does not count.
	arrived := sa.now
	for i, v := range []int{98, 99, 70, 120} {
		sa.now = sa.now.Add(lag / 5)
		la.delay.sample(ms(v), sa.now, arrived.Add(time.Duration(i-3)*50*time.Millisecond))
	}
	sa.controlTimers(la)
	if la.held.Expected == 0 {
		t.Fatal("the adapter heard the report before judgeLag passed")
	}
	sa.now = sa.now.Add(lag / 5)
	sa.controlTimers(la)
	if p, ok := la.adapt.Loss(); !ok || la.adapt.Path() != fec.PathDrained || la.held.Expected != 0 {
		t.Fatalf("after judgeLag: loss %v (%v), path %v, want drained", p, ok, la.adapt.Path())
	}
	// A peer without the echo: no samples to wait for.
	la.peerFeatures = FeatureLossRuns | FeaturePadding
	sa.now = sa.now.Add(time.Second)
	sa.control(la, report())
	if la.held.Expected != 0 || la.adapt.Path() != fec.PathUnknown {
		t.Fatalf("a report from a peer without the echo held (%+v) or judged %v", la.held, la.adapt.Path())
	}
}
