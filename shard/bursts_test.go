package shard

import (
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// A lane shares the bursts it measures with its peer's other lanes
// (LaneConfig.Bursts), and one whose flow starts predicts with theirs:
// its first report on a channel they measured losing 1% independently
// gets groups at depth 1, not the assumed bursts' interleave 4 deep. A
// lane whose path began after the record was noted (a move) assumes.
func TestLaneSharesBursts(t *testing.T) {
	flowReport := func(l *autoLane) {
		for range 2 {
			l.tick(100)
		}
		l.report(fec.LossReport{Expected: 3000, Received: 2970, Runs: 30})
	}
	shared := new(fec.PathBursts)
	measuring := newAutoLane(t)
	measuring.la.cfg.Bursts = shared
	flowReport(measuring)
	if d := measuring.la.cur.enc.Depth(); d != fec.MaxDepth {
		t.Fatalf("nothing measured before its first report: depth %d, want the assumption's %d", d, fec.MaxDepth)
	}
	for range 2 {
		measuring.tick(100)
		measuring.report(fec.LossReport{Expected: 3000, Received: 2970, Runs: 30})
	}
	b, bound, ok := shared.Recent(measuring.sa.now, time.Time{})
	if !ok || bound || b > 1.2 {
		t.Fatalf("after 90 singletons: shared burst %v (bound %v, %v), want independent loss measured", b, bound, ok)
	}
	borrowing := newAutoLane(t)
	borrowing.la.cfg.Bursts = shared
	borrowing.sa.now = measuring.sa.now
	flowReport(borrowing)
	if d := borrowing.la.cur.enc.Depth(); d != 1 {
		k, r := borrowing.la.cur.enc.Ratio()
		t.Fatalf("first report with the peer's bursts measured independent: %d:%d depth %d, want depth 1", k, r, d)
	}
	moved := newAutoLane(t)
	moved.la.cfg.Bursts = shared
	moved.sa.now = measuring.sa.now.Add(time.Millisecond)
	moved.la.newPath(moved.sa.now)
	flowReport(moved)
	if d := moved.la.cur.enc.Depth(); d != fec.MaxDepth {
		t.Fatalf("a lane whose path began after the record: depth %d, want the assumption's %d", d, fec.MaxDepth)
	}
}

// A lane's loss report tells its adapter how many of the packets it sent
// since the last were not small: a lane of ACK-sized packets aims for the
// adapter's loosest target, one of a flow's data for TCP's at the path's
// round trip.
func TestLaneSentSetsTarget(t *testing.T) {
	l := newAutoLane(t)
	tcp := l.la.adapt.Target()
	for i := range 200 {
		inject(t, l.sa, ipPacket("10.1.0.5", "10.2.0.9", 80, i))
	}
	l.report(fec.LossReport{Expected: 200, Received: 198, Runs: 2})
	if got := l.la.adapt.Target(); got != fec.DefaultAdaptConfig.Target {
		t.Fatalf("after 200 packets of 80 bytes: target %v, want %v (TCP's: %v)", got, fec.DefaultAdaptConfig.Target, tcp)
	}
	l.sa.now = l.sa.now.Add(time.Second)
	l.tick(200)
	l.report(fec.LossReport{Expected: 200, Received: 198, Runs: 2})
	if got := l.la.adapt.Target(); got != tcp || tcp >= fec.DefaultAdaptConfig.Target {
		t.Fatalf("after 200 packets of 1000 bytes: target %v, want TCP's %v", got, tcp)
	}
}
