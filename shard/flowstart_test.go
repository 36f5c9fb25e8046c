package shard

import (
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// A lane whose parity the adapter sized for small packets (a download's
// ACKs on a lossy path) keeps it however many of them go out within a
// tick, and a flow's data on it get the start-up guess at their
// flowPackets-th packet within one tick.
func TestFlowAfterACKsGetsStartGuess(t *testing.T) {
	l := newAutoLane(t)
	ack := func(n int) {
		for range n {
			l.seq++
			inject(t, l.sa, ipPacket("10.1.0.5", "10.2.0.9", 52, l.seq))
		}
	}
	ack(300)
	l.report(fec.LossReport{Expected: 300, Received: 285, Runs: 15})
	k0, r0 := l.la.cur.enc.Ratio()
	if r0 == 0 || k0 == l.k0 && r0 == l.r0 {
		t.Fatalf("ACKs at 5%% loss: %d:%d, want parity sized for them, not the start-up guess", k0, r0)
	}
	for range 3 {
		ack(100)
		l.tick(0)
	}
	if k, r := l.la.cur.enc.Ratio(); k != k0 || r != r0 {
		t.Fatalf("ACKs, 100 a tick: %d:%d, want %d:%d", k, r, k0, r0)
	}
	ack(50)
	l.inject(flowPackets)
	if k, r := l.la.cur.enc.Ratio(); k != l.k0 || r != l.r0 || l.la.cur.enc.Depth() != fec.MaxDepth {
		t.Fatalf("a flow's first window after ACKs: %d:%d depth %d, want the start-up guess %d:%d depth %d", k, r, l.la.cur.enc.Depth(), l.k0, l.r0, fec.MaxDepth)
	}
}

// A slow flow (a few large packets every tick, too few to fill two
// symbols per flush timeout) gets the start-up guess once; once the rule
// sized parity for it again it keeps that choice tick after tick.
func TestSlowFlowKeepsRuleChoice(t *testing.T) {
	l := newAutoLane(t)
	lossy := fec.LossReport{Expected: 300, Received: 285, Runs: 15}
	for range 3 {
		for range 20 {
			l.tick(flowPackets + 1)
		}
		l.report(lossy)
	}
	k0, r0 := l.la.cur.enc.Ratio()
	if k0 == l.k0 && r0 == l.r0 {
		t.Fatalf("a slow flow after three reports: still the start-up guess %d:%d", k0, r0)
	}
	for range 10 {
		l.tick(flowPackets + 1)
		if k, r := l.la.cur.enc.Ratio(); k != k0 || r != r0 {
			t.Fatalf("a slow flow's next ticks: %d:%d, want the rule's %d:%d", k, r, k0, r0)
		}
	}
}

// Pings on a lane a bulk flow has left carry at most one parity each
// from the first quiet tick on, not what the flow's table gave a group
// of one; the next flow's packets get their full parity again from its
// flowPackets-th packet in a tick.
func TestPingsAfterFlowGetOneParityEach(t *testing.T) {
	l := newAutoLane(t)
	for range 3 {
		for range 20 {
			l.tick(200)
		}
		l.report(fec.LossReport{Expected: 4000, Received: 3800, Runs: 50}) // 5%, bursts of 4
	}
	if p := l.la.adapt.Partial(); len(p) < 2 || p[1] < 2 {
		t.Fatalf("a bulk flow through bursty loss: table %v, want a group of one to carry more than one parity", p)
	}
	l.tick(0) // the flow has ended: a quiet tick
	before := l.sa.stats.c[ParityOut]
	const pings = 10
	for range pings {
		l.seq++
		inject(t, l.sa, ipPacket("10.1.0.5", "10.2.0.9", 56, l.seq))
		l.tick(0) // each ping's group closes at its flush timeout
	}
	if got := l.sa.stats.c[ParityOut] - before; got > pings {
		t.Fatalf("%d pings after a flow: %d parity, want at most one each", pings, got)
	}
	l.inject(flowPackets)
	if l.la.adapt.Quiet() {
		t.Fatal("a flow's first window: the lane still quiet, its small packets capped")
	}
}

// A flow that starts on a lane quiet for restartIdle, whose adapter
// stopped assuming bursts under the standing queue of the flow before
// without measuring them, gets the start-up guess at its flowPackets-th
// packet; after a shorter pause (a BBR flow's ProbeRTT) it keeps the
// rule's choice.
func TestFlowAfterQuietSpellAssumesBursts(t *testing.T) {
	for _, c := range []struct {
		quiet time.Duration
		guess bool
	}{{restartIdle + 2*idlePoll, true}, {restartIdle - 2*idlePoll, false}} {
		l := newAutoLane(t)
		l.la.adapt.SetPath(fec.PathSplit)
		for range 6 {
			l.tick(200)
			l.la.adapt.Observe(fec.LossReport{Expected: 20000, Received: 19000, Runs: 100})
		}
		l.la.applyFEC()
		if b, ok := l.la.adapt.Burst(); ok || b != 1 {
			t.Fatalf("after split reports: burst %v (measured %v), want independent", b, ok)
		}
		k0, r0 := l.la.cur.enc.Ratio()
		for q := time.Duration(0); q < c.quiet; q += idlePoll {
			l.tick(0)
		}
		l.inject(flowPackets)
		k, r := l.la.cur.enc.Ratio()
		if got := k == l.k0 && r == l.r0 && l.la.cur.enc.Depth() == fec.MaxDepth; got != c.guess {
			t.Fatalf("a flow after %v quiet: %d:%d depth %d (rule's %d:%d), want the guess %v", c.quiet, k, r, l.la.cur.enc.Depth(), k0, r0, c.guess)
		}
	}
}
