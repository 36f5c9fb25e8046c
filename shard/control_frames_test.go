package shard

import (
	"errors"
	"testing"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// A control frame of a type this version does not know (a newer peer's)
// proves the peer alive and is otherwise ignored; a loss report that does
// not parse is counted as a bad header and changes nothing. Neither
// reaches the TUN queue.
func TestControlFramesUnknownAndMalformed(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 2})
	sa, sb := a.shards[0], b.shards[0]
	lnA, lnB := sa.ownedLane(2, 0), sb.ownedLane(1, 0)
	later := sb.now.Add(time.Second)
	sb.now = later
	if !sa.sendControl(lnA, []byte{0x7f, 1, 2, 3}) {
		t.Fatal("control frame not sent")
	}
	deliverAll(t, a, b, nil)
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(ControlIn) != 1 || sn.Get(DropBadHeader) != 0 || !lnB.lastRx.Equal(later) {
		t.Fatalf("unknown type: control_in %d drop_bad_header %d, last heard %v (want %v)",
			sn.Get(ControlIn), sn.Get(DropBadHeader), lnB.lastRx, later)
	}
	k, r := lnB.cur.enc.Ratio()
	if !sa.sendControl(lnA, []byte{ctlLossReport, 0xff, 0xff}) {
		t.Fatal("control frame not sent")
	}
	deliverAll(t, a, b, nil)
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(ControlIn) != 2 || sn.Get(DropBadHeader) != 1 {
		t.Fatalf("malformed loss report: control_in %d drop_bad_header %d; want 2 and 1", sn.Get(ControlIn), sn.Get(DropBadHeader))
	}
	if k2, r2 := lnB.cur.enc.Ratio(); k2 != k || r2 != r {
		t.Fatalf("a malformed loss report changed K:R from %d:%d to %d:%d", k, r, k2, r2)
	}
	if len(b.tun[0]) != 0 {
		t.Fatalf("%d control frames written to the TUN queue", len(b.tun[0]))
	}
}

// A packet the TUN queue refuses is counted as such, not as received: the
// lane's counters and tun_out count only what was written.
func TestTunWriteRefusalCounted(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 8, R: 0})
	sb := b.shards[0]
	writes := 0
	sb.tunOut = func([]byte) error {
		writes++
		if writes == 2 {
			return errors.New("tun: no buffer space")
		}
		return nil
	}
	for i := range 3 {
		inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 100, i))
	}
	deliverAll(t, a, b, nil)
	sb.publish()
	sn := sb.Snapshot()
	st := sb.LaneStatuses()
	if sn.Get(DropTunWrite) != 1 || sn.Get(TunOut) != 2 || len(st) != 1 || st[0].RxPackets != 2 || st[0].RxBytes != 200 {
		t.Fatalf("drop_tun_write %d tun_out %d, lanes %+v; want 1, 2 and 2 packets (200 bytes) received", sn.Get(DropTunWrite), sn.Get(TunOut), st)
	}
}
