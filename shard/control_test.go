package shard

import (
	"slices"
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// controlSends steps shard s's clock in 50 ms ticks for d and returns when
// it sent a control frame (as counted by control_out).
func controlSends(s *Shard, d time.Duration) []time.Duration {
	var at []time.Duration
	start := s.now
	last := s.stats.c[ControlOut]
	for el := time.Duration(0); el < d; el += 50 * time.Millisecond {
		s.now = start.Add(el)
		s.tick()
		s.flushAll()
		if c := s.stats.c[ControlOut]; c != last {
			at = append(at, el)
			last = c
		}
	}
	return at
}

// Persistent keepalives come about every Keepalive, never at a fixed
// period: the gaps spread over the jitter range.
func TestKeepaliveJittered(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa := a.shards[0]
	sa.SetKeepalive(2, time.Second)
	at := controlSends(sa, 120*time.Second)
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i]-at[i-1])
	}
	if len(gaps) < 80 {
		t.Fatalf("%d keepalives in 120 s with a 1 s keepalive", len(at))
	}
	slices.Sort(gaps)
	lo, hi := gaps[0], gaps[len(gaps)-1]
	if lo < 700*time.Millisecond || hi > 1300*time.Millisecond {
		t.Errorf("keepalive gaps %s..%s, want within 1 s ± 25%% (and a 50 ms tick)", lo, hi)
	}
	distinct := map[time.Duration]bool{}
	for _, g := range gaps {
		distinct[g] = true
	}
	if len(distinct) < 6 || hi-lo < 300*time.Millisecond {
		t.Errorf("keepalive gaps not jittered: %d distinct values over %s..%s", len(distinct), lo, hi)
	}
}

// Without a persistent keepalive, a lane that heard from its peer and sent
// nothing since answers with a keepalive within the passive wait, once.
func TestPassiveKeepalive(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sb := b.shards[0]
	feed(sb, addrA, sendOne(t, a, 0, "10.1.0.5", "10.2.0.9", 1).data)
	at := controlSends(sb, 10*time.Second)
	// One loss report round may go out too (it received data); at most
	// two frames, the keepalive before 2.5 s.
	if len(at) == 0 || len(at) > 2 || at[len(at)-1] > 2500*time.Millisecond {
		t.Fatalf("control frames at %v, want a passive keepalive within 2.5 s and nothing after", at)
	}
}

// A lane's first loss reports that can size the peer's FEC go as soon as
// the decoder counted enough for one (sizingExpected), earlyReportGap
// apart at least, then about every second: the peer's FEC leaves its
// starting guess within a round trip or so of a flow, not a second later.
// Pings before the flow (a sparse lane reports about once a second) do
// not use the early reports up.
func TestEarlyLossReports(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 2, R: 1})
	sa, sb := a.shards[0], b.shards[0]
	lb := sb.table.lanes[addrA]
	start := sb.now
	type sent struct {
		at     time.Duration
		sizing bool // it used up an early report
	}
	// run sends perTick packets every 50 ms from from to to, and returns
	// when B's lane reported, from the start.
	run := func(from, to time.Duration, perTick int) []sent {
		var at []sent
		for el := from; el < to; el += 50 * time.Millisecond {
			sa.now, sb.now = start.Add(el), start.Add(el)
			for i := range perTick {
				inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 200, int(el/time.Millisecond)+i))
			}
			sa.tick()
			sa.flushAll()
			deliverAll(t, a, b, nil)
			before, sizing := lb.reportsSent, lb.sizingReports
			sb.tick()
			sb.flushAll()
			if lb.reportsSent != before {
				at = append(at, sent{el, lb.sizingReports != sizing && lb.sizingReports <= earlyReports})
			}
		}
		return at
	}
	apart := func(name string, at []sent, least time.Duration) {
		for i := 1; i < len(at); i++ {
			if gap := at[i].at - at[i-1].at; gap < least {
				t.Errorf("%s: report %d came %v after the one before, want %v at least (at %v)", name, i, gap, least, at)
			}
		}
	}
	// Pings: 20 a second, reports about once a second.
	pings := run(0, 3*time.Second, 1)
	if len(pings) < 2 || lb.sizingReports != 0 {
		t.Fatalf("pings: loss reports at %v, %d of them sizing", pings, lb.sizingReports)
	}
	apart("pings", pings, lossReportEvery*3/4-50*time.Millisecond)
	// A flow, 2,000 packets a second (3,000 symbols at 2:1): its first
	// reports go as soon as they count sizingExpected, then once a second.
	flow := run(3*time.Second, 7*time.Second, 100)
	var early, later []sent
	for i, x := range flow {
		if x.sizing && len(early) < earlyReports {
			early = append(early, x)
		} else if len(early) == earlyReports {
			later = append(later, flow[i])
		}
	}
	if len(early) < earlyReports || len(later) < 2 {
		t.Fatalf("flow: loss reports at %v", flow)
	}
	if early[earlyReports-1].at-3*time.Second > 1500*time.Millisecond {
		t.Errorf("flow: the first %d sizing reports took until %v (at %v)", earlyReports, early[earlyReports-1].at, flow)
	}
	apart("flow, early", early, earlyReportGap)
	apart("flow, later", append(early[earlyReports-1:], later...), lossReportEvery*3/4-50*time.Millisecond)
}

// An idle tunnel falls silent: after one packet and its answers, the two
// sides do not trade keepalives (a keepalive asks for no answer, as in
// WireGuard), and neither reports the other silent.
func TestIdleLanesFallSilent(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa, sb := a.shards[0], b.shards[0]
	silent := 0
	for _, s := range []*Shard{sa, sb} {
		s.cfg.Silent = func(int, PeerID, bool) { silent++ }
	}
	inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 200, 1))
	start := sa.now
	sent := func() uint64 { return sa.stats.c[ControlOut] + sb.stats.c[ControlOut] }
	var at10 uint64
	for el := time.Duration(0); el < 60*time.Second; el += 50 * time.Millisecond {
		if el == 10*time.Second {
			at10 = sent()
		}
		sa.now, sb.now = start.Add(el), start.Add(el)
		sa.tick()
		sb.tick()
		deliverAll(t, a, b, nil)
		deliverAll(t, b, a, nil)
	}
	late := sent() - at10 // control frames in the last 50 s
	if late != 0 || silent != 0 {
		t.Fatalf("idle lanes sent %d control frames in their last 50 s; %d silence reports", late, silent)
	}
}

// silenceAfter runs two connected shards in 50 ms steps for d: a's lane
// sends a packet at each step send says to, b's answers arrive while
// answered says so. It returns when a reported b silent.
func silenceAfter(t *testing.T, d time.Duration, send, answered func(el time.Duration) bool) []time.Duration {
	t.Helper()
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 1})
	sa, sb := a.shards[0], b.shards[0]
	var silentAt []time.Duration
	start := sa.now
	sa.cfg.Silent = func(int, PeerID, bool) { silentAt = append(silentAt, sa.now.Sub(start)) }
	for el := time.Duration(0); el < d; el += 50 * time.Millisecond {
		sa.now, sb.now = start.Add(el), start.Add(el)
		if send(el) {
			inject(t, sa, ipPacket("10.1.0.5", "10.2.0.9", 200, int(el/time.Millisecond)))
		}
		sa.tick()
		sb.tick()
		deliverAll(t, a, b, nil)
		deliverAll(t, b, a, func(int) bool { return !answered(el) })
	}
	return silentAt
}

// A lane that resumes sending after an idle spell longer than noReplyAfter
// is not silent: the wait for an answer starts at its first send, not at
// what it last heard. Unanswered for noReplyAfter from there, it is.
func TestResumeAfterIdleIsNotSilence(t *testing.T) {
	// One packet, 10 s idle, then a packet every 100 ms; from 20 s the
	// peer's datagrams stop arriving.
	silentAt := silenceAfter(t, 30*time.Second, func(el time.Duration) bool {
		return el == 0 || el >= 10*time.Second && el%(100*time.Millisecond) == 0
	}, func(el time.Duration) bool { return el < 20*time.Second })
	if len(silentAt) == 0 {
		t.Fatal("a lane unanswered from 20 s was never reported silent")
	}
	// The last answer came at most a second before 20 s.
	if first := silentAt[0]; first < 24*time.Second || first > 26*time.Second {
		t.Fatalf("first silence report at %v, want about 5 s after the answers stopped at 20 s (reports %v)", first, silentAt)
	}
}

// A lane whose one packet goes unanswered reports its peer silent about
// noReplyAfter later, though it sends nothing more (a peer that restarted
// while the lane was idle): as WireGuard, the wait runs from the first
// unanswered send, not while the lane keeps sending.
func TestSilenceAfterOneUnansweredPacket(t *testing.T) {
	// One packet a second after the keys came; the peer's answers are lost.
	silentAt := silenceAfter(t, 12*time.Second, func(el time.Duration) bool { return el == time.Second },
		func(time.Duration) bool { return false })
	if len(silentAt) == 0 || silentAt[0] < 6*time.Second || silentAt[0] > 7*time.Second {
		t.Fatalf("silence reports at %v, want the first 5-6 s after the unanswered packet at 1 s", silentAt)
	}
}
